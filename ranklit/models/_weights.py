"""A backbone's weights from a local file, no network: ``EmbeddingNet(weights=PATH)``.

The file is one of:

- a ``.safetensors`` file (read by the ``safetensors`` package; also recognised by its header whatever its name);
- a state dict saved by ``torch.save`` (``.pth``, ``.pt``, ``.bin``), read weights-only by ranklit's one loader
  (:func:`ranklit._checkpoint.load_checkpoint`: a file that names code to run is refused, nothing of it runs),
  bare or under a ``state_dict``, ``model_state_dict`` or ``model`` key;
- a ranklit (Lightning) checkpoint: its ``state_dict``'s ``net.backbone.*`` tensors.

**Key matching.** The file's keys are matched to the timm backbone's (``timm.create_model(name, num_classes=0)``)
under one prefix, found from the keys themselves: the prefix under which most of the file's tensors name a tensor of
the backbone (``""``, ``module.``, ``model.``, ``backbone.``, ``net.backbone.``, ``module.backbone.``…; the shortest
on a tie). Tensors outside that prefix (a ranklit checkpoint's head and loss, an ``EmbeddingNet`` state dict's head)
are left out. Under it, every tensor of the backbone must be in the file with its shape, and every tensor of the file
must be one of the backbone's, with two exceptions that a user expects:

- **the classifier** (timm's ``pretrained_cfg["classifier"]``: ``fc`` of a ResNet, ``head`` of a ViT,
  ``classifier`` of an EfficientNet) is left out: the backbone is built without one (``num_classes=0``), as timm
  itself drops it when it loads pretrained weights for ``num_classes=0``; so a file with or without it loads;
- a missing batch-norm ``num_batches_tracked`` counter keeps its value (0): some converted files omit it, and it
  only counts steps (it changes nothing unless a batch-norm layer has ``momentum=None``).

Anything else missing, unexpected or of another shape is an error (:class:`~ranklit.errors.UserError`) naming the
file, the counts and a few key names, and the fix; loading only part of a file is not offered (a partly initialised
backbone trains to a worse model without saying so). A load that succeeds logs one line: the file, the tensors
loaded, the prefix stripped and what was left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from ranklit._checkpoint import load_checkpoint
from ranklit.errors import UserError

__all__ = ["WEIGHTS_KEY", "load_backbone_weights", "read_state_dict"]

WEIGHTS_KEY = "model.net.init_args.weights"
_KINDS = "a .safetensors file, a state dict saved by torch.save (.pth, .pt, .bin) or a ranklit checkpoint"
_WRAPPERS = ("state_dict", "model_state_dict", "model")  # keys under which checkpoints keep the state dict
_COUNTER = "num_batches_tracked"
_SHOWN = 3  # key names quoted per list in a message
_TORCH_FILES = (b"PK\x03\x04", b"\x80")  # torch.save's zip archive, and its legacy format (a pickle, protocol >= 2)


def _few(names: list[str]) -> str:
    shown = ", ".join(f"`{name}`" for name in names[:_SHOWN])
    return shown + (f", ... ({len(names) - _SHOWN} more)" if len(names) > _SHOWN else "")


def _head(path: Path) -> bytes:
    """The first bytes of ``path``: a safetensors file has 8 bytes of header length, then its JSON header (``{``)."""
    with path.open("rb") as handle:
        return handle.read(9)


def _read_safetensors(path: Path) -> dict[str, Tensor]:
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device="cpu")
    except Exception as error:  # SafetensorError (a bad header, a truncated file), OSError
        first_line = (str(error).splitlines() or [""])[0][:200]
        raise UserError(
            f"`{WEIGHTS_KEY}` {path}: cannot be read as a safetensors file ({type(error).__name__}: {first_line}); "
            f"give {_KINDS}."
        ) from None


def _unwrapped(loaded: Any, path: Path) -> tuple[dict[str, Tensor], str]:
    """The tensors of what ``torch.load`` returned, and what the file is (for the report line)."""
    kind = "a state dict"
    if isinstance(loaded, Mapping):
        for key in _WRAPPERS:
            inner = loaded.get(key)
            if isinstance(inner, Mapping) and any(isinstance(value, Tensor) for value in inner.values()):
                lightning = "pytorch-lightning_version" in loaded
                kind = "a Lightning checkpoint" if lightning else f"a state dict under `{key}`"
                loaded = inner
                break
    tensors = {k: v for k, v in loaded.items() if isinstance(v, Tensor)} if isinstance(loaded, Mapping) else {}
    if not tensors:
        what = f"a dict with no tensor (keys {_few([str(k) for k in loaded])})" if isinstance(loaded, Mapping) else (
            f"a {type(loaded).__name__}, not a dict of tensors")
        raise UserError(f"`{WEIGHTS_KEY}` {path}: not a state dict ({what}); give {_KINDS}.")
    return {str(k): v for k, v in tensors.items()}, kind


def read_state_dict(path: str | Path) -> tuple[dict[str, Tensor], str]:
    """The tensors of a weights file (module docstring) and what the file is, e.g. ``"a safetensors file"``.

    Raises:
        UserError: the file is missing, unreadable, not a state dict, or names code to run (weights-only load).
    """
    path = Path(path)
    if not path.is_file():
        where = " (a folder)" if path.is_dir() else ""
        raise UserError(f"`{WEIGHTS_KEY}`: {path} not found{where}; give the path of {_KINDS}.")
    head = _head(path)
    if path.suffix == ".safetensors" or head[8:9] == b"{":
        return _read_safetensors(path), "a safetensors file"
    if not head.startswith(_TORCH_FILES):
        problem = f"neither a torch file nor a safetensors file: it begins with {head!r}"
    else:
        try:
            loaded = load_checkpoint(path, name=f"`{WEIGHTS_KEY}` {path}")
        except UserError as error:  # the message, without the chain (the CLI prints a chain's innermost UserError)
            problem = str(error).removeprefix(f"`{WEIGHTS_KEY}` {path}: ").rstrip(".")
        else:
            return _unwrapped(loaded, path)
        if "cannot be read" in problem:
            problem += ": truncated or damaged?"
    raise UserError(f"`{WEIGHTS_KEY}` {path}: {problem}. Give {_KINDS}.")


@dataclass
class _Match:
    """The file's tensors under ``prefix``, compared with the backbone's."""

    prefix: str
    weights: dict[str, Tensor] = field(default_factory=dict)  # matched, prefix stripped, shapes equal
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    reshaped: list[str] = field(default_factory=list)  # "`key`: file [..] vs backbone [..]"
    classifier: int = 0  # tensors of the classifier, left out
    outside: int = 0  # tensors outside the prefix, left out
    counters: int = 0  # missing num_batches_tracked, kept


def _best_prefix(keys: list[str], own: set[str]) -> tuple[str, int]:
    """The prefix under which most ``keys`` name one of ``own`` (the shortest on a tie), and how many do."""
    counts: dict[str, int] = {}
    for key in keys:
        parts = key.split(".")
        for start in range(len(parts)):
            if ".".join(parts[start:]) in own:
                prefix = "".join(f"{part}." for part in parts[:start])
                counts[prefix] = counts.get(prefix, 0) + 1
                break  # the longest suffix only: `a.b.weight` counts once
    if not counts:
        return "", 0
    prefix = min(counts, key=lambda p: (-counts[p], len(p)))
    return prefix, counts[prefix]


def _classifier_names(backbone: nn.Module) -> tuple[str, ...]:
    names = (getattr(backbone, "pretrained_cfg", None) or {}).get("classifier") or ()
    return (names,) if isinstance(names, str) else tuple(names)


def _match(state: dict[str, Tensor], backbone: nn.Module) -> _Match:
    own = backbone.state_dict()
    prefix, _ = _best_prefix(list(state), set(own))
    found = _Match(prefix)
    classifiers = tuple(f"{name}." for name in _classifier_names(backbone))
    under: dict[str, Tensor] = {}
    for key, value in state.items():
        if not key.startswith(prefix):
            found.outside += 1
        elif (name := key[len(prefix):]) not in own and name.startswith(classifiers):
            found.classifier += 1
        else:
            under[name] = value
    for name, value in under.items():
        if name not in own:
            found.unexpected.append(name)
        elif value.shape != own[name].shape:
            found.reshaped.append(f"`{name}`: file {list(value.shape)} vs backbone {list(own[name].shape)}")
        else:
            found.weights[name] = value
    for name in own:
        if name not in under:
            if name.rsplit(".", 1)[-1] == _COUNTER:
                found.counters += 1
            else:
                found.missing.append(name)
    return found


def _left_out(found: _Match) -> str:
    parts = [f"prefix `{found.prefix}` stripped"] if found.prefix else []
    if found.outside:
        parts.append(f"{found.outside} tensors outside it left out")
    if found.classifier:
        parts.append(f"the classifier left out ({found.classifier} tensors)")
    if found.counters:
        parts.append(f"{found.counters} missing `{_COUNTER}` counters kept at 0")
    return "; ".join(parts)


def load_backbone_weights(backbone: nn.Module, path: str | Path, name: str) -> str:
    """Copy the weights of ``path`` into ``backbone`` (the timm model ``name``); return the report line.

    Raises:
        UserError: a file that cannot be read (:func:`read_state_dict`), or whose tensors do not fit the backbone
            (module docstring), naming the counts, a few keys and the fix.

    Example:
        >>> import tempfile, timm, torch
        >>> net = timm.create_model("test_resnet", num_classes=0)
        >>> path = Path(tempfile.mkdtemp()) / "w.pth"
        >>> torch.save({"module." + k: v for k, v in net.state_dict().items()}, path)
        >>> print(load_backbone_weights(timm.create_model("test_resnet", num_classes=0), path, "test_resnet"))
        ... # doctest: +ELLIPSIS
        `model.net.init_args.weights` .../w.pth (a state dict): 90 of 90 tensors of backbone 'test_resnet' loaded; \
prefix `module.` stripped.
    """
    state, kind = read_state_dict(path)
    found = _match(state, backbone)
    total = len(backbone.state_dict())
    if not found.weights:
        raise UserError(
            f"`{WEIGHTS_KEY}` {path}: none of its {len(state)} tensors is one of backbone {name!r} (the file's keys: "
            f"{_few(list(state))}; the backbone's: {_few(list(backbone.state_dict()))}): weights of another "
            f"architecture? Give weights of {name!r} (timm's key names), or set `model.net.init_args.backbone` to "
            "the file's architecture."
        )
    if found.missing or found.unexpected or found.reshaped:
        problems = [f"{len(found.missing)} missing ({_few(found.missing)})" if found.missing else "0 missing",
                    f"{len(found.unexpected)} unexpected ({_few(found.unexpected)})" if found.unexpected
                    else "0 unexpected",
                    f"{len(found.reshaped)} of another shape ({'; '.join(found.reshaped[:_SHOWN])})" if found.reshaped
                    else "0 of another shape"]
        stripped = f" under the prefix `{found.prefix}`" if found.prefix else ""
        raise UserError(
            f"`{WEIGHTS_KEY}` {path}: its tensors do not fit backbone {name!r}{stripped}: {', '.join(problems)}. "
            f"Give weights of {name!r} with timm's key names (`timm.create_model({name!r}).state_dict()`), or the "
            "backbone the file was saved from."
        )
    backbone.load_state_dict(found.weights, strict=False)  # everything else checked above; counters kept
    details = _left_out(found)
    return (f"`{WEIGHTS_KEY}` {path} ({kind}): {len(found.weights)} of {total} tensors of backbone {name!r} loaded"
            + (f"; {details}." if details else "."))

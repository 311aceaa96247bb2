"""The configs shipped with ranklit, as the command line sees them: where they are, their descriptions, bare names
resolved to files, and the keys of older configs with where their setting lives now.

The repository's top-level ``configs/`` is the source; the wheel carries it as ``ranklit/configs``
(``setup.py``), so a bare name (``--config roadmap_inat.yaml``) works from any directory after
``pip install ranklit``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from ranklit.errors import UserError

__all__ = ["RENAMED", "config_dir", "list_configs", "main", "print_configs", "renamed_keys", "resolve_config_paths"]

_SAMPLER = "`data.batch_sampler` (`class_path: ranklit.data.PKSampler`, `init_args: {p: 8, k: 4, ...}`)"
_DATASET = "`data.train_dataset`/`val_dataset`/`test_dataset`/`gallery_dataset` (`class_path` + `init_args`)"
RENAMED = {  # keys of ranklit 0.1 configs and where their setting lives now
    "data.dataset": _DATASET,
    "data.dataset_options": f"the `init_args` of {_DATASET}",
    "data.train_split": "`data.train_dataset.init_args.split`",
    "data.val_split": "`data.val_dataset.init_args.split` (`data.val_dataset: null`: no validation)",
    "data.test_split": "`data.test_dataset.init_args.split` (default: the validation set)",
    "data.gallery_split": "`data.gallery_dataset.init_args.split`",
    "data.batch_size": f"`p` × `k` of {_SAMPLER}",
    "data.samples_per_class": f"`k` of {_SAMPLER}",
    "data.sampler": f"the `class_path` of {_SAMPLER}",
    "data.batches_per_super_pair": "`data.batch_sampler.init_args.batches_per_super_pair` (HierarchicalSampler)",
    "data.batches_per_epoch": "`data.batch_sampler.init_args.batches_per_epoch` (PKSampler)",
    "data.small_classes": "`data.batch_sampler.init_args.small_classes`",
    "data.seed": "`data.batch_sampler.init_args.seed`",
    "model.recall_at": "`model.metric.init_args.recall_at` (`class_path: ranklit.metrics.RetrievalMetrics`)",
    "model.hap_alpha": "`model.metric.init_args.alpha` (`class_path: ranklit.metrics.RetrievalMetrics`)",
    "model.multistage_chunk_size": "`model.multistage.init_args.chunk_size` (`ranklit.training.MultistageBackprop`)",
    "model.multistage_gradient_clip_val": "`model.multistage.init_args.gradient_clip_val`",
}


def config_dir() -> Path:
    """The shipped configs: ``ranklit/configs`` inside an installed wheel, else the source checkout's ``configs/``."""
    package = Path(__file__).resolve().parents[1]  # ranklit/cli/_config_files.py -> ranklit
    packaged = package / "configs"
    return packaged if packaged.is_dir() else package.parent / "configs"


def list_configs() -> list[tuple[str, str]]:
    """``(name, description)`` of every shipped config; the description is the config's first comment line.

    >>> dict(list_configs())["quickstart.yaml"].startswith("Quick start")
    True
    """
    rows = []
    for path in sorted(config_dir().glob("*.yaml")):
        first = path.read_text().splitlines()[0] if path.stat().st_size else ""
        rows.append((path.name, first.lstrip("# ").strip()))
    return rows


def resolve_config_paths(args: list[str]) -> list[str]:
    """Replace ``--config NAME`` by the shipped config ``NAME`` when ``NAME`` is not a file relative to the
    working directory.

    >>> resolve_config_paths(["fit", "--config", "quickstart.yaml"])[-1].endswith("configs/quickstart.yaml")
    True
    """
    resolved = list(args)
    for i, arg in enumerate(resolved):
        if arg == "--config" and i + 1 < len(resolved):
            resolved[i + 1] = _resolve(resolved[i + 1])
        elif arg.startswith("--config="):
            resolved[i] = "--config=" + _resolve(arg.split("=", 1)[1])
    return resolved


def _resolve(name: str) -> str:
    if Path(name).exists():
        return name
    for candidate in (config_dir() / name, config_dir() / Path(name).name):
        if candidate.exists():
            return str(candidate)
    return name


def renamed_keys(args: list[str]) -> list[str]:
    """The keys of an older ranklit config among command-line options and ``--config`` files (``RENAMED``).

    >>> renamed_keys(["fit", "--data.batch_size=64", "--trainer.max_epochs", "3"])
    ['data.batch_size']
    """
    found = []
    for i, arg in enumerate(args):
        if arg.startswith("--config"):
            path = arg.split("=", 1)[1] if "=" in arg else (args[i + 1] if i + 1 < len(args) else "")
            found += [key for key in _dotted_keys(path) if key in RENAMED]
        elif arg.startswith("--") and (key := arg[2:].split("=", 1)[0]) in RENAMED:
            found.append(key)
    return list(dict.fromkeys(found))


def _dotted_keys(path: str) -> list[str]:
    """Every nested key of a YAML file as ``a.b.c`` (nothing when the file cannot be read: the parser reports it)."""
    try:
        tree = yaml.safe_load(Path(path).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):  # not a YAML text (a checkpoint): the check says so
        return []
    keys, stack = [], [("", tree)]
    while stack:
        prefix, node = stack.pop()
        if isinstance(node, dict):
            for name, value in node.items():
                keys.append(f"{prefix}{name}")
                stack.append((f"{prefix}{name}.", value))
    return keys


def main(args: list[str]) -> None:
    """``ranklit configs``: :func:`print_configs` (no option but ``--help``)."""
    if args in (["-h"], ["--help"]):
        sys.stdout.write("usage: ranklit configs\n\nList the configs shipped with ranklit and what each trains.\n")
        return
    if args:
        raise UserError(f"`ranklit configs` takes no option (got {' '.join(args)}): it lists the shipped configs.")
    print_configs()


def print_configs() -> None:
    """Print the shipped configs and their descriptions (``ranklit configs``)."""
    rows = list_configs()
    width = max(len(name) for name, _ in rows)
    lines = [f"Configs shipped with ranklit ({config_dir()}); run one with `ranklit fit --config NAME`:", ""]
    sys.stdout.write("\n".join([*lines, *(f"  {name:<{width}}  {text}" for name, text in rows)]) + "\n")

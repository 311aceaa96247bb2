"""A crafted checkpoint runs nothing, in any command or API call that opens one (ranklit._checkpoint).

Each payload would create a marker file if it were unpickled (checked: a plain ``torch.load(weights_only=False)``
of each file creates it); every entry point must refuse the file in one line naming it (exit code 2 for a command)
and leave no marker behind. The commands run as the console script would, one start-up for all
(tests/cli/cli_cases.py).
"""

from __future__ import annotations

import builtins
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from packaging.requirements import Requirement
from PIL import Image

from ranklit._checkpoint import load_checkpoint
from ranklit.deploy import Retriever, build_index, load_model
from ranklit.errors import UserError
from ranklit.models import EmbeddingNet, RetrievalModule
from ranklit.training._checkpoint_io import SafeCheckpointIO
from tests.cli.cli_cases import drive

NET = {"class_path": "ranklit.models.EmbeddingNet",
       "init_args": {"backbone": "test_resnet", "pretrained": False, "embedding_dim": 8}}


class _Call:
    """Unpickled, calls ``function(*args)``: what a hostile checkpoint hides in its pickle."""

    def __init__(self, function: Any, *args: Any) -> None:
        self.function, self.args = function, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return self.function, self.args


def _payloads(marker: Path) -> dict[str, tuple[str, Any]]:
    """Where each payload hides (a dotted place in the checkpoint) and the call."""
    return {
        "os.system": ("state_dict", _Call(os.system, f"touch {marker}")),
        "subprocess": ("optimizer_states", _Call(subprocess.Popen, ["touch", str(marker)])),
        "builtins.exec": ("hyper_parameters", _Call(builtins.exec, f"open({str(marker)!r}, 'w').close()")),
        "nested": ("callbacks", {"RunCheckpoint": {"state": [1, {"deep": [_Call(builtins.eval, "__import__('os')"
                                                                                f".system('touch {marker}')")]}]}}),
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny genuine run (config, checkpoint, images, index) and one hostile checkpoint per payload."""
    root = tmp_path_factory.mktemp("safety")
    marker = root / "pwned"
    (root / "config.yaml").write_text(yaml.safe_dump({"model": {"net": NET}, "data": {"resize_size": 32,
                                                                                       "crop_size": 32}}))
    state = {f"net.{k}": v for k, v in EmbeddingNet("test_resnet", embedding_dim=8).state_dict().items()}
    (root / "images").mkdir()
    for i in range(3):
        Image.new("RGB", (32, 32), (80 * i, 40, 200 - 60 * i)).save(root / "images" / f"{i}.png")
    torch.save({"state_dict": state}, root / "good.ckpt")
    optimizer = {"class_path": "os.system", "init_args": {"command": f"touch {marker}"}}  # a config's way to run code
    torch.save({"state_dict": state, "hyper_parameters": {"net": NET, "optimizer": optimizer}}, root / "hparams.ckpt")
    build_index(load_model(root / "config.yaml", root / "good.ckpt"), root / "images", root / "index", progress=False)
    hostile = {}
    for name, (place, payload) in _payloads(marker).items():
        checkpoint: dict[str, Any] = {"epoch": 0, "global_step": 0, "state_dict": dict(state), "loops": {},
                                      "callbacks": {}, "optimizer_states": [], "lr_schedulers": [],
                                      "hyper_parameters": {"net": NET}}
        if place == "state_dict":
            checkpoint["state_dict"]["net.head.weight"] = payload
        elif place == "optimizer_states":
            checkpoint["optimizer_states"] = [{"state": {0: {"exp_avg": payload}}, "param_groups": []}]
        elif place == "hyper_parameters":
            checkpoint["hyper_parameters"]["loss"] = {"init_args": {"weights": [0.5, payload]}}
        else:
            checkpoint["callbacks"] = payload
        torch.save(checkpoint, root / f"{name}.ckpt")
        hostile[name] = root / f"{name}.ckpt"
        index = root / f"index-{name}"  # an index whose net.pt is the hostile pickle
        index.mkdir()
        for part in ("index.json", "paths.json", "descriptors"):
            os.symlink(root / "index" / part, index / part)
        (index / "net.pt").write_bytes(hostile[name].read_bytes())
    return {"root": root, "marker": marker, "hostile": hostile}


def test_each_payload_would_run_if_unpickled(files: dict[str, Any]) -> None:
    """The test's own check: each file does run its payload under a full unpickling."""
    for name, path in files["hostile"].items():
        torch.load(path, weights_only=False)
        assert _wait_for(files["marker"], 5.0), name
        files["marker"].unlink()


def _wait_for(marker: Path, seconds: float = 0.3) -> bool:
    """Whether ``marker`` exists within ``seconds`` (``subprocess.Popen`` returns before ``touch`` has run)."""
    deadline = time.monotonic() + seconds
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return marker.exists()


def _api_calls(root: Path, path: Path) -> dict[str, Any]:
    return {
        "load_checkpoint": lambda: load_checkpoint(path),
        "RetrievalModule.load_from_checkpoint": lambda: RetrievalModule.load_from_checkpoint(path),
        "load_model": lambda: load_model(root / "config.yaml", path),
        "Retriever.from_index": lambda: Retriever.from_index(root / f"index-{path.stem}"),
        "Lightning's restore (SafeCheckpointIO)": lambda: SafeCheckpointIO().load_checkpoint(path),
    }


@pytest.mark.parametrize("payload", ["os.system", "subprocess", "builtins.exec", "nested"])
def test_the_python_api_refuses_a_hostile_checkpoint(files: dict[str, Any], payload: str) -> None:
    path = files["hostile"][payload]
    for entry, call in _api_calls(files["root"], path).items():
        with pytest.raises(UserError) as refused:
            call()
        message = str(refused.value)
        weights = files["root"] / f"index-{payload}" / "net.pt"
        assert str(path if entry != "Retriever.from_index" else weights) in message, (entry, message)
        assert "names code to run" in message and "\n" not in message, (entry, message)
    assert not _wait_for(files["marker"])


def test_load_from_checkpoint_refuses_hostile_hyper_parameters(files: dict[str, Any]) -> None:
    """Lightning 2.5 imports and calls the ``_instantiator`` a checkpoint names, and the hyper-parameters are a
    config (``model.optimizer: os.system`` was called while the module was built): both refused first."""
    checkpoint = torch.load(files["root"] / "good.ckpt", weights_only=True)
    checkpoint["hyper_parameters"] = {"net": NET, "_instantiator": "os.system"}
    torch.save(checkpoint, files["root"] / "instantiator.ckpt")
    with pytest.raises(UserError, match=r"instantiator\.ckpt: refused: .*`_instantiator: os\.system`"):
        RetrievalModule.load_from_checkpoint(files["root"] / "instantiator.ckpt")
    with pytest.raises(UserError, match=r"hparams\.ckpt: refused: its hyper-parameters: `model\.optimizer: os\.sys"):
        RetrievalModule.load_from_checkpoint(files["root"] / "hparams.ckpt")
    assert not _wait_for(files["marker"])


@pytest.mark.slow  # nine commands, one start-up: about 45 s on 2 shared cores
def test_every_command_refuses_a_hostile_checkpoint_in_one_line(files: dict[str, Any]) -> None:
    root, hostile = files["root"], files["hostile"]
    cheap = ["--model.net.init_args.backbone=test_resnet", "--trainer.accelerator=cpu", "--trainer.logger=false"]
    run = root / "runs" / "quickstart" / "version_0" / "checkpoints"
    run.mkdir(parents=True)
    (run / "last.ckpt").write_bytes(hostile["nested"].read_bytes())
    names = list(hostile)
    refusal = "names code to run"
    cases = {  # the command, and the file its refusal must name
        "fit --ckpt_path": (["fit", "--config", "quickstart.yaml", *cheap, "--ckpt_path", str(hostile[names[0]])],
                            hostile[names[0]]),
        "fit --resume": (["fit", "--config", "quickstart.yaml", *cheap[:2], "--resume=true",
                          f"--trainer.logger.init_args.save_dir={root / 'runs'}"], run / "last.ckpt"),
        "test": (["test", "--config", "quickstart.yaml", *cheap, "--ckpt_path", str(hostile[names[1]])],
                 hostile[names[1]]),
        "validate": (["validate", "--config", "quickstart.yaml", *cheap, "--ckpt_path", str(hostile[names[2]])],
                     hostile[names[2]]),
        "predict": (["predict", "--config", "quickstart.yaml", *cheap, "--ckpt_path", str(hostile[names[3]]),
                     f"--predictions_path={root / 'predictions'}"], hostile[names[3]]),
        "export": (["export", "--config", str(root / "config.yaml"), "--ckpt_path", str(hostile[names[0]]),
                    "--format", "torchscript", "--output", str(root / "m.pt")], hostile[names[0]]),
        "index": (["index", "--config", str(root / "config.yaml"), "--ckpt_path", str(hostile[names[1]]),
                   "--images", str(root / "images"), "--output", str(root / "new-index"), "--no-progress"],
                  hostile[names[1]]),
        "search": (["search", "--index", str(root / f"index-{names[2]}"), "--query", str(root / "images" / "0.png")],
                   root / f"index-{names[2]}" / "net.pt"),
        "test, hostile hyper-parameters": (["test", "--config", "quickstart.yaml", *cheap, "--ckpt_path",
                                            str(root / "hparams.ckpt")], root / "hparams.ckpt"),
    }
    results = drive([args for args, _ in cases.values()], root, scratch=root)
    for (name, (_, path)), result in zip(cases.items(), results, strict=True):
        errors = [line for line in result["stderr"].splitlines() if line.startswith("error:")]
        other = [line for line in result["stderr"].splitlines() if line.strip() and not line.startswith("Skipping ")]
        assert result["returncode"] == 2, (name, result["stderr"][-2000:])
        assert len(errors) == 1 and other == errors and str(path) in errors[0], (name, result["stderr"][-2000:])
        assert ("its hyper-parameters: `model.optimizer: os.system`" if "hyper" in name else refusal) in errors[0], (
            name, errors)
    assert not _wait_for(files["marker"])
    assert not (root / "m.pt").exists() and not (root / "new-index").exists() and not (root / "predictions").exists()


def test_torch_before_2_6_is_neither_required_nor_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 47, item 1: torch's weights-only loading could be bypassed before 2.6 (CVE-2025-32434): pyproject
    requires 2.6, and under an older torch (installed with ``--no-deps``) every load is refused, naming the fix."""
    import tomllib  # Python >= 3.11, as tests/test_packaging.py

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    (torch_requirement,) = [r for r in map(Requirement, project["dependencies"]) if r.name == "torch"]
    assert "2.5.1" not in torch_requirement.specifier and "2.6.0" in torch_requirement.specifier
    path = tmp_path / "a.ckpt"
    torch.save({"state_dict": {"w": torch.ones(2)}}, path)
    monkeypatch.setattr(torch, "__version__", "2.5.1+cpu")
    for load in (lambda: load_checkpoint(path), lambda: SafeCheckpointIO().load_checkpoint(path)):
        with pytest.raises(UserError, match=r"torch 2\.5\.1\+cpu is installed: .* torch >= 2\.6 .*CVE-2025-32434"):
            load()

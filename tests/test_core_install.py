"""The core install: its requirements are the core's alone, and without the `train` extra the `ranklit` command says
what to install in one line. (CI's core-only environment runs the losses' and metrics' tests with the core alone.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import ranklit.cli

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def _names(requirements: list[str]) -> set[str]:
    return {r.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip() for r in requirements}


def test_the_core_requires_torch_torchmetrics_and_numpy_only() -> None:
    import tomllib  # Python 3.11+ (the suite's own environment)

    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert _names(project["dependencies"]) == {"torch", "torchmetrics", "numpy"}
    train = _names(project["optional-dependencies"]["train"])
    assert {"lightning", "timm", "torchvision", "jsonargparse", "pillow"} <= train
    assert set(ranklit.cli.TRAINING_STACK.values()) <= train  # what the command checks, the extra installs


def test_without_the_training_stack_the_command_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    hidden = {"lightning", "timm"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in hidden else real(name, *a))
    with pytest.raises(SystemExit) as stopped:
        ranklit.cli.main(["fit", "--config", "quickstart.yaml"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lightning, timm" in err and 'pip install "ranklit[train]"' in err

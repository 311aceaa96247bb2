"""Commands that do what they ask or refuse, and a config whose parts are type-checked before any is called.

Every case runs as the ``ranklit`` command would (one start-up for all: tests/cli/cli_cases.py); the hostile
values would each create a file if they were called, so the refusal is checked by that file's absence too. One case
runs as the console script with its own ``TMPDIR``: a command that exits 2 leaves nothing there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.cli.cli_cases import drive
from tests.ddp import repository_first_on_path, scaled_timeout

CHEAP = ["--model.net.init_args.backbone=test_resnet", "--trainer.accelerator=cpu", "--trainer.logger=false"]


def _hostile(key: str, marker: Path) -> dict:
    """A config fragment giving ``key`` the function ``os.system`` with a command that creates ``marker``."""
    part: dict = {"class_path": "os.system", "init_args": {"command": f"touch {marker}"}}
    for name in reversed(key.split(".")):
        part = {name: part}
    return part


HOSTILE = {  # the key, and the words the refusal must show
    "model.optimizer": "`torch.optim.Optimizer` subclass",
    "model.lr_scheduler": "`torch.optim.lr_scheduler.LRScheduler` subclass",
    "data.batch_sampler": "`torch.utils.data.Sampler` subclass",
    "data.train_dataset.init_args.transform": "a class whose instances are called on the image",
}
OPTIONS = {  # run options that would do other than asked, and the words the refusal must show
    "resume with a named file": (["--resume=true", "--ckpt_path=elsewhere/last-1.ckpt"],
                                 "give `--ckpt_path elsewhere/last-1.ckpt` alone"),
    "new rates without a resume": (["--resume_new_rates=[model.head_lr]"], "this run starts fresh"),
    "test with --resume": (["--resume=true"], "`ranklit test` reads the checkpoint named by `--ckpt_path FILE`"),
}


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    root = tmp_path_factory.mktemp("hostile")
    cases: dict[str, list[str]] = {}
    for key in HOSTILE:
        config = root / f"{key}.yaml"
        config.write_text(yaml.safe_dump(_hostile(key, root / f"ran-{key}")))
        cases[f"fit {key}"] = ["fit", "--config", "quickstart.yaml", "--config", str(config), *CHEAP]
    check = root / "check.yaml"
    check.write_text((root / "data.train_dataset.init_args.transform.yaml").read_text().replace("ran-", "check-ran-"))
    cases["data check transform"] = ["data", "check", "--config", "quickstart.yaml", "--config", str(check)]
    for name, (args, _) in OPTIONS.items():
        cases[name] = [name.split()[0] if name.startswith("test ") else "fit", "--config", "quickstart.yaml", *CHEAP,
                       *args]
    return root, dict(zip(cases, drive(list(cases.values()), root), strict=True))


@pytest.mark.parametrize("key", HOSTILE)
def test_a_function_given_as_a_part_is_refused_and_never_called(key: str, refusals: tuple) -> None:
    root, runs = refusals
    run = runs[f"fit {key}"]
    assert run["returncode"] == 2, run["stderr"]
    lines = [line for line in run["stderr"].splitlines() if not line.startswith("Seed set to")]
    assert len(lines) == 1 and lines[0].startswith(f"error: `{key}: os.system` is a function, not a class"), lines
    assert HOSTILE[key] in lines[0] and "What a config can do" in lines[0]
    assert not list(root.glob("*ran-*")), "the configured function was called"


def test_data_check_refuses_a_function_too(refusals: tuple) -> None:
    root, runs = refusals
    run = runs["data check transform"]
    assert run["returncode"] == 2 and "`data.train_dataset.init_args.transform: os.system`" in run["stderr"]
    assert not list(root.glob("check-ran-*"))


@pytest.mark.parametrize("name", OPTIONS)
def test_options_that_would_do_other_than_asked_are_refused(name: str, refusals: tuple) -> None:
    run = refusals[1][name]
    assert run["returncode"] == 2, run["stderr"]
    assert "Traceback" not in run["stderr"] and OPTIONS[name][1] in run["stderr"], run["stderr"]
    assert len(run["stderr"].splitlines()) <= 3, run["stderr"]


def test_the_command_exits_2_leaving_nothing_in_the_temporary_folder(tmp_path: Path) -> None:
    """As the console script, with a wandb logger (offline): no wandb folder (or any other) left behind."""
    temporary, marker = tmp_path / "tmp", tmp_path / "ran"
    temporary.mkdir()
    (tmp_path / "evil.yaml").write_text(yaml.safe_dump(_hostile("model.optimizer", marker)))
    wandb = ["--trainer.logger=lightning.pytorch.loggers.WandbLogger", "--trainer.logger.offline=true",
             f"--trainer.logger.save_dir={tmp_path}"]
    args = ["fit", "--config", "quickstart.yaml", "--config", "evil.yaml", *CHEAP[:-1], *wandb]
    env = {**os.environ, "TMPDIR": str(temporary), "WANDB_MODE": "offline", "PYTHONPATH": repository_first_on_path()}
    result = subprocess.run([sys.executable, "-m", "ranklit.cli", *args], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=scaled_timeout(600))
    assert result.returncode == 2 and "`model.optimizer: os.system`" in result.stderr, result.stderr[-2000:]
    assert not marker.exists()
    left = [p.name for p in temporary.iterdir() if not p.name.startswith("torchinductor")]
    assert not left, left

"""Issue 41: when the newest version's checkpoints are all damaged, ``--resume true`` names the older version's
complete state and the ``--ckpt_path`` that continues it (it used to name only the damaged version); ``--requeue
true`` with checkpointing off is refused leaving nothing (it used to leave an empty run folder)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ranklit.cli import main
from tests.callbacks.faults_harness import cli_args

COMPLETE = {"state_dict": {}, "optimizer_states": [], "loops": {}, "callbacks": {}, "epoch": 1, "global_step": 8}


def test_the_refusal_names_an_older_version_that_can_be_resumed(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    older, newer = (Path("runs/quickstart") / f"version_{n}" / "checkpoints" for n in (0, 1))
    older.mkdir(parents=True)
    newer.mkdir(parents=True)
    torch.save(COMPLETE, older / "last.ckpt")
    (newer / "last.ckpt").write_bytes(b"PK")  # truncated
    with pytest.raises(SystemExit) as refused:
        main([*cli_args(1, 0), "--trainer.devices=1", "--trainer.max_steps=1", "--resume=true"])
    err = capsys.readouterr().err
    assert refused.value.code == 2, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: --resume: no checkpoint of runs/quickstart/version_1/checkpoints can be resumed")
    assert (
        "An older run, runs/quickstart/version_0, holds a complete training state (last.ckpt, epoch 1, step 8): "
        "`--ckpt_path runs/quickstart/version_0/checkpoints/last.ckpt` continues it." in line
    )
    assert sorted(p.name for p in newer.iterdir()) == ["last.ckpt"] and not list(Path("runs").rglob("run.lock"))


def test_requeue_with_checkpointing_off_is_refused_and_leaves_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as refused:
        main([*cli_args(1, 0), "--trainer.devices=1", "--trainer.max_steps=1", "--resume=true", "--requeue=true",
              "--trainer.enable_checkpointing=false"])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and "error: `--requeue true` needs the run's checkpoints" in err, err
    assert list(tmp_path.iterdir()) == []

"""Resuming through the CLI: an interrupted quick start resumed with ``--resume true`` equals the uninterrupted run.

The quick start trains 2 epochs of 4 batches with a validation per epoch and a ``metrics.csv`` row per step. One run is
interrupted by Ctrl-C (``SIGINT``) in the middle of step 3 (between its forward and backward passes), resumed,
interrupted by ``SIGTERM`` in the middle of step 6 and resumed again, each time with the same command plus ``--resume
true``: its last weights equal those of the uninterrupted run, and its ``metrics.csv`` holds each row of the
uninterrupted run exactly once (one baseline at step 0, none on resume).
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ranklit.cli import main
from tests.cli.test_cli import TINY
from tests.ddp import default_signals, scaled_timeout
from tests.tiny import synthetic_args

REPOSITORY = Path(__file__).resolve().parents[2]
QUICK = [
    "fit", "--config", "quickstart.yaml", *TINY[:-1], *synthetic_args(),
    "--data.batch_sampler.init_args.batches_per_epoch=4", "--trainer.max_epochs=2",
    "--trainer.check_val_every_n_epoch=1", "--trainer.log_every_n_steps=1", "--trainer.enable_progress_bar=false",
    "--trainer.enable_model_summary=false",
]


def _fit(folder: Path, *extra: str) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(REPOSITORY), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "ranklit.cli", *QUICK, *extra]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=scaled_timeout(300),
                          preexec_fn=default_signals)


def _signal_at(step: int, name: str) -> str:
    callback = f'{{"class_path": "tests.cli.signals.SignalAt", "init_args": {{"step": {step}, "signal": "{name}"}}}}'
    return f"--trainer.callbacks+={callback}"


def _rows(folder: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((folder / "runs/quickstart/version_0/metrics.csv").open()))


def _checkpoint(folder: Path) -> dict:
    return torch.load(folder / "runs/quickstart/version_0/checkpoints/last.ckpt", map_location="cpu")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_interrupted_quick_start_resumes_into_the_uninterrupted_run(tmp_path: Path) -> None:
    reference, run = tmp_path / "reference", tmp_path / "run"
    reference.mkdir(), run.mkdir()
    assert _fit(reference).returncode == 0
    first = _fit(run, _signal_at(3, "SIGINT"), "--resume=true")
    assert first.returncode == 130 and "nothing to resume" in first.stderr, first.stderr[-3000:]
    assert "Training interrupted by SIGINT at global step 3" in first.stderr  # the batch ends, then the save
    second = _fit(run, _signal_at(6, "SIGTERM"), "--resume=true")  # the batch ends, the state is saved, exit 143
    assert second.returncode == 143, second.stderr[-3000:]
    assert "Resuming" in second.stderr and "Training interrupted by SIGTERM at global step 6" in second.stderr
    last = _fit(run, "--resume=true")
    assert last.returncode == 0, last.stderr[-3000:]
    assert not (run / "runs/quickstart/version_1").exists()  # the same version throughout
    assert "not resumable" not in second.stderr + last.stderr  # Lightning's warning: the sampler's position is restored
    expected, actual = _rows(reference), _rows(run)
    key = lambda r: (int(r["step"]), r.get("val/map", "") != "")  # noqa: E731
    assert sorted(map(key, actual)) == sorted(map(key, expected))  # every row once, one baseline (step 0)
    assert next(r["step"] for r in actual if r.get("val/map")) == "0"
    reference_state, run_state = _checkpoint(reference), _checkpoint(run)
    for name, want in reference_state["state_dict"].items():
        torch.testing.assert_close(run_state["state_dict"][name], want, rtol=0, atol=1e-6, msg=name)
    (want_optimizer,), (got_optimizer,) = reference_state["optimizer_states"], run_state["optimizer_states"]
    assert got_optimizer["param_groups"] == want_optimizer["param_groups"]
    torch.testing.assert_close(got_optimizer["state"], want_optimizer["state"], rtol=0, atol=1e-6)
    final = [{k: float(v) for k, v in r.items() if k.startswith("val/") and v} for r in (expected, actual)
             for r in [[row for row in r if row.get("val/map")][-1]]]
    assert final[0].keys() == final[1].keys() and len(final[0]) > 5
    for key in final[0]:
        assert final[1][key] == pytest.approx(final[0][key], abs=1e-6), key


def test_ckpt_path_last_without_a_run_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main([*QUICK, "--ckpt_path=last"])
    assert exit_info.value.code != 0
    err = capsys.readouterr().err
    assert "`--ckpt_path last`: no checkpoint" in err and "runs/quickstart/version_*/checkpoints" in err


def test_changed_model_setting_on_resume_is_refused_naming_the_key(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    short = [
        "--data.batch_sampler.init_args.batches_per_epoch=1", "--baseline_validation=false",
        "--trainer.limit_val_batches=1",
    ]
    main([*QUICK, *short, "--trainer.max_epochs=1", "--model.head_lr=0.0001"])
    with pytest.raises(SystemExit) as exit_info:
        main([*QUICK, *short, "--trainer.max_epochs=2", "--model.head_lr=0.001", "--resume=true"])
    assert exit_info.value.code == 2
    assert "model.head_lr: checkpoint 0.0001, config 0.001" in capsys.readouterr().err.splitlines()[-1]
    # the explicit way: the new rate named in --resume_new_rates replaces the checkpoint's from the next step
    main([*QUICK, *short, "--trainer.max_epochs=2", "--model.head_lr=0.001", "--resume=true",
          "--resume_new_rates=[model.head_lr]"])
    groups = _checkpoint(tmp_path)["optimizer_states"][0]["param_groups"]
    assert _checkpoint(tmp_path)["global_step"] == 2
    assert 0.001 in [g["lr"] for g in groups] and 0.0001 not in [g["lr"] for g in groups]


def test_one_run_one_folder_one_writer(tmp_path: Path, monkeypatch, capsys) -> None:
    """``ranklit test`` does not hide the run from ``--resume``; ``--ckpt_path`` continues a renamed or moved run in
    its own folder, and starts a new version from a checkpoint outside a run; a live writer's lock refuses a second
    one, changing nothing."""
    monkeypatch.chdir(tmp_path)
    short = [*QUICK, "--data.batch_sampler.init_args.batches_per_epoch=1", "--baseline_validation=false",
             "--trainer.limit_val_batches=1"]
    runs = tmp_path / "runs/quickstart"
    main([*short, "--trainer.max_epochs=1"])
    main(["test", *short[1:], f"--ckpt_path={runs / 'version_0/checkpoints/last.ckpt'}"])
    assert (runs / "version_1").is_dir()  # the test's own version, without checkpoints
    main([*short, "--trainer.max_epochs=2", "--resume=true"])
    assert f"Resuming {Path('runs/quickstart/version_0')} from" in capsys.readouterr().err
    assert sorted(p.name for p in runs.iterdir()) == ["version_0", "version_1"]
    (runs / "version_0").rename(runs / "renamed")
    main([*short, "--trainer.max_epochs=3", f"--ckpt_path={runs / 'renamed/checkpoints/last.ckpt'}"])
    moved = tmp_path / "elsewhere/project/moved"
    moved.parent.mkdir(parents=True)
    (runs / "renamed").rename(moved)
    main([*short, "--trainer.max_epochs=4", f"--ckpt_path={moved / 'checkpoints/last.ckpt'}"])
    assert sorted(p.name for p in runs.iterdir()) == ["version_1"]  # nothing new beside the test's version
    assert sorted(p.name for p in (moved / "checkpoints").glob("last*")) == ["last-1.ckpt", "last.ckpt"]
    assert torch.load(moved / "checkpoints/last.ckpt", weights_only=True)["global_step"] == 4
    steps = [int(row["step"]) for row in csv.DictReader((moved / "metrics.csv").open()) if row.get("train/loss")]
    assert steps == [0, 1, 2, 3]  # one row per step, in the one folder
    (tmp_path / "loose.ckpt").write_bytes((moved / "checkpoints/last.ckpt").read_bytes())
    main([*short, "--trainer.max_epochs=5", f"--ckpt_path={tmp_path / 'loose.ckpt'}"])  # not in a run: a new version
    assert torch.load(runs / "version_2/checkpoints/last.ckpt", weights_only=True)["global_step"] == 5
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (moved / "run.lock").write_text(f'{{"pid": {holder.pid}, "host": "{os.uname().nodename}", "since": "x"}}')
        before = {p: p.read_bytes() for p in moved.rglob("*") if p.is_file()}
        with pytest.raises(SystemExit) as exit_info:
            main([*short, "--trainer.max_epochs=5", f"--ckpt_path={moved / 'checkpoints/last.ckpt'}"])
        assert exit_info.value.code == 2
        assert f"is being trained by process {holder.pid}" in capsys.readouterr().err
        assert {p: p.read_bytes() for p in moved.rglob("*") if p.is_file()} == before
    finally:
        holder.kill()
        holder.wait()

"""RunCheckpoint's schedule and rotation, atomic writes, the choice of the checkpoint to resume from, the run lock,
the stop flags and new learning rates on resume, on a model of two layers (fast, in process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from ranklit.callbacks import FaultTolerance, RunCheckpoint
from ranklit.callbacks._locks import LOCK_FILE, RunLock, RunLocked, lock_holder
from ranklit.callbacks._new_rates import NewLearningRates
from ranklit.cli._runs import latest_checkpoint
from ranklit.training import SafeCheckpointIO, stops
from ranklit.training.stops import agree_to_stop, exit_code, mark_stopped
from tests.callbacks.test_faults import _Images, _Model


class _Saves(Callback):
    """Records the global step of every checkpoint written."""

    def __init__(self) -> None:
        self.steps: list[int] = []

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        self.steps.append(trainer.global_step)


def _fit(tmp_path: Path, schedule: RunCheckpoint, epochs: int = 2) -> _Saves:
    saves = _Saves()
    trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", logger=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path,
                        callbacks=[schedule, saves])
    trainer.fit(_Model(), torch.utils.data.DataLoader(_Images(), batch_size=2))  # 8 steps an epoch
    return saves


def test_schedule_saves_every_epoch_and_every_n_steps_and_keeps_the_latest(tmp_path: Path) -> None:
    saves = _fit(tmp_path, RunCheckpoint(tmp_path, every_n_steps=3, keep_latest=3))
    # every 3 steps (between batches: the state after step 3, 6, ...), and at each epoch's end (8, 16)
    assert saves.steps == [3, 6, 8, 9, 12, 15, 16]
    steps = {p.name: torch.load(p, weights_only=True)["global_step"] for p in tmp_path.glob("*.ckpt")}
    assert steps == {"last.ckpt": 16, "last-1.ckpt": 15, "last-2.ckpt": 12}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left
    assert latest_checkpoint(tmp_path).path == tmp_path / "last.ckpt"


def test_schedule_without_options_saves_each_epoch_end_only(tmp_path: Path) -> None:
    assert _fit(tmp_path, RunCheckpoint(tmp_path, keep_latest=1)).steps == [8, 16]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]


def test_every_minutes_saves_when_the_time_is_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 10_000, 50))  # each reading of the clock is 50 s later
    monkeypatch.setattr("ranklit.callbacks._checkpoints.time.monotonic", lambda: next(clock))
    saves = _fit(tmp_path, RunCheckpoint(tmp_path, every_minutes=2), epochs=1)
    assert saves.steps[-1] == 8 and len(saves.steps) >= 2  # at least once within the epoch, then its end


def test_schedule_settings_are_checked() -> None:
    with pytest.raises(ValueError, match=r"`checkpoint.every_n_steps` must be a positive integer, got 0"):
        RunCheckpoint(".", every_n_steps=0)
    with pytest.raises(ValueError, match=r"`checkpoint.every_minutes` must be a positive number"):
        RunCheckpoint(".", every_minutes=-1)


class _Unpicklable:
    def __reduce__(self) -> Any:
        raise RuntimeError("interrupted mid-write")


def test_atomic_write_never_leaves_a_partial_file(tmp_path: Path) -> None:
    path = tmp_path / "last.ckpt"
    SafeCheckpointIO().save_checkpoint({"a": torch.ones(3)}, path)
    before = path.read_bytes()
    with pytest.raises(RuntimeError, match="interrupted mid-write"):
        SafeCheckpointIO().save_checkpoint({"a": torch.zeros(3), "b": _Unpicklable()}, path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]


def test_resume_takes_the_newest_checkpoint_that_loads_and_is_complete(tmp_path: Path) -> None:
    _fit(tmp_path, RunCheckpoint(tmp_path, every_n_steps=2, keep_latest=3), epochs=1)  # steps 2, 4, 6, 8
    times = {"last.ckpt": 40, "interrupted.ckpt": 30, "last-1.ckpt": 20, "last-2.ckpt": 10}
    torch.save({"state_dict": {}}, tmp_path / "interrupted.ckpt")  # weights only
    data = (tmp_path / "last.ckpt").read_bytes()
    (tmp_path / "last.ckpt").write_bytes(data[: len(data) // 3])  # truncated
    for name, time in times.items():
        os.utime(tmp_path / name, (time, time))
    point = latest_checkpoint(tmp_path)
    assert point.path == tmp_path / "last-1.ckpt" and point.checkpoint["global_step"] == 6
    assert [line.split(":")[0] for line in point.skipped] == [str(tmp_path / "last.ckpt"),
                                                              str(tmp_path / "interrupted.ckpt")]
    assert "does not load" in point.skipped[0] and "incomplete (no optimizer_states" in point.skipped[1]
    (tmp_path / "last-1.ckpt").write_bytes(b"")
    assert latest_checkpoint(tmp_path).path == tmp_path / "last-2.ckpt"


def test_lock_names_a_live_process_and_is_taken_over_when_it_died(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / LOCK_FILE).write_text(f'{{"pid": {holder.pid}, "host": "{os.uname().nodename}", "since": "x"}}')
        assert lock_holder(tmp_path) == f"process {holder.pid} on {os.uname().nodename} (since x)"
        lock = RunLock(tmp_path)
        with pytest.raises(RunLocked, match=f"is being trained by process {holder.pid}"):
            lock.setup(L.Trainer(logger=False), _Model(), "fit")
    finally:
        holder.kill()
        holder.wait()
    assert lock_holder(tmp_path) is None  # its process is gone
    lock.setup(L.Trainer(logger=False), _Model(), "fit")
    assert f'"pid": {os.getpid()}' in (tmp_path / LOCK_FILE).read_text()
    lock.teardown(L.Trainer(logger=False), _Model(), "fit")
    assert not (tmp_path / LOCK_FILE).exists()


def test_stop_flags_and_exit_codes(tmp_path: Path) -> None:
    trainer = L.Trainer(logger=False, callbacks=[FaultTolerance(tmp_path)])
    mark_stopped(None)
    assert not agree_to_stop(trainer) and exit_code() is None
    stops._request(signal.SIGTERM, None)  # what the handler installed during `fit` does
    assert agree_to_stop(trainer) and trainer.received_sigterm
    mark_stopped(signal.SIGTERM)
    assert exit_code() == 143 and stops.stop_requested() is None
    mark_stopped(None)


class _CtrlC(Callback):
    """Presses Ctrl-C ``times`` times in the middle of step 3 (the handler's effect, without a real signal)."""

    def __init__(self, times: int) -> None:
        self.times = times

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: Any, optimizer: Any) -> None:
        if trainer.global_step == 2:
            for _ in range(self.times):
                stops._request(signal.SIGINT, None)


@pytest.mark.parametrize("times", [1, 2])
def test_one_ctrl_c_saves_after_the_batch_a_second_one_saves_nothing(times: int, tmp_path: Path) -> None:
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path,
                        callbacks=[FaultTolerance(tmp_path), _CtrlC(times)])
    with pytest.raises(SystemExit):
        trainer.fit(_Model(), torch.utils.data.DataLoader(_Images(), batch_size=2))
    assert exit_code() == 130
    saved = sorted(p.name for p in tmp_path.glob("*.ckpt"))
    if times == 1:  # the step finished, then the state was saved
        assert saved == ["interrupted.ckpt"]
        assert torch.load(tmp_path / "interrupted.ckpt", weights_only=True)["global_step"] == 3
    else:  # stopped inside the optimiser step: nothing claimed
        assert saved == [] and trainer.global_step == 2
    mark_stopped(None)


class _Scheduled(_Model):
    """SGD at ``lr`` halved every 2 steps."""

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=self.lr)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def test_new_learning_rates_scale_the_restored_schedule(tmp_path: Path) -> None:
    def fit(lr: float, steps: int, resume: str | None, *extra: Callback) -> L.Trainer:
        trainer = L.Trainer(max_steps=steps, accelerator="cpu", logger=False, enable_progress_bar=False,
                            enable_model_summary=False, default_root_dir=tmp_path,
                            callbacks=[RunCheckpoint(tmp_path), *extra])
        trainer.fit(_Scheduled(lr=lr), torch.utils.data.DataLoader(_Images(), batch_size=2), ckpt_path=resume)
        return trainer

    fit(0.4, 8, None)  # one epoch: lr 0.4 -> 0.025 after 8 steps
    resumed = fit(0.04, 10, str(tmp_path / "last.ckpt"), NewLearningRates())
    (group,) = resumed.optimizers[0].param_groups
    assert group["initial_lr"] == pytest.approx(0.04) and group["lr"] == pytest.approx(0.04 * 0.5**5)
    assert resumed.lr_scheduler_configs[0].scheduler.base_lrs == pytest.approx([0.04])

"""A callback for the launches racing for one run (``tests/callbacks/test_fault_injection.py``): it holds the run at
the start of training for ``seconds`` (a window in which the other launches are sure to meet its lock), and at the
end of training checks that ``run.lock`` still names this process (a refused launch must not have removed or
replaced it), failing the run otherwise."""

from __future__ import annotations

import json
import os
import time

import lightning as L
from lightning.pytorch.callbacks import Callback
from typing_extensions import override

from ranklit.cli._runs import run_directory


class PauseAtStart(Callback):
    """Sleeps ``seconds`` in ``on_train_start``; raises in ``on_train_end`` unless this process still holds the lock
    (module docstring). Changes no state of the run."""

    def __init__(self, seconds: float = 5.0) -> None:
        self.seconds = seconds

    @override
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        time.sleep(self.seconds)

    @override
    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        lock = run_directory(trainer) / "run.lock"
        holder = json.loads(lock.read_text()).get("pid") if lock.is_file() else None
        if trainer.is_global_zero and holder != os.getpid():
            raise RuntimeError(f"{lock} was removed or replaced while this run trained (it names {holder}).")

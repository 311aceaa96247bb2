"""``ResumableTraining``: every piece of training state Lightning does not save goes into the checkpoint.

Lightning checkpoints the weights, optimisers, schedulers and loop progress. A run resumed from them still differs
from the uninterrupted one unless three more things come back, which this callback saves in every checkpoint it is
present for (``ModelCheckpoint``, on-exception, SLURM's ``hpc_ckpt_*``, ``trainer.save_checkpoint``) and restores:

* **the batch sampler's position** (``trainer.train_dataloader.batch_sampler``, any sampler with ``state_dict``/
  ``load_state_dict``/``set_epoch``, e.g. :class:`ranklit.data.PKSampler`). The number of batches trained is read
  from Lightning's loop progress (``fit_loop.epoch_loop.batch_progress``), never from the sampler: a ``DataLoader``
  with workers draws batches ahead of training. A run resumed mid-epoch trains the rest of the epoch's batches;
* **the random states** of torch (CPU and every CUDA device), numpy and Python's ``random``: the states at the
  boundary of the last batch Lightning counts as trained (the state before a batch that was interrupted mid-step
  and will be replayed). Under DDP rank 0's states are saved and every rank restores them: they are equal on all
  ranks after ``seed_everything`` as long as every rank draws as many random numbers (same model and batch shapes);
* **the cross-batch memory** (``pl_module.memory``, a :class:`ranklit.training.CrossBatchMemory`), if any.

Every checkpoint also records the run's ``seed``: that of Lightning's ``seed_everything`` (``PL_GLOBAL_SEED``;
``None``: not seeded) in a fresh run, and the checkpoint's in a resumed one (its random states are the checkpoint's,
whatever the process was seeded with). The ``ranklit`` command refuses a resume given another seed
(:mod:`ranklit.cli._resuming`).

The state is applied in ``on_train_start``, after Lightning has created the training iterator (it calls ``iter()``
on the loader before ``set_epoch`` when resuming, and a loader with workers then already dispatches batches): the
callback positions the sampler, then re-creates the iterator so that the dispatched batches are the right ones, and
restores the random states so that the resumed stream continues exactly where the checkpoint left it. Lightning's
"dataloader is not resumable" warning is silenced once the position is restored (it lives in this callback, not in
the loader). **Loader workers:** a worker's random state depends on when its iterator was created, so the ranklit
samplers attach a seed to every index they yield (:class:`ranklit.data.samplers.base.SeededIndex`, from the sampler's
seed, the epoch and the slot) and ranklit datasets augment each image under it: a resumed run with workers draws the
same crops and flips as the uninterrupted one.

Example:
    >>> import lightning as L
    >>> trainer = L.Trainer(callbacks=[ResumableTraining()], logger=False, enable_progress_bar=False)
"""

from __future__ import annotations

import os
import random
import warnings
from typing import Any, cast

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback
from typing_extensions import override

from ranklit._compat.lightning import batch_progress, training_data_fetcher

__all__ = ["ResumableTraining", "ResumeRefused", "random_states", "set_random_states"]


class ResumeRefused(ValueError):
    """A checkpoint that cannot continue this run as configured (another sampler, sampler setting or process count
    inside an epoch, memory): raised before the first resumed batch, so nothing of the run has changed (the
    ``ranklit`` command exits with code 2 and the message, and leaves the run's files as they were)."""


def random_states() -> dict[str, Any]:
    """The states of torch's CPU and CUDA generators, numpy's and Python's ``random``, as checkpoint-safe objects.

    Example:
        >>> states = random_states(); first = torch.rand(2)
        >>> set_random_states(states); torch.equal(torch.rand(2), first)
        True
    """
    name, keys, position, has_gauss, cached = cast(tuple[str, np.ndarray, int, int, float], np.random.get_state())
    states: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "name": name,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "position": int(position),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_random_states(states: dict[str, Any]) -> None:
    """Restore what :func:`random_states` returned (the CUDA states only where CUDA is in use)."""
    torch.set_rng_state(states["torch"])
    numpy = states["numpy"]
    keys = numpy["keys"].numpy().astype(np.uint32)
    np.random.set_state(
        (
            numpy["name"],
            keys,
            numpy["position"],
            numpy["has_gauss"],
            numpy["cached_gaussian"],
        )
    )
    random.setstate(_as_tuples(states["python"]))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def _as_tuples(value: Any) -> Any:
    """Python's ``random`` state with its tuples back (a checkpoint may hand them back as lists)."""
    return tuple(_as_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def _process_seed() -> int | None:
    """The seed of Lightning's ``seed_everything`` in this process, ``None`` if it was not called."""
    seed = os.environ.get("PL_GLOBAL_SEED")
    return None if seed is None else int(seed)


def _batches_trained(trainer: L.Trainer) -> int:
    """Batches of the current epoch that Lightning counts as trained when it resumes from a checkpoint saved now:
    a batch whose step finished counts (even before ``on_train_batch_end`` completed), one interrupted mid-step does
    not (it is replayed)."""
    current: Any = batch_progress(trainer).current  # a processed/started tracker at run time
    return current.processed if current.processed == current.started else current.completed


def _batch_samplers(trainer: L.Trainer) -> list[Any]:
    """The stateful batch samplers of the training loaders (in loader order)."""
    loaders = trainer.train_dataloader
    if loaders is None:
        return []
    if isinstance(loaders, dict):
        loaders = list(loaders.values())
    elif not isinstance(loaders, (list, tuple)):
        loaders = [loaders]
    samplers = [getattr(loader, "batch_sampler", None) for loader in loaders]
    methods = ("state_dict", "load_state_dict", "set_epoch")
    return [s for s in samplers if all(callable(getattr(s, m, None)) for m in methods)]


class ResumableTraining(Callback):
    """Saves and restores the sampler position, the random states and the cross-batch memory (module docstring).

    Add it to the trainer's callbacks for the run and for its resumption (``trainer.fit(..., ckpt_path=...)``).
    Resuming needs the same samplers (their seed; inside an epoch their settings, batches per epoch and number of
    processes too: :meth:`ranklit.data.EpochBatchSampler.load_state_dict`) and the same memory size; a mismatch
    raises :class:`ResumeRefused` (a ``ValueError``) before any batch is trained.
    """

    def __init__(self) -> None:
        self._fitting: L.Trainer | None = None
        self._before_batch: dict[str, Any] | None = None
        self._restored: dict[str, Any] | None = None
        self._seed: int | None = None  # the run's seed, read from the checkpoint resumed (if it records one)
        self._seed_restored = False

    @staticmethod
    def run_seed(checkpoint: dict[str, Any]) -> tuple[bool, int | None]:
        """Whether ``checkpoint`` records the seed of its run (one of an older ranklit does not), and that seed
        (``None``: the run was not seeded).

        Example:
            >>> ResumableTraining.run_seed({"callbacks": {"ResumableTraining": {"seed": 7}}})
            (True, 7)
            >>> ResumableTraining.run_seed({"callbacks": {}})
            (False, None)
        """
        state = checkpoint.get("callbacks", {}).get(ResumableTraining.__qualname__) or {}
        return "seed" in state, state.get("seed")

    @override
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._fitting = trainer

    @override
    def on_train_batch_start(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self._before_batch = random_states()

    @override
    def state_dict(self) -> dict[str, Any]:
        trainer = self._fitting
        if trainer is None or trainer.lightning_module is None:
            return {}
        current: Any = batch_progress(trainer).current
        replayed = current.started > current.processed and self._before_batch is not None
        trained = _batches_trained(trainer)
        state: dict[str, Any] = {
            "batches_trained": trained,
            "samplers": [s.state_dict() | {"batches": trained} for s in _batch_samplers(trainer)],
            "random_states": self._before_batch if replayed else random_states(),
            "seed": self._seed if self._seed_restored else _process_seed(),
        }
        memory = getattr(trainer.lightning_module, "memory", None)
        if memory is not None:
            state["memory"] = memory.state_dict()
        return state

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._restored = state_dict or None
        if "seed" in state_dict:
            self._seed, self._seed_restored = state_dict["seed"], True

    @override
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        state, self._restored = self._restored, None
        if state is None:
            return
        try:
            self._restore(trainer, pl_module, state)
        except ValueError as error:
            raise ResumeRefused(str(error)) from error

    def _restore(self, trainer: L.Trainer, pl_module: L.LightningModule, state: dict[str, Any]) -> None:
        samplers = _batch_samplers(trainer)
        if len(samplers) != len(state["samplers"]):
            raise ValueError(
                f"The checkpoint holds the position of {len(state['samplers'])} stateful batch sampler(s), the "
                f"training loaders have {len(samplers)}: resume with the batch sampler of the interrupted run "
                "(e.g. `ranklit.data.PKSampler`) as the training loader's `batch_sampler`."
            )
        for sampler, sampler_state in zip(samplers, state["samplers"], strict=True):
            sampler.load_state_dict(sampler_state)
            sampler.set_epoch(trainer.current_epoch)  # Lightning's epoch wins (e.g. after `limit_train_batches`)
        if samplers:  # Lightning cannot see the restored position (a DataLoader has no state_dict) and would warn
            warnings.filterwarnings(  # Lightning 2.5.5-2.6.6's message and module, nothing else
                "ignore",
                message="You're resuming from a checkpoint that ended before the epoch ended",
                module=r"lightning\.pytorch\.loops\.training_epoch_loop",
            )
        self._restore_memory(pl_module, state.get("memory"))
        trained = state["batches_trained"]
        fetcher = training_data_fetcher(trainer)  # Lightning's training iterator, created before this hook
        epoch_start = trained == 0 or trained >= trainer.num_training_batches
        if epoch_start:  # the uninterrupted run creates the epoch's iterator after the checkpoint: draw as it did
            set_random_states(state["random_states"])
        if fetcher is not None:
            iter(fetcher)  # re-dispatch the batches from the restored position (workers prefetch at `iter()`)
        if not epoch_start:
            set_random_states(state["random_states"])

    @staticmethod
    def _restore_memory(pl_module: L.LightningModule, state: dict[str, Any] | None) -> None:
        memory = getattr(pl_module, "memory", None)
        if memory is not None and state is not None:
            memory.load_state_dict(state)
        elif memory is not None:
            warnings.warn(
                "The checkpoint holds no cross-batch memory: the memory starts empty.",
                stacklevel=2,
            )
        elif state is not None:
            raise ValueError(
                "The checkpoint holds a cross-batch memory but the model has none (`memory: null`): resume with the "
                "memory of the interrupted run."
            )

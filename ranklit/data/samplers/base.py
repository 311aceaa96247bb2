"""The base class of every ranklit batch sampler, :class:`EpochBatchSampler`, and the helpers a subclass uses.

A sampler derives from it, calls :meth:`EpochBatchSampler.setup_batches` in ``__init__``, sets ``num_batches``
(:func:`batches_per_rank`) and implements the hook :meth:`EpochBatchSampler.plan_epoch`: the batches of one epoch,
drawn with the generator it receives. The base class does the rest: epoch seeds, the split between DDP ranks, the
resumable position and the per-sample augmentation seeds (:class:`SeededIndex`). ``docs/extending.md`` has an
example."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.utils.data import Sampler

from ranklit._checks import check_positive_int

__all__ = [
    "EpochBatchSampler",
    "SeededIndex",
    "batches_per_rank",
    "label_matrix",
    "option",
    "process_group",
]


def process_group(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """Explicit ``rank``/``world_size``, else those of the running process group, else ``0``/``1``."""
    running = dist.is_available() and dist.is_initialized()
    if world_size is None:
        world_size = dist.get_world_size() if running else 1
    if rank is None:
        rank = dist.get_rank() if running else 0
    check_positive_int("world_size", world_size)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"`rank` must be an integer in [0, world_size={world_size}), got {rank!r}.")
    return rank, world_size


def label_matrix(labels: Tensor | Sequence[int] | Sequence[Sequence[int]], min_columns: int) -> Tensor:
    """Labels as a long ``[N, L]`` matrix (column 0 finest), with a clear error for anything else."""
    labels = torch.as_tensor(labels)
    if labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool:
        raise TypeError(f"`labels` must hold integers, got dtype {labels.dtype}; pass `dataset.labels`.")
    matrix = labels[:, None] if labels.dim() == 1 else labels
    if matrix.dim() != 2 or matrix.shape[0] == 0 or matrix.shape[1] < min_columns:
        expected = "[N] or [N, L]" if min_columns == 1 else f"[N, L] with L >= {min_columns} (fine, coarser...)"
        raise ValueError(f"`labels` must be a non-empty {expected} tensor, got shape {tuple(labels.shape)}.")
    return matrix.long()


def option(name: str) -> str:
    """A sampler option as a message names it, with its key under the ``ranklit`` CLI.

    >>> option("p")
    '`p` (CLI: `--data.batch_sampler.init_args.p`)'
    """
    return f"`{name}` (CLI: `--data.batch_sampler.init_args.{name}`)"


def batches_per_rank(num_batches: float, world_size: int, drop_last: bool, what: str) -> int:
    """Batches each rank runs: the plan rounded down (``drop_last``) or up to a multiple of ``world_size``."""
    per_rank = math.floor(num_batches / world_size) if drop_last else math.ceil(num_batches / world_size)
    if per_rank < 1:
        raise ValueError(
            f"{what} give {num_batches:g} full batch(es) per epoch, fewer than world_size={world_size}; "
            f"use a smaller {option('p')}, or `drop_last=False`."
        )
    return per_rank


class _EpochForwarder:
    """Exposed as ``batch_sampler.sampler``, where Lightning looks for ``set_epoch``; forwards the call."""

    def __init__(self, owner: EpochBatchSampler) -> None:
        self._owner = owner

    def set_epoch(self, epoch: int) -> None:
        self._owner.set_epoch(epoch)


def _mix(*values: int) -> int:
    """A 63-bit seed from integers (a fixed polynomial hash: the same on every machine, process and run)."""
    seed = 0
    for value in values:
        seed = (seed * 0x9E3779B97F4A7C15 + value + 1) % (1 << 63)
    return seed


class SeededIndex(int):
    """A dataset index carrying the seed of its sample's augmentation (``augmentation_seed``).

    The ranklit batch samplers yield these: ranklit datasets run their transform under that seed, so an image gets the
    same crop and flip whatever the loader worker, the process and whether the run was resumed (a worker's global
    random state depends on when its iterator was created). It is an ``int`` everywhere else.

    Example:
        >>> index = SeededIndex(7, seed=123)
        >>> index + 1, index.augmentation_seed
        (8, 123)
    """

    augmentation_seed: int

    def __new__(cls, index: int, seed: int) -> SeededIndex:
        self = super().__new__(cls, index)
        self.augmentation_seed = seed
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return SeededIndex, (int(self), self.augmentation_seed)


class EpochBatchSampler(Sampler[list[int]]):
    """Shared machinery: epoch seeding, rank split, length, resumable position, and the guard against Lightning's
    sampler injection.

    **Position and resumption.** ``iter(sampler)`` does nothing yet: the plan of the epoch is built at the first
    ``next()``, from the epoch selected at that moment, so Lightning may call ``iter()`` before ``set_epoch()`` (it
    does when it resumes a run). The sampler keeps its position, ``state_dict() == {"epoch": e, "batches": n, ...}``:
    ``n`` batches of epoch ``e`` were handed out (or skipped on resumption). ``load_state_dict`` puts a fresh sampler
    at that position: its next iteration yields the batches ``n, n + 1, ...`` of epoch ``e`` (epoch ``e + 1`` from
    its start if epoch ``e`` was complete), and the following epochs are the uninterrupted run's own.

    "Handed out" is not "trained": a ``DataLoader`` with workers draws ``prefetch_factor × num_workers`` batches
    ahead, so a checkpoint must store the number of batches the *trainer* finished instead.
    :class:`ranklit.callbacks.ResumableTraining` overwrites ``batches`` with the count of Lightning's loop progress.
    ``set_epoch`` with another epoch starts that epoch from its first batch; with the epoch already selected (what
    Lightning does after a resumption) it keeps the position.
    """

    num_batches: int  # batches per rank and epoch, set by the subclass
    #: The attributes, besides the seed and the epoch length, that decide which items an epoch's plan draws: a resume
    #: inside an epoch needs the checkpoint's values (:meth:`load_state_dict`). A subclass with settings of its own
    #: extends it (``PLAN_SETTINGS = (*EpochBatchSampler.PLAN_SETTINGS, "my_setting")``).
    PLAN_SETTINGS: tuple[str, ...] = ("p", "k", "drop_last")

    def __new__(cls, *args: Any, **kwargs: Any) -> EpochBatchSampler:
        # Lightning re-creates a batch sampler as ``cls(distributed_sampler, batch_size=..., drop_last=...)`` when
        # `use_distributed_sampler` is on; that would silently break the per-rank split, so refuse it loudly.
        if args and isinstance(args[0], Sampler):
            raise TypeError(
                f"`{cls.__name__}` received a `{type(args[0]).__name__}` instead of labels: Lightning is trying to "
                f"inject its distributed sampler, but `{cls.__name__}` already gives each DDP rank its own batches. "
                "Set `trainer.use_distributed_sampler: false` in the config (`Trainer(use_distributed_sampler=False)`)."
            )
        return super().__new__(cls)

    def setup_batches(
        self, p: int, k: int, seed: int, rank: int | None, world_size: int | None, drop_last: bool
    ) -> None:
        """Called by a subclass's ``__init__``: batches of ``p × k`` images (``k=1`` for batches not built from
        classes), the seed of epoch 0, this process's ``rank`` among ``world_size`` (``None``: the running process
        group's, else 0 of 1) and whether an incomplete last batch is dropped."""
        self.p, self.k = check_positive_int("p", p), check_positive_int("k", k)
        self.batch_size = self.p * self.k
        self.seed, self.epoch, self.drop_last = int(seed), 0, bool(drop_last)
        self.rank, self.world_size = process_group(rank, world_size)
        self.sampler = _EpochForwarder(self)
        self._batches = 0  # batches of `epoch` handed out or skipped: the position the next iteration starts from

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose batches the next iteration yields (Lightning calls it before every epoch).

        Another epoch than the selected one starts from its first batch; the selected one keeps its position.
        """
        if int(epoch) != self.epoch:
            self.epoch, self._batches = int(epoch), 0

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self) -> Iterator[list[int]]:
        return self._iterate()  # a generator: the plan is built at the first `next()`, with the epoch selected then

    def _iterate(self) -> Iterator[list[int]]:
        epoch, start = self.epoch, self._batches
        plan = self.plan_epoch(torch.Generator().manual_seed(self.seed + epoch))
        mine = itertools.islice(itertools.cycle(plan), self.rank, self.num_batches * self.world_size, self.world_size)
        self._batches = 0 if start >= self.num_batches else start  # a finished position means a new pass
        for batch in itertools.islice(mine, self._batches, None):
            number = self.rank + self._batches * self.world_size  # the batch's place in the epoch's plan
            self._batches += 1
            yield [SeededIndex(i, _mix(self.seed, epoch, number, slot)) for slot, i in enumerate(batch)]

    def state_dict(self) -> dict[str, Any]:
        """The position (``epoch``, ``batches`` handed out) and what the plan of an epoch depends on: the ``seed``,
        ``num_batches``, ``world_size`` and the ``settings`` of :attr:`PLAN_SETTINGS`.

        Example:
            >>> from ranklit.data import PKSampler
            >>> sampler = PKSampler(torch.arange(8) // 2, p=2, k=2)
            >>> batches = iter(sampler); first = next(batches)
            >>> state = sampler.state_dict(); state["epoch"], state["batches"], state["settings"]["k"]
            (0, 1, 2)
            >>> resumed = PKSampler(torch.arange(8) // 2, p=2, k=2); resumed.load_state_dict(state)
            >>> list(resumed) == list(batches)
            True
        """
        return {
            "epoch": self.epoch,
            "batches": self._batches,
            "seed": self.seed,
            "num_batches": self.num_batches,
            "world_size": self.world_size,
            "settings": self.plan_settings(),
        }

    def plan_settings(self) -> dict[str, Any]:
        """The values of :attr:`PLAN_SETTINGS` (the effective ones: ``p`` lowered to the classes there are)."""
        return {name: getattr(self, name) for name in self.PLAN_SETTINGS}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at the position of :meth:`state_dict` (``batches`` may be replaced by the batches trained).

        A position at the end of an epoch resumes at the start of the next one, which is planned afresh: there the
        number of processes (``trainer.devices`` × ``trainer.num_nodes``), the epoch length and the settings of
        :attr:`PLAN_SETTINGS` (``p``, ``k``…) may change; the ``seed`` may not (it plans every epoch). Inside an epoch
        they must all be the interrupted run's, since the rest of its batches was planned and dealt with them: another
        ``k`` would draw other images for the rest of the epoch, so it is refused rather than resumed inexactly. (A
        state of an older ranklit has no ``settings``: only its seed, length and world size are compared.)

        Raises:
            ValueError: ``state`` lacks a key, holds a negative position, comes from a sampler with another seed, or,
                inside an epoch, with another number of batches, world size or plan setting (each named, with the
                checkpoint's value, this sampler's and the ways on).
        """
        missing = sorted({"epoch", "batches", "seed", "num_batches", "world_size"} - set(state))
        if missing:
            raise ValueError(f"`state` of {type(self).__name__} lacks {missing}; pass what `state_dict()` returned.")
        epoch, batches = int(state["epoch"]), int(state["batches"])
        if epoch < 0 or batches < 0:
            raise ValueError(f"`state` holds a negative position: epoch={epoch}, batches={batches}.")
        finished = batches >= int(state["num_batches"])
        saved = {"seed": state["seed"], "world_size": state["world_size"], **state.get("settings", {}),
                 "num_batches": state["num_batches"]}
        mine = {"seed": self.seed, "world_size": self.world_size, **self.plan_settings(),
                "num_batches": self.num_batches}
        compared = ["seed"] if finished else list(saved)
        if changed := [key for key in compared if key in mine and saved[key] != mine[key]]:
            raise ValueError(self._changed_on_resume(changed, saved, mine, epoch, batches))
        self.epoch, self._batches = (epoch + 1, 0) if finished else (epoch, batches)

    def _changed_on_resume(
        self, changed: list[str], saved: dict[str, Any], mine: dict[str, Any], epoch: int, batches: int
    ) -> str:
        """The refusal of :meth:`load_state_dict`: each value that changed (the checkpoint's, this sampler's), and
        the ways on."""
        names = {
            "world_size": "`world_size` (the number of processes, `trainer.devices` x `trainer.num_nodes`)",
            "num_batches": "`num_batches` (batches per epoch and process: `batches_per_epoch`, the dataset, the batch "
            "size)",
        }
        changes = "; ".join(f"{names.get(key) or option(key)}: checkpoint {saved[key]!r}, this one {mine[key]!r}"
                            for key in changed)
        where = f"The checkpoint's {type(self).__name__} stopped at batch {batches} of epoch {epoch}"
        if "seed" in changed:
            fix = "The seed plans every epoch of the run: resume with the checkpoint's, or start a new run."
        else:
            fix = (
                f"The rest of epoch {epoch} was planned with the checkpoint's values, which may change only at the "
                f"end of an epoch: resume with them to finish epoch {epoch} (e.g. with `--trainer.max_epochs "
                f"{epoch + 1}`), then with the new ones; or start a new run."
            )
        return f"{where}, and this sampler differs: {changes}. {fix}"

    def plan_epoch(self, generator: torch.Generator) -> list[list[int]]:
        """The hook of a subclass: the batches of one epoch (lists of dataset indices), drawn with ``generator`` (seeded
        with ``seed + epoch``) and nothing else, so that every DDP rank plans the same epoch and takes its share. The
        plan may be longer or shorter than ``num_batches × world_size``: it is cut, or cycled, to that length."""
        raise NotImplementedError(
            f"`{type(self).__name__}` must implement `plan_epoch(generator)`, the batches of one epoch."
        )

"""Cross-batch memory (XBM, Wang et al. 2020): rank each query against the embeddings of past batches too.

A FIFO of *detached* embeddings, labels and sample ids. Each training step enqueues the (gathered) batch first, then
ranks every query against ``memory ∪ batch``: the live batch, which carries gradients, plus the memory entries of
other samples ([spec §3][spec-training]). A query is never ranked against itself: its own entries are excluded by sample
id, and the live batch replaces every stored copy of its samples, so a stale embedding of a sample seen in an earlier
epoch is never ranked next to its fresh one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ranklit._checks import check_positive_int
from ranklit.functional.inputs import compute_dtype
from ranklit.functional.sample_ids import latest_per_id

__all__ = ["CrossBatchMemory"]


@dataclass
class _Storage:
    """Ring buffers of the memory; ``filled`` marks the slots holding an entry."""

    embeddings: Tensor
    labels: Tensor
    ids: Tensor
    filled: Tensor

    @classmethod
    def allocate(cls, size: int, embeddings: Tensor, labels: Tensor) -> _Storage:
        device = embeddings.device
        return cls(
            embeddings=torch.zeros(
                size,
                embeddings.shape[1],
                dtype=compute_dtype(embeddings.dtype),
                device=device,
            ),
            labels=torch.zeros(size, *labels.shape[1:], dtype=torch.long, device=device),
            ids=torch.zeros(size, dtype=torch.long, device=device),
            filled=torch.zeros(size, dtype=torch.bool, device=device),
        )

    def stored(self, name: str) -> Tensor:
        return getattr(self, name)[self.filled]

    def to(self, device: torch.device) -> _Storage:
        return _Storage(*(getattr(self, name).to(device) for name in _STATE))


_STATE = ("embeddings", "labels", "ids", "filled")


class CrossBatchMemory:
    """FIFO memory of past embeddings that lengthens the ranking list of a ranking loss (XBM).

    With a memory, :class:`ranklit.models.RetrievalModule` adds ``weight × loss(queries vs memory ∪ batch)`` to the
    in-batch (or DDP-gathered) loss from global step ``start_step`` on, as XBM does (Wang et al. 2020, Eq. 5 with
    ``λ = weight``). The memory is filled from the first step so it is full when it starts being used. Memory
    embeddings carry no gradient; they drift slowly when the learning rate is small, which is XBM's premise.

    The storage is created on the first :meth:`enqueue`, on the device of the embeddings, in their computation dtype
    (float32 under bf16/fp16 autocast, float64 stays). :meth:`state_dict`/:meth:`load_state_dict` carry it (storage and
    FIFO pointer) into checkpoints, so a resumed run ranks against the same memory as the uninterrupted one
    (:class:`ranklit.callbacks.ResumableTraining` does it). Under DDP every rank enqueues the same gathered batch, so
    the memories stay identical and one copy is saved.

    Memory: ``size × (D × 4 + 8 (L + 1))`` bytes. Time per step: one ``O(size)`` id lookup; the loss then ranks
    ``Q`` queries against up to ``size + B`` items.

    Args:
        size: number of embeddings kept (XBM: 55k on SOP, i.e. about the whole training set).
        start_step: first global step whose loss uses the memory (XBM starts after a warm-up of 1k steps).
        weight: weight of the memory loss term added to the in-batch loss.

    Example:
        >>> memory = CrossBatchMemory(size=4)
        >>> e = torch.nn.functional.normalize(torch.randn(3, 2), dim=1)
        >>> memory.enqueue(e, torch.tensor([0, 0, 1]), torch.tensor([10, 11, 12]))
        >>> memory.enqueue(e[:2], torch.tensor([0, 0]), torch.tensor([12, 13]))  # 12 is refreshed, 10 is evicted
        >>> sorted(memory.ids.tolist())
        [11, 12, 13]
        >>> refs, ref_labels, ref_ids = memory.retrieval_set(e[:1], torch.tensor([1]), torch.tensor([12]))
        >>> sorted(ref_ids.tolist())  # the live batch (id 12, with gradients) and the other stored samples
        [11, 12, 13]
    """

    def __init__(self, size: int, start_step: int = 0, weight: float = 1.0) -> None:
        check_positive_int("size", size, " (cross-batch memory rows)")
        if isinstance(start_step, bool) or not isinstance(start_step, int) or start_step < 0:
            raise ValueError(f"`start_step` must be a non-negative integer (a global step), got {start_step!r}.")
        if not weight > 0:
            raise ValueError(f"`weight` of the memory loss must be > 0, got {weight!r}; to disable it, set no memory.")
        self.size = size
        self.start_step = start_step
        self.weight = float(weight)
        self.reset()

    def reset(self) -> None:
        """Empty the memory (the storage is re-created on the next :meth:`enqueue`)."""
        self._store: _Storage | None = None
        self._pointer = 0

    def state_dict(self) -> dict[str, Any]:
        """The memory's content: ``size``, the FIFO ``pointer`` and, once allocated, its buffers (detached tensors).

        Example:
            >>> memory = CrossBatchMemory(size=4)
            >>> memory.enqueue(torch.eye(2), torch.tensor([0, 1]), torch.tensor([7, 8]))
            >>> restored = CrossBatchMemory(size=4); restored.load_state_dict(memory.state_dict())
            >>> restored.ids.tolist(), restored.state_dict()["pointer"]
            ([7, 8], 2)
        """
        state: dict[str, Any] = {"size": self.size, "pointer": self._pointer}
        if self._store is not None:
            state |= {name: getattr(self._store, name).detach().clone() for name in _STATE}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into this memory (fresh or not); the buffers keep the device they come on and
        move to the embeddings' device at the next :meth:`enqueue`.

        Raises:
            ValueError: another ``size``, a malformed state, or buffers whose embedding dimension or label shape
                differ from those this memory already holds.
        """
        if not {"size", "pointer"} <= set(state):
            raise ValueError("`state` of the cross-batch memory needs `size` and `pointer`; pass `state_dict()`.")
        if int(state["size"]) != self.size:
            raise ValueError(
                f"The checkpoint holds a cross-batch memory of size {int(state['size'])}, this one has size "
                f"{self.size}: resume with `memory.size: {int(state['size'])}` (or start a new run)."
            )
        if not set(_STATE) <= set(state):
            self.reset()
            return
        store = _Storage(*(state[name] for name in _STATE))
        if not (
            store.embeddings.ndim == 2
            and store.filled.dtype == torch.bool
            and all(getattr(store, name).shape[0] == self.size for name in _STATE)
        ):
            raise ValueError(
                f"`state` of the cross-batch memory must hold {self.size} rows of embeddings [size, D], labels, ids "
                f"and a boolean `filled`, got embeddings {tuple(store.embeddings.shape)}."
            )
        if self._store is not None:
            self._check(store.embeddings[:1], store.labels[:1], store.ids[:1])
        self._store, self._pointer = store, int(state["pointer"]) % self.size

    def __len__(self) -> int:
        """Number of stored entries."""
        return 0 if self._store is None else int(self._store.filled.sum())

    def is_active(self, step: int) -> bool:
        """Whether the loss of global step ``step`` uses the memory (``step >= start_step``)."""
        return step >= self.start_step

    @property
    def embeddings(self) -> Tensor:
        """``[M, D]`` stored embeddings (FIFO slot order)."""
        return self._require().stored("embeddings")

    @property
    def labels(self) -> Tensor:
        """``[M]`` or ``[M, L]`` stored labels."""
        return self._require().stored("labels")

    @property
    def ids(self) -> Tensor:
        """``[M]`` stored sample ids."""
        return self._require().stored("ids")

    def _require(self) -> _Storage:
        if self._store is None:
            raise ValueError("The cross-batch memory is empty: call `enqueue` first.")
        return self._store

    def _check(self, embeddings: Tensor, labels: Tensor, ids: Tensor) -> None:
        if not (embeddings.ndim == 2 and ids.ndim == 1 and labels.shape[:1] == embeddings.shape[:1] == ids.shape):
            raise ValueError(
                "The cross-batch memory expects `embeddings` [B, D], `labels` [B] or [B, L] and `ids` [B], got "
                f"{tuple(embeddings.shape)}, {tuple(labels.shape)} and {tuple(ids.shape)}."
            )
        store = self._store
        if store is not None and (
            embeddings.shape[1] != store.embeddings.shape[1] or labels.shape[1:] != store.labels.shape[1:]
        ):
            raise ValueError(
                f"The cross-batch memory holds embeddings of dimension {store.embeddings.shape[1]} and labels of "
                f"shape [*{list(store.labels.shape[1:])}], got {embeddings.shape[1]} and "
                f"[*{list(labels.shape[1:])}]: one memory serves one embedding size and label layout."
            )

    def enqueue(self, embeddings: Tensor, labels: Tensor, ids: Tensor) -> None:
        """Store a batch (detached), replacing the oldest entries and every older copy of the same sample ids.

        A sample drawn twice in the batch is stored once (its last copy).

        Args:
            embeddings: ``[B, D]`` embeddings (a batch larger than ``size`` keeps ``size`` of its samples).
            labels: ``[B]`` or ``[B, L]`` labels.
            ids: ``[B]`` global sample ids (dataset indices).
        """
        self._check(embeddings, labels, ids)
        if self._store is None:
            self._store = _Storage.allocate(self.size, embeddings, labels)
        elif self._store.ids.device != embeddings.device:  # restored from a checkpoint on another device
            self._store = self._store.to(embeddings.device)
        store = self._store
        device = store.ids.device
        keep = latest_per_id(ids)[-self.size :]  # one entry per sample: its last copy in the batch
        embeddings, labels, ids = (t.detach()[keep].to(device) for t in (embeddings, labels, ids))
        store.filled &= ~torch.isin(store.ids, ids)
        slots = (self._pointer + torch.arange(ids.shape[0], device=device)) % self.size
        store.embeddings[slots] = embeddings.to(store.embeddings.dtype)
        store.labels[slots] = labels.long()
        store.ids[slots] = ids.long()
        store.filled[slots] = True
        self._pointer = (self._pointer + ids.shape[0]) % self.size

    def retrieval_set(self, embeddings: Tensor, labels: Tensor, ids: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``memory ∪ batch``: the live batch (with its gradients) followed by the stored entries of other samples.

        Args:
            embeddings: ``[B, D]`` the live (gathered) batch.
            labels: ``[B]`` or ``[B, L]`` its labels.
            ids: ``[B]`` its sample ids.

        Returns:
            ``(ref_embeddings, ref_labels, ref_ids)`` to pass to a ranklit loss with the queries' ``ids``; the
            embeddings are in the memory's dtype.
        """
        self._check(embeddings, labels, ids)
        store = self._store
        if store is None:
            return embeddings, labels, ids
        others = store.filled & ~torch.isin(store.ids, ids.to(store.ids.device))
        return (
            torch.cat(
                [
                    embeddings.to(store.embeddings.dtype),
                    store.embeddings[others].to(embeddings.device),
                ]
            ),
            torch.cat([labels.long(), store.labels[others].to(labels.device)]),
            torch.cat([ids.long(), store.ids[others].to(ids.device)]),
        )

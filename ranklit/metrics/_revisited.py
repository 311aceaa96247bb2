"""``RevisitedMetrics``: mAP and mP@k of Revisited Oxford/Paris (Easy / Medium / Hard) after post-processing.

The metric accumulates descriptors and their dataset indices (``dist_reduce_fx="cat"``: DDP gathers them) over a
:class:`ranklit.landmarks.RevisitedTestSet`, whose layout it learns from :meth:`RevisitedMetrics.bind`. At
:meth:`~RevisitedMetrics.compute`, for each benchmark of the set: the query and gallery descriptors are
L2-normalised, post-processed (:mod:`ranklit.landmarks.postprocess`: learnt whitening, α-QE, DBA, in the configured
order; a whitening without ``descriptors`` learns from the set's ``whitening_dataset`` images), then scored by
:func:`ranklit.landmarks.revisited_map` under the three protocols.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat

from ranklit.functional.inputs import check_embeddings, check_ids
from ranklit.functional.ties import check_ties
from ranklit.landmarks import PROTOCOLS, PostProcessStep, apply_postprocess, revisited_map
from ranklit.metrics._registry import register_metric

__all__ = ["RevisitedMetrics"]


class _Benchmark(Protocol):
    name: str
    queries: range
    gallery: range
    gnd: list[dict[str, list[int]]]


@register_metric
class RevisitedMetrics(Metric):
    """Easy / Medium / Hard mAP and mP@k of each benchmark of a :class:`ranklit.landmarks.RevisitedTestSet`.

    ``compute()`` returns ``{"<name>/<protocol>/map": ..., "<name>/<protocol>/mp_at_<k>": ...}`` (0-dim float64
    tensors), e.g. ``roxford5k/medium/map``; :class:`ranklit.models.RetrievalModule` logs them under ``test/``.

    Args:
        postprocess: steps applied in order to each benchmark's queries and gallery
            (:class:`~ranklit.landmarks.postprocess.LearntWhitening`,
            :class:`~ranklit.landmarks.postprocess.AlphaQueryExpansion`,
            :class:`~ranklit.landmarks.postprocess.DatabaseAugmentation`, or any
            :class:`~ranklit.landmarks.postprocess.PostProcessStep`).
        precision_at: the ``k`` of mP@k (revisitop's definition, see :func:`ranklit.landmarks.revisited_map`).
        trapezoid: revisitop's trapezoidal AP (``True``, what published tables report) or the exact AP of
            [spec §1][spec-metrics] (``False``).
        ties: ``"pessimistic"`` (default), ``"average"`` or ``"optimistic"`` ([spec §0][spec-ties]): the metrics under
            the worst ordering of each group of equal scores, their mean over its orderings, or the best; junk images
            are removed before the tie groups are formed (see :func:`ranklit.landmarks.revisited_map`).
        **kwargs: options of ``torchmetrics.Metric``.

    Example:
        >>> import torch
        >>> from types import SimpleNamespace
        >>> bench = SimpleNamespace(name="toy", queries=range(0, 1), gallery=range(1, 3),
        ...                         gnd=[{"easy": [0], "hard": [1], "junk": []}])
        >>> metric = RevisitedMetrics(precision_at=(1,))
        >>> metric.bind(SimpleNamespace(benchmarks=[bench], whitening_rows=None))
        >>> metric.update(torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.1, 0.9]]), torch.tensor([0, 1, 2]))
        >>> out = metric.compute()
        >>> float(out["toy/easy/map"]), float(out["toy/medium/mp_at_1"]), float(out["toy/hard/map"])
        (1.0, 1.0, 1.0)
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    embeddings: list[Tensor]
    ids: list[Tensor]

    def __init__(
        self,
        postprocess: Sequence[PostProcessStep] = (),
        precision_at: Sequence[int] = (1, 5, 10),
        trapezoid: bool = True,
        ties: str = "pessimistic",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for step in postprocess:
            if not isinstance(step, PostProcessStep):
                raise TypeError(
                    f"`postprocess` holds a {type(step).__name__}; give ranklit.landmarks.postprocess steps "
                    "(LearntWhitening, AlphaQueryExpansion, DatabaseAugmentation)."
                )
        self.postprocess, self.precision_at, self.trapezoid = list(postprocess), tuple(precision_at), trapezoid
        self.ties = check_ties(ties)
        self.benchmarks: list[_Benchmark] = []
        self.whitening_rows: range | None = None
        self.add_state("embeddings", default=[], dist_reduce_fx="cat")
        self.add_state("ids", default=[], dist_reduce_fx="cat")

    def bind(self, dataset: Any) -> None:
        """Read the benchmarks (``benchmarks``, ``whitening_rows``) of the evaluated test set."""
        if not hasattr(dataset, "benchmarks"):
            raise TypeError(
                f"RevisitedMetrics evaluates a ranklit.landmarks.RevisitedTestSet, got a {type(dataset).__name__}: set "
                "`data.test_dataset` to `ranklit.landmarks.RevisitedTestSet` (see configs/revisited_eval.yaml)."
            )
        self.benchmarks = list(dataset.benchmarks)
        self.whitening_rows = getattr(dataset, "whitening_rows", None)

    def update(self, embeddings: Tensor, ids: Tensor) -> None:
        """Add ``[B, D]`` descriptors of the dataset items ``ids`` (``[B]``)."""
        check_embeddings(embeddings, finite=False)
        checked = check_ids(ids, embeddings.shape[0])
        assert checked is not None  # ids is required here
        self.embeddings.append(embeddings.detach())
        self.ids.append(checked)

    def _rows(self, table: Tensor, present: Tensor, rows: range) -> Tensor:
        index = torch.arange(rows.start, rows.stop, device=table.device)
        seen = present[index.clamp(max=present.numel() - 1)] & (index < present.numel())
        if not bool(seen.all()):
            missing = int((~seen).sum())
            raise ValueError(
                f"RevisitedMetrics: {missing} of the test set's items were not embedded (e.g. `limit_test_batches` "
                "or `fast_dev_run`): the ground truth needs every query and gallery image."
            )
        return table[index]

    def compute(self) -> dict[str, Tensor]:
        if not self.benchmarks:
            raise ValueError("RevisitedMetrics: call `bind(test_dataset)` before `compute()` (RetrievalModule does).")
        embeddings, ids = dim_zero_cat(self.embeddings), dim_zero_cat(self.ids)
        embeddings = torch.nn.functional.normalize(embeddings.to(torch.promote_types(embeddings.dtype, torch.float32)))
        size = int(ids.max()) + 1
        table = embeddings.new_zeros(size, embeddings.shape[1])
        table[ids] = embeddings  # DDP padding repeats write the same row twice
        present = torch.zeros(size, dtype=torch.bool, device=ids.device)
        present[ids] = True
        training = None if self.whitening_rows is None else self._rows(table, present, self.whitening_rows)
        out: dict[str, Tensor] = {}
        for bench in self.benchmarks:
            queries, gallery = self._rows(table, present, bench.queries), self._rows(table, present, bench.gallery)
            processed = apply_postprocess(self.postprocess, queries, gallery, training)
            values = revisited_map(
                *processed, bench.gnd, precision_at=self.precision_at, trapezoid=self.trapezoid, ties=self.ties
            )
            for protocol in PROTOCOLS:
                for key in ("map", *(f"mp_at_{k}" for k in self.precision_at)):
                    value = values[f"{key}_{protocol}"]
                    out[f"{bench.name}/{protocol}/{key}"] = torch.tensor(value, dtype=torch.float64)
        return out


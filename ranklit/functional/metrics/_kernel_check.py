"""The self-check of the metrics' counting kernel (:mod:`ranklit.functional.metrics._kernel_counts`) on its first use.

:func:`metric_kernel_usable` runs :func:`probe_metric_counts` once per CUDA device and process, through
:mod:`ranklit.functional._kernels._guard`: 37 queries (two programs of 32) against 70 items (two tiles of 64) in 40
dimensions (two slices of 32), repeated ids, junk, a query without positive and two equal gallery embeddings (exact
ties), both tie modes. The kernel's scores must equal the float64 product within ``1e-4`` (TF32 would miss that by
orders of magnitude), its removed items must be exactly the id and junk matches, and its counts must equal, exactly,
the torch path's counts on the kernel's own scores (what :mod:`ranklit.functional.metrics._kernel_counts` promises). A
failure: one warning, then the torch path for the rest of the process; so does a launch that raises later
(:func:`ranklit.functional.metrics._retrieval.retrieval_metric_tensors` recomputes that evaluation with the torch path).
"""

from __future__ import annotations

import functools

import torch

from ranklit.functional._kernels._guard import kernel_usable
from ranklit.functional.inputs import prepare_inputs

__all__ = ["METRICS_KERNEL", "metric_kernel_usable", "probe_metric_counts"]

METRICS_KERNEL = "metric counts"
_Q, _N, _D = 37, 70, 40


def metric_kernel_usable(device: torch.device) -> bool:
    """Whether the counting kernel may run on ``device`` (its probe runs on first use; a failure warns once)."""
    return kernel_usable(METRICS_KERNEL, device, torch.float32, functools.partial(probe_metric_counts, device))


def probe_metric_counts(device: torch.device) -> None:
    """The kernel on the probe problem against the torch path (module docstring); ``AssertionError`` on a
    difference (a compile or launch error propagates)."""
    from ranklit.functional.metrics._kernel_counts import KernelCounter
    from ranklit.functional.metrics._positive_ranks import SortedKeys, positive_counts

    g = torch.Generator().manual_seed(0)
    labels, ref_labels = torch.randint(0, 5, (_Q,), generator=g), torch.randint(0, 5, (_N,), generator=g)
    labels[0] = 99  # a query without positive
    refs = torch.randn(_N, _D, generator=g)
    refs[6] = refs[5]  # an exact tie
    ids, ref_ids = torch.arange(_Q) % 20, torch.arange(_N) % 30
    junk = torch.rand(_Q, _N, generator=g) < 0.1
    x = prepare_inputs(torch.randn(_Q, _D, generator=g).to(device), labels.to(device), ref_embeddings=refs.to(device),
                       ref_labels=ref_labels.to(device), ids=ids.to(device), ref_ids=ref_ids.to(device))
    junk = junk.to(device)
    counter = KernelCounter(x, junk)
    rows = counter.by_label(torch.arange(_Q, device=device))
    scores = counter.scores(rows)
    removed = junk[rows] | (x.query_ids[rows, None] == x.ref_ids[None, :])  # type: ignore[index]
    if not torch.equal(~torch.isfinite(scores), removed):
        raise AssertionError("the removed items (ids, junk) differ from the torch path's")
    exact = (x.queries[rows].double() @ x.refs.double().T)[~removed]
    error = float((scores[~removed].double() - exact).abs().max())
    if error > 1e-4:
        raise AssertionError(f"the scores differ from the float64 product by {error:.3g} (tolerance 1e-4: TF32?)")
    keys = SortedKeys(x.ref_labels[:, 0]).match(x.query_labels[rows, 0])
    for strict in (False, True):
        counts = counter.counts(rows, strict)
        descending, valid, at_least, above = positive_counts(scores, *keys, strict=strict)
        same = [torch.equal(counts.descending, descending), torch.equal(counts.valid, valid),
                torch.equal(counts.at_least, at_least),
                above is None or (counts.above is not None and torch.equal(counts.above, above))]
        if not all(same):
            raise AssertionError(f"the counts (strict={strict}) differ from the torch path's on the same scores")

"""The Triton kernel of the exact metrics' counting, on the CPU through Triton's interpreter, against the torch path.

Sizes are chosen off the kernel's blocks: 37 queries (programs of 32), 70 items (tiles of 64), dimension 40 (slices of
32), so every tile edge and mask is crossed. Integer embeddings with ``normalize=False`` make every score exact in
float32 whatever the summation order: the kernel's scores equal the torch path's, ties included, so the metrics must be
equal bit for bit; on real-valued embeddings the counts must equal the torch path's on the kernel's own scores.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")

from ranklit.functional._kernels._triton_counts import BLOCK_M, BLOCK_N
from ranklit.functional.inputs import RetrievalInputs, prepare_inputs
from ranklit.functional.metrics import _kernel_counts
from ranklit.functional.metrics._kernel_counts import KernelCounter, fallback_warning, kernel_reason
from ranklit.functional.metrics._positive_ranks import SortedKeys, positive_counts
from ranklit.functional.metrics._retrieval import retrieval_metric_tensors
from tests.ddp import scaled_timeout

Q, N, D = 37, 70, 40


def _problem(seed: int, levels: int = 1) -> dict[str, torch.Tensor]:
    """Queries and a gallery of small integers (tie groups of equal scores), labels with ``levels`` columns."""
    g = torch.Generator().manual_seed(seed)
    fine, ref_fine = torch.randint(0, 6, (Q,), generator=g), torch.randint(0, 6, (N,), generator=g)
    fine[0], ref_fine[0] = 99, 98  # classes of one item: a query without positives in every case
    labels = torch.stack([fine, fine // 2, fine // 4][:levels], 1) if levels > 1 else fine
    ref_labels = torch.stack([ref_fine, ref_fine // 2, ref_fine // 4][:levels], 1) if levels > 1 else ref_fine
    return {
        "embeddings": torch.randint(-1, 2, (Q, D), generator=g).float(),
        "labels": labels,
        "ref_embeddings": torch.randint(-1, 2, (N, D), generator=g).float(),
        "ref_labels": ref_labels,
    }


def _through_kernel(monkeypatch: pytest.MonkeyPatch, **options: object) -> dict[str, torch.Tensor]:
    with monkeypatch.context() as patch:
        patch.setattr(_kernel_counts, "kernel_reason", lambda device, dtype: None)  # the kernel on CPU tensors
        return retrieval_metric_tensors(per_query=True, **options)  # type: ignore[arg-type]


def _assert_same(kernel: dict[str, torch.Tensor], torch_path: dict[str, torch.Tensor]) -> None:
    assert kernel.keys() == torch_path.keys()
    for key in torch_path:
        assert torch.equal(kernel[key].isnan(), torch_path[key].isnan()), key
        assert torch.equal(kernel[key].nan_to_num(), torch_path[key].nan_to_num()), key


def _options(case: str, seed: int) -> dict[str, object]:
    p = _problem(seed, levels=2 if case == "hierarchical" else 1)
    if case == "self":  # the queries rank each other, each without itself (ids = positions)
        return {"embeddings": p["embeddings"], "labels": p["labels"]}
    if case == "hierarchical":
        return {"embeddings": p["ref_embeddings"], "labels": p["ref_labels"]}
    g = torch.Generator().manual_seed(seed + 10)
    gallery = {key: p[key] for key in ("embeddings", "labels", "ref_embeddings", "ref_labels")}
    # repeated ids (every item with the query's id removed) and junk lists
    return gallery | {"ids": torch.arange(Q) % 9, "ref_ids": torch.arange(N) % 11,
                      "junk": torch.rand(Q, N, generator=g) < 0.1}


@pytest.mark.parametrize("ties", ["pessimistic", "average", "optimistic"])
@pytest.mark.parametrize("case", ["self", "gallery", "hierarchical"])
def test_metrics_through_the_kernel_equal_the_torch_path_ties_included(
    monkeypatch: pytest.MonkeyPatch, case: str, ties: str
) -> None:
    options = _options(case, seed=0) | {"ties": ties, "recall_at": (1, 2, 4), "ndcg_at": (3,), "normalize": False}
    expected = retrieval_metric_tensors(per_query=True, **options)  # type: ignore[arg-type]
    assert float(expected["num_queries_without_positive"]) > 0  # queries without positives are covered
    _assert_same(_through_kernel(monkeypatch, **options), expected)


def test_half_precision_non_contiguous_inputs_and_small_chunks_take_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    p = _problem(1, levels=3)
    options = {"labels": p["labels"], "ref_embeddings": p["ref_embeddings"], "ref_labels": p["ref_labels"],
               "normalize": False, "ties": "average"}
    bf16 = p["embeddings"].to(torch.bfloat16)  # small integers: exact in bfloat16
    strided = p["embeddings"].T.contiguous().T  # a non-contiguous view
    for embeddings, chunk in ((bf16, None), (strided, 20)):
        # the same chunks: a metric's float64 sums run over the chunk's padded width
        expected = retrieval_metric_tensors(p["embeddings"], per_query=True, chunk_size=chunk, **options)  # type: ignore[arg-type]
        _assert_same(_through_kernel(monkeypatch, embeddings=embeddings, chunk_size=chunk, **options), expected)


@pytest.mark.parametrize("strict", [False, True])
def test_kernel_counts_equal_the_torch_counts_on_the_kernel_scores(strict: bool) -> None:
    g = torch.Generator().manual_seed(3)
    labels = torch.randint(0, 4, (Q,), generator=g)
    ref_labels = torch.randint(0, 4, (N,), generator=g)
    x = prepare_inputs(torch.randn(Q, D, generator=g), labels, ref_embeddings=torch.randn(N, D, generator=g),
                       ref_labels=ref_labels, ids=torch.arange(Q), ref_ids=torch.arange(N))
    junk = torch.rand(Q, N, generator=g) < 0.2
    counter = KernelCounter(x, junk)
    rows = counter.by_label(torch.arange(Q))
    counts = counter.counts(rows, strict)
    scores = counter.scores(rows)  # removed items (same id, junk) are -inf
    assert torch.equal(torch.isinf(scores), junk[rows] | (rows[:, None] == torch.arange(N)))
    torch.testing.assert_close(scores[torch.isfinite(scores)], (x.queries[rows] @ x.refs.T)[torch.isfinite(scores)])
    index, valid = SortedKeys(ref_labels).match(labels[rows])
    descending, ok, at_least, above = positive_counts(scores, index, valid, strict=strict)
    assert torch.equal(counts.descending, descending) and torch.equal(counts.valid, ok)
    assert torch.equal(counts.at_least, at_least)
    assert (counts.above is None) == (not strict)
    if above is not None:
        assert counts.above is not None and torch.equal(counts.above, above)
    assert torch.equal(scores.gather(1, counts.columns)[ok], descending[ok])  # the columns are the positives'


def _assert_counts_as_torch(x: RetrievalInputs, strict: bool = True) -> None:
    counter = KernelCounter(x, None)
    rows = counter.by_label(torch.arange(x.queries.shape[0]))
    counts, scores = counter.counts(rows, strict), counter.scores(rows)
    descending, valid, at_least, above = positive_counts(
        scores, *SortedKeys(x.ref_labels[:, -1]).match(x.query_labels[rows, -1]), strict=strict
    )
    assert torch.equal(counts.descending, descending) and torch.equal(counts.valid, valid)
    assert torch.equal(counts.at_least, at_least) and torch.equal(counts.above, above)  # type: ignore[arg-type]


@pytest.mark.parametrize("first_class", [BLOCK_N - 1, BLOCK_N, BLOCK_N + 1])
def test_positive_runs_ending_and_starting_on_a_tile_edge(first_class: int) -> None:
    # the sorted retrieval set: a class of `first_class` items, then another: a run ends (and one starts) at a tile
    # edge, off by one either way
    ref_labels = (torch.arange(N) >= first_class).long()
    labels = (torch.arange(BLOCK_M + 3) >= BLOCK_M).long()  # one program of class 0, one of class 1
    g = torch.Generator().manual_seed(first_class)
    queries, refs = torch.randn(labels.numel(), 8, generator=g), torch.randn(N, 8, generator=g)
    _assert_counts_as_torch(prepare_inputs(queries, labels, ref_embeddings=refs, ref_labels=ref_labels))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the interpreter's numpy, on purpose
def test_scores_that_overflow_to_inf_count_as_in_the_torch_path() -> None:
    # raw dot products of 1e30 entries overflow: a positive scoring +inf is dropped, a negative scoring +inf is above
    # every positive (the binary search then clears the +inf padding too)
    queries = torch.cat([torch.full((1, 4), 1e30), torch.ones(1, 4)])
    refs = torch.cat([torch.full((2, 4), 1e30), torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 1, 0], [-1.0, 0, 0, 0]])])
    x = prepare_inputs(queries, torch.tensor([0, 0]), ref_embeddings=refs, ref_labels=torch.tensor([0, 1, 0, 0, 1]),
                       normalize=False)
    _assert_counts_as_torch(x)


_SIGNATURE = {  # the types of a launch by KernelCounter (pointers, then 32-bit sizes and strides)
    **dict.fromkeys(("query_ptr", "ref_ptr", "threshold_ptr"), "*fp32"),
    **dict.fromkeys(("query_id_ptr", "ref_id_ptr", "start_ptr", "count_ptr", "tiles_ptr"), "*i64"),
    "junk_ptr": "*u8",
    **dict.fromkeys(("num_queries", "num_refs", "dim", "log_width", "hist_width", "stride_query", "stride_ref",
                     "stride_junk", "stride_threshold", "stride_out"), "i32"),
}


_COMPILE = """
import json, sys
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from ranklit.functional._kernels import _triton_counts as t

signature, out = json.loads(sys.argv[1]), {}
for mode, pointer in ((0, "*fp32"), (1, "*fp32"), (2, "*i32")):
    constants = {"MODE": mode, "HAS_IDS": 1, "HAS_JUNK": 1, "STRICT": 1, "BLOCK_M": t.BLOCK_M, "BLOCK_N": t.BLOCK_N,
                 "BLOCK_K": t.BLOCK_K}
    types = {**signature, "out_ptr": pointer, **dict.fromkeys(constants, "constexpr")}
    source = ASTSource(fn=t.metric_counts_kernel(torch.device("cuda")), signature=types, constexprs=constants)
    out[mode] = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": t.NUM_WARPS}).asm["ptx"]
print(json.dumps(out))
"""


@pytest.mark.slow  # a few seconds per mode, on the CPU: no GPU needed to compile
def test_the_kernel_compiles_for_a_hopper_gpu_in_plain_float32() -> None:
    """What the interpreter cannot check: Triton's compiler accepts the kernel (types, loops, constexpr branches),
    and the product runs on the float32 FMA units (no ``mma``: no TF32 rounding of the inputs). In a process of its
    own, without ``TRITON_INTERPRET`` (the suite's conftest sets it on a machine without CUDA)."""
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"PYTHONPATH": str(root)}
    run = subprocess.run([sys.executable, "-c", _COMPILE, json.dumps(_SIGNATURE)], cwd=root, env=env,
                         capture_output=True, text=True, timeout=scaled_timeout(600))
    assert run.returncode == 0, run.stderr[-3000:]
    ptx = json.loads(run.stdout.splitlines()[-1])
    for mode, text in ptx.items():
        assert "fma.rn.f32" in text and "mma" not in text, mode
        assert ("atom.global" in text) == (mode == "2"), mode


def test_the_kernel_runs_on_cuda_with_triton_and_float32_only(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = torch.device("cuda", 0)  # only named: nothing is allocated on it
    assert kernel_reason(cuda, torch.float32) is None
    assert kernel_reason(torch.device("cpu"), torch.float32) is not None
    assert fallback_warning(torch.device("cpu"), torch.float32) is None  # the CPU path stays silent
    assert "float64" in (fallback_warning(cuda, torch.float64) or "")
    monkeypatch.setenv("RANKLIT_METRICS_KERNEL", "0")
    assert kernel_reason(cuda, torch.float32) is not None and fallback_warning(cuda, torch.float32) is None
    monkeypatch.delenv("RANKLIT_METRICS_KERNEL")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "triton" else real(name, *a))
    assert "Triton is not installed" in (fallback_warning(cuda, torch.float32) or "")

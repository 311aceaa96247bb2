"""Every CUDA-only branch of ranklit, run on the CPU with the device queries faked (``grep -rn cuda ranklit``):

- chunk size of the metrics from the free GPU memory (``_metric_options.metrics_chunk_size``);
- tile size of the symmetric metric path from the free GPU memory (``_symmetric_ranks.symmetric_tile_size``);
- NCCL collectives on the current CUDA device in sharded evaluation (``_sharding.distributed_shard``);
- the counting strategy on GPU: no item finding, one tile (``_counting.worth_finding``, ``_count_at_least_by_passes``);
- the CUDA random state around multistage chunks (``training._multistage._RandomState``) and in resume checkpoints
  (``callbacks._resume.random_states`` / ``set_random_states``).

The same branches run for real in ``tests/test_gpu.py`` (marker ``gpu``) on a machine with CUDA.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import torch
import torch.distributed as dist
from torch import Tensor

from ranklit.callbacks._resume import random_states, set_random_states
from ranklit.functional.metrics import _counting, _sharding
from ranklit.functional.metrics._options import metrics_chunk_size
from ranklit.functional.metrics._symmetric_ranks import symmetric_tile_size
from ranklit.training import _multistage as multistage

GPU = torch.device("cuda", 1)


def _free_memory(monkeypatch: pytest.MonkeyPatch, free: int) -> list[torch.device]:
    asked: list[torch.device] = []

    def mem_get_info(device: torch.device) -> tuple[int, int]:
        asked.append(device)
        return free, 80 * 2**30

    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    return asked


def test_metric_chunks_fill_a_quarter_of_the_free_gpu_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _free_memory(monkeypatch, 40 * 2**30)  # 40 GiB free: 10 GiB for a chunk
    # flat labels: 32 bytes per (query, item); N = 136,000 (iNaturalist's test set) gives 2467 queries per chunk
    assert metrics_chunk_size(136_000, 136_000, 1, GPU) == 10 * 2**30 // (32 * 136_000) == 2467
    # 2 levels, at most 500 relevant items per query: 32 N + (96 + 32) * 500 bytes
    assert metrics_chunk_size(136_000, 136_000, 2, GPU, max_relevant=500) == 10 * 2**30 // (32 * 136_000 + 128 * 500)
    assert metrics_chunk_size(100, 136_000, 1, GPU) == 100  # never more than the queries
    assert asked == [GPU] * 3
    _free_memory(monkeypatch, 1024)  # almost full: one query at a time, never zero
    assert metrics_chunk_size(136_000, 136_000, 1, GPU) == 1


def test_kernel_chunks_hold_the_positives_not_the_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    _free_memory(monkeypatch, 40 * 2**30)
    # the Triton kernel path: about 80 bytes per positive (40 here), no 32 N bytes of scores: every query in one chunk
    assert metrics_chunk_size(136_000, 136_000, 1, GPU, max_relevant=40, kernel_bytes=80 * 40) == 136_000
    # 2 levels, 17,000 relevant items (8 coarse groups): 80 + (96 + 32) bytes per relevant item
    assert metrics_chunk_size(136_000, 136_000, 2, GPU, max_relevant=17_000, kernel_bytes=80 * 17_000) == (
        10 * 2**30 // (208 * 17_000)
    )


def test_symmetric_tiles_fill_a_quarter_of_the_free_gpu_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _free_memory(monkeypatch, 16 * 2**30)  # a tile of t x t costs 16 t^2 bytes: t = sqrt(4 GiB / 16)
    assert symmetric_tile_size(136_000, GPU) == 16_384 and asked == [GPU]
    assert symmetric_tile_size(1_000, GPU) == 1_000
    _free_memory(monkeypatch, 0)
    assert symmetric_tile_size(136_000, GPU) == 1


class _Probe(Tensor):
    """A tensor that records its ``.to`` calls and stays on the CPU (no GPU needed)."""

    moved_to: ClassVar[list[Any]] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if getattr(func, "__name__", "") == "to":
            cls.moved_to.append(args[1])
            return args[0]
        return super().__torch_function__(func, types, args, kwargs)


@pytest.mark.parametrize(("backend", "device"), [("nccl", torch.device("cuda", 3)), ("gloo", torch.device("cpu"))])
def test_sharded_evaluation_reduces_on_the_current_cuda_device_under_nccl(monkeypatch, backend, device) -> None:
    reduced: list[tuple[Any, Any]] = []
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 1)
    monkeypatch.setattr(dist, "get_backend", lambda group=None: backend)
    monkeypatch.setattr(dist, "all_reduce", lambda tensor, op, group=None: reduced.append((op, group)))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    shard = _sharding.distributed_shard()
    assert shard is not None and (shard.rank, shard.world_size) == (1, 2)
    _Probe.moved_to.clear()
    counts = torch.tensor([4, 5]).as_subclass(_Probe)
    shard.all_reduce_sum(counts)
    assert _Probe.moved_to == [device] and reduced == [(dist.ReduceOp.SUM, None)]


class _OnGPU(Tensor):
    """A CPU tensor that says it is on a GPU (``is_cuda``), to run the GPU strategy of the counting on the CPU."""

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True


def test_gpu_counting_compares_whole_chunks_and_counts_like_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    scores = torch.randn(300, 2_000)
    thresholds = scores.topk(8, dim=1).values  # each row's 8 best: few items clear them, so the CPU finds those
    lowest = _counting.lowest_thresholds(thresholds)[:, None]
    assert _counting.worth_finding(scores, lowest, [8])
    assert not _counting.worth_finding(scores.as_subclass(_OnGPU), lowest, [8])
    expected = _counting.count_at_least(scores, thresholds)
    tiles: list[int] = []
    original_ge = torch.ge

    def ge(block: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        tiles.append(block.shape[0])
        return original_ge(block, *args, **kwargs)

    monkeypatch.setattr(_counting, "items_at_least", lambda *a: pytest.fail("the GPU path never finds items"))
    monkeypatch.setattr(torch, "ge", ge)
    counts = _counting.count_at_least(scores.as_subclass(_OnGPU), thresholds.as_subclass(_OnGPU))
    assert torch.equal(counts.as_subclass(Tensor), expected)
    assert tiles and set(tiles) == {300}  # one tile of every row per threshold pass (on CPU: cache-sized tiles)


def test_multistage_captures_and_restores_the_cuda_random_state_of_its_device(monkeypatch) -> None:
    calls: list[tuple[str, Any]] = []
    state = torch.arange(8, dtype=torch.uint8)
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device: calls.append(("get", device)) or state)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda value, device: calls.append(("set", device, value)))
    captured = multistage._RandomState.capture(GPU)
    cpu_draw = torch.rand(3)
    captured.restore()
    assert torch.equal(torch.rand(3), cpu_draw)  # the CPU generator is restored too
    assert calls[0] == ("get", GPU) and calls[1][:2] == ("set", GPU) and torch.equal(calls[1][2], state)
    calls.clear()
    multistage._RandomState.capture(torch.device("cpu")).restore()
    assert calls == []  # a CPU batch never touches CUDA


def test_resume_saves_and_restores_the_cuda_random_states(monkeypatch, tmp_path) -> None:
    devices = [torch.full((16,), i, dtype=torch.uint8) for i in range(2)]
    restored: list[list[Tensor]] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: devices)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", restored.append)
    torch.save(random_states(), tmp_path / "states.pt")  # as in a checkpoint
    states = torch.load(tmp_path / "states.pt", weights_only=False)
    set_random_states(states)
    assert len(restored) == 1 and all(torch.equal(a, b) for a, b in zip(restored[0], devices, strict=True))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a GPU run's checkpoint resumed on a CPU
    set_random_states(states)
    assert len(restored) == 1
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)  # CUDA present but never used: nothing saved
    assert "cuda" not in random_states()


def test_losses_and_metrics_turn_a_cuda_autocast_off_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``bf16-mixed`` on a GPU the autocast that is on is CUDA's: ``autocast_off`` must leave that one."""
    from ranklit.functional import floating_point as precision

    entered: list[tuple[str, bool]] = []
    real_autocast = torch.autocast

    def recording_autocast(device_type: str, *args: Any, **kwargs: Any) -> Any:
        entered.append((device_type, kwargs.get("enabled", True)))
        return real_autocast("cpu", enabled=kwargs.get("enabled", True))

    monkeypatch.setattr(torch, "is_autocast_enabled", lambda device_type="cuda": device_type == "cuda")
    monkeypatch.setattr(torch, "autocast", recording_autocast)
    with precision.autocast_off():
        pass
    assert entered == [("cuda", False)]

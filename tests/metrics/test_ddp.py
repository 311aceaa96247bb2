"""`RetrievalMetrics` under 2-process DDP on CPU (gloo) equals a single-process evaluation."""

from __future__ import annotations

import json

import pytest
import torch
import torch.multiprocessing as mp

from ranklit.metrics import RetrievalMetrics
from tests.ddp import free_port
from tests.metrics import ddp_worker


@pytest.mark.slow
@pytest.mark.timeout(600)  # spawning two interpreters takes ~20 s idle, minutes on a loaded machine
def test_two_processes_give_the_single_process_dict(tmp_path) -> None:
    out = tmp_path / "ddp.json"
    mp.spawn(ddp_worker.run, args=(2, free_port(), str(out)), nprocs=2, join=True)
    distributed = {key: float.fromhex(value) for key, value in json.loads(out.read_text()).items()}
    e, labels = ddp_worker.problem()
    single = RetrievalMetrics(recall_at=(1, 4))
    single.update(e, labels, torch.arange(37))
    expected = {key: float(value) for key, value in single.compute().items()}
    flat = RetrievalMetrics(recall_at=(1, 4), ties="average", chunk_size=8)
    flat.update(e, labels[:, 0], torch.arange(37))
    flat_expected = {f"flat_{key}": float(value) for key, value in flat.compute().items()}
    assert distributed["num_queries"] == 37  # the 3 padded repeats were dropped
    hierarchical = {key: value for key, value in distributed.items() if not key.startswith("flat_")}
    assert hierarchical == pytest.approx(expected, rel=1e-6)  # row path: scores of other chunks (BLAS rounding)
    assert {key: distributed[key] for key in flat_expected} == flat_expected  # symmetric path: bit for bit

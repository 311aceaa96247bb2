"""``RetrievalMetrics`` in a plain LightningModule under 2-process CPU DDP (gloo), in a ``MetricCollection`` logged
with ``self.log_dict``: with and without ids it equals the single-process result (one spawn of ~10-20 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("lightning")  # the core-only environment has no Lightning

from ranklit.metrics import RetrievalMetrics
from tests.ddp import scaled_timeout
from tests.metrics import lightning_ddp_worker as worker

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_metric_collection_under_lightning_ddp_equals_one_process(tmp_path: Path) -> None:
    out = tmp_path / "logged.json"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run(
        [sys.executable, "-m", "tests.metrics.lightning_ddp_worker", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=scaled_timeout(580),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(out.read_text())
    logged = report["logged"]  # keys without Lightning's "/dataloader_idx_*" suffix
    assert not [w for w in report["warnings"] if "sync_dist" in w or "were given in some" in w]
    net = worker.network()
    for prefix, n, with_ids in (("ids_", 37, True), ("noids_", 40, False)):
        x, labels = worker.data(n)
        single = RetrievalMetrics(recall_at=(1, 4))
        with torch.no_grad():
            single.update(net(x), labels, torch.arange(n) if with_ids else None)
        expected = single.compute()
        assert expected["num_queries"] == n  # with ids, the padded duplicate was dropped
        for key, value in expected.items():
            assert logged[prefix + key] == pytest.approx(float(value), rel=1e-6, abs=1e-7), prefix + key

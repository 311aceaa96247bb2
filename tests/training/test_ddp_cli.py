"""``ranklit fit`` with 2-process CPU DDP: trains with the gathered loss and validates every test sample exactly
once."""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import pytest

from ranklit.data.datasets import SyntheticHierarchy
from tests.tiny import synthetic_args

OPTIONS = {"levels": 2, "num_coarse": 4, "fine_per_parent": 8, "images_per_class": 8, "image_size": 32}


MULTISTAGE_AND_MEMORY = [
    "--model.multistage=ranklit.training.MultistageBackprop",
    "--model.multistage.chunk_size=8",
    "--model.memory=ranklit.training.CrossBatchMemory",
    "--model.memory.size=96",
    "--model.decomposability_gap=true",
]


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("extra", [[], MULTISTAGE_AND_MEMORY], ids=["gather", "multistage-memory"])
def test_quickstart_runs_under_two_process_ddp(tmp_path: Path, extra: list[str]) -> None:
    args = [
        "ranklit", "fit", "--config", "quickstart.yaml",
        "--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp",
        "--model.net.init_args.backbone=test_resnet",
        *synthetic_args(**OPTIONS),
        "--data.image_size=32", "--data.resize_size=32", "--data.crop_size=32",
        "--data.batch_sampler.init_args.batches_per_epoch=6", "--trainer.max_epochs=1",
        "--trainer.check_val_every_n_epoch=1",
        "--trainer.log_every_n_steps=1", "--trainer.enable_checkpointing=false",
        "--trainer.callbacks=null", "--baseline_validation=false",
        f"--trainer.logger.init_args.save_dir={tmp_path}",
        *extra,
    ]  # fmt: skip
    result = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=380)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = list(csv.DictReader((next(tmp_path.rglob("metrics.csv"))).open()))
    losses = [float(r["train/loss"]) for r in rows if r.get("train/loss")]
    queries = [float(r["val/num_queries"]) for r in rows if r.get("val/num_queries")]
    assert losses and all(loss == loss for loss in losses)  # logged and finite
    test_size = len(SyntheticHierarchy(split="test", **OPTIONS))
    assert queries == [test_size]  # every test sample counted once over the two ranks
    if extra:
        gaps = [float(r["train/decomposability_gap"]) for r in rows if r.get("train/decomposability_gap")]
        assert len(gaps) == 1

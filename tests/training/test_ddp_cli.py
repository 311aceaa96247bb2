"""``ranklit fit`` with 2-process CPU DDP: trains with the gathered loss, validates every test sample exactly once,
and a group ``SIGTERM`` (a scheduler's stop) ends it within 60 s, with exit code 143 and a checkpoint that resumes to
the uninterrupted run (one reference run for the module: :func:`reference`)."""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import pytest

from ranklit.data.datasets import SyntheticHierarchy
from tests.callbacks.faults_harness import RUN, assert_same_run, resume_step, run, signal_at
from tests.ddp import scaled_timeout
from tests.tiny import SMALL, synthetic_args

OPTIONS = {"levels": 2, "num_coarse": 4, "fine_per_parent": 8, "images_per_class": 8, "image_size": 32}


MULTISTAGE_AND_MEMORY = [
    "--model.multistage=ranklit.training.MultistageBackprop",
    "--model.multistage.chunk_size=8",
    "--model.memory=ranklit.training.CrossBatchMemory",
    "--model.memory.size=96",
    "--model.decomposability_gap=true",
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted 2-process run of :mod:`tests.callbacks.faults_harness` (2 epochs of 4 steps)."""
    folder = tmp_path_factory.mktemp("ddp-reference")
    result = run(folder, "lightning", 0)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_quickstart_runs_under_two_process_ddp(reference: Path) -> None:
    rows = list(csv.DictReader((reference / RUN / "metrics.csv").open()))
    losses = [float(r["train/loss"]) for r in rows if r.get("train/loss")]
    queries = [float(r["val/num_queries"]) for r in rows if r.get("val/num_queries")]
    assert len(losses) == 8 and all(loss == loss for loss in losses)  # logged and finite
    test_size = len(SyntheticHierarchy(split="test", **{**SMALL, "fine_per_parent": 8, "images_per_class": 6}))
    assert queries == [test_size] * 3  # every test sample counted once over the two ranks: baseline, 2 epochs


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_group_sigterm_stops_within_60_s_and_resumes_to_the_uninterrupted_run(reference: Path, tmp_path) -> None:
    stopped = run(tmp_path, "lightning", 0, signal_at(3, "SIGTERM", to="group"))  # mid-step 3, to every process
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    assert stopped.signal_to_exit is not None and stopped.signal_to_exit < 60
    assert resume_step(tmp_path) == 3  # the step in progress was finished and saved: nothing lost
    resumed = run(tmp_path, "lightning", 0, "--resume=true")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_same_run(tmp_path, reference)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_multistage_and_memory_run_under_two_process_ddp(tmp_path: Path) -> None:
    extra = MULTISTAGE_AND_MEMORY
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
    ]
    result = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=scaled_timeout(380))
    assert result.returncode == 0, result.stderr[-3000:]
    rows = list(csv.DictReader((next(tmp_path.rglob("metrics.csv"))).open()))
    losses = [float(r["train/loss"]) for r in rows if r.get("train/loss")]
    queries = [float(r["val/num_queries"]) for r in rows if r.get("val/num_queries")]
    assert losses and all(loss == loss for loss in losses)  # logged and finite
    test_size = len(SyntheticHierarchy(split="test", **OPTIONS))
    assert queries == [test_size]  # every test sample counted once over the two ranks
    gaps = [float(r["train/decomposability_gap"]) for r in rows if r.get("train/decomposability_gap")]
    assert len(gaps) == 1

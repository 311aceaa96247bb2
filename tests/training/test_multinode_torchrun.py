"""``ranklit fit`` on two simulated nodes (torchrun, gloo on localhost) logs the validation metrics of one node.

Two ``torchrun --nnodes 2 --nproc-per-node 1 --node-rank R`` launchers, one per simulated node, run the quick start
with ``trainer.num_nodes: 2``. The reference runs the same global batches on one node with two processes
(``trainer.devices: 2``): the ``val/*`` metrics logged after training, and those of the untrained model
(step 0), must be equal; the untrained model's must also equal those of a single process.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ddp import child_environment, free_port, scaled_timeout
from tests.tiny import synthetic_args

REPOSITORY = Path(__file__).resolve().parents[2]


def _cli_args(save_dir: Path) -> list[str]:
    """The tiny quick start (the config keys live here only: adapt them when the config changes)."""
    return [
        "fit", "--config", str(REPOSITORY / "configs" / "quickstart.yaml"),
        "--model.net.init_args.backbone=test_resnet", "--model.net.init_args.pretrained=false",
        *synthetic_args(fine_per_parent=8, images_per_class=6), "--data.batch_sampler.init_args.p=4",
        "--data.batch_sampler.init_args.k=2", "--data.batch_sampler.init_args.batches_per_epoch=4",
        "--data.image_size=32", "--data.resize_size=32", "--data.crop_size=32",
        "--data.num_workers=0", "--trainer.max_epochs=1", "--trainer.check_val_every_n_epoch=1",
        "--trainer.log_every_n_steps=1", "--trainer.enable_checkpointing=false", "--trainer.callbacks=null",
        "--trainer.accelerator=cpu", f"--trainer.logger.init_args.save_dir={save_dir}",
    ]



def _validation(save_dir: Path) -> list[dict[str, float]]:
    rows = list(csv.DictReader(next(save_dir.rglob("metrics.csv")).open()))
    return [{k: float(v) for k, v in r.items() if k.startswith("val/") and v} for r in rows if r.get("val/map")]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    result = subprocess.run(
        args, check=False, cwd=cwd, env=child_environment(), capture_output=True, text=True, timeout=400
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_nodes_log_the_metrics_of_one_node_with_two_processes(tmp_path: Path) -> None:
    port = free_port()
    nodes = [tmp_path / "nodes", tmp_path / "one_node", tmp_path / "one_process"]
    for folder in nodes:
        folder.mkdir()
    launchers = [
        subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
             "--node-rank", str(rank), "--master-addr", "127.0.0.1", "--master-port", str(port),
             "-m", "ranklit.cli", *_cli_args(nodes[0]), "--trainer.num_nodes=2", "--trainer.devices=1",
             "--trainer.strategy=ddp"],
            cwd=nodes[0], env=child_environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for rank in (0, 1)
    ]
    outputs = [launcher.communicate(timeout=scaled_timeout(600)) for launcher in launchers]
    for launcher, (_, stderr) in zip(launchers, outputs, strict=False):
        assert launcher.returncode == 0, stderr[-3000:]
    two_nodes = _validation(nodes[0])
    _run([sys.executable, "-m", "ranklit.cli", *_cli_args(nodes[1]), "--trainer.devices=2", "--trainer.strategy=ddp"],
         nodes[1])
    one_node = _validation(nodes[1])
    _run([sys.executable, "-m", "ranklit.cli", *_cli_args(nodes[2]), "--trainer.devices=1"], nodes[2])
    one_process = _validation(nodes[2])
    assert len(two_nodes) == len(one_node) == 2  # untrained (step 0) and after the epoch
    for got, want in zip(two_nodes, one_node, strict=False):
        assert got.keys() == want.keys()
        assert got == pytest.approx(want, rel=1e-5, abs=1e-6)
    assert two_nodes[0] == pytest.approx(one_process[0], rel=1e-5, abs=1e-6)  # evaluation shards over the nodes

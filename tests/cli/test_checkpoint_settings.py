"""``ranklit test``/``predict --ckpt_path``: the checkpoint is evaluated with the settings it was trained with.

"Getting started" evaluates a checkpoint with ``--config folder.yaml``, whose image size (256 → 224) is not the one
the run trained with here (40 → 32): the command must give the run's own figures and embeddings, and say on stderr
which settings of the config it did not use (ranklit.cli._checkpoint_settings).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from PIL import Image

from ranklit.callbacks import load_predictions
from ranklit.cli import main
from ranklit.data import SyntheticHierarchy

TRAIN = [
    "--model.net.init_args.backbone=test_resnet", "--model.net.init_args.pretrained=false",
    "--model.net.init_args.embedding_dim=16", "--data.image_size=32", "--data.resize_size=40", "--data.crop_size=32",
    "--data.mean=[0.5,0.5,0.5]", "--data.std=[0.25,0.25,0.25]", "--data.num_workers=0",
    "--data.batch_sampler.init_args.p=4", "--data.batch_sampler.init_args.k=2",
    "--data.batch_sampler.init_args.batches_per_epoch=2", "--trainer.max_epochs=1", "--trainer.accelerator=cpu",
    "--baseline_validation=false", "--trainer.enable_progress_bar=false",
]


def _figures(run: Path) -> dict[str, float]:
    row = next(r for r in csv.DictReader((run / "metrics.csv").open()) if r.get("test/map_at_r"))
    return {key: float(value) for key, value in row.items() if key.startswith("test/") and value}


@pytest.mark.slow  # a fit, two tests and two predicts: about 50 s on 2 cores
def test_the_getting_started_commands_give_the_runs_own_figures(tmp_path: Path, monkeypatch, capsys) -> None:
    images = tmp_path / "images"
    data = SyntheticHierarchy(split="train", num_coarse=2, fine_per_parent=4, images_per_class=4, image_size=48)
    for i in range(len(data)):
        folder = images / f"class_{int(data.labels[i, 0])}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(data.images[i].permute(1, 2, 0).numpy()).save(folder / f"{i}.png")
    monkeypatch.chdir(tmp_path)
    main(["fit", "--config", "folder.yaml", f"--data.root={images}", *TRAIN])
    run = tmp_path / "runs" / "folder" / "version_0"
    ckpt = str(run / "checkpoints" / "last.ckpt")
    capsys.readouterr()
    main(["test", "--config", str(run / "config.yaml"), "--ckpt_path", ckpt])  # the run's own config: no note
    assert "evaluated with the settings" not in capsys.readouterr().err
    main(["test", "--config", "folder.yaml", "--data.root", str(images), "--ckpt_path", ckpt])  # as documented
    note = capsys.readouterr().err
    for change in ("data.crop_size: checkpoint 32, config 224", "data.resize_size: checkpoint 40, config 256",
                   "data.mean: checkpoint [0.5, 0.5, 0.5], config [0.485, 0.456, 0.406]",
                   "model.net.init_args.backbone: checkpoint 'test_resnet', config 'resnet50'"):
        assert change in note, note
    own, documented = _figures(tmp_path / "runs/folder/version_1"), _figures(tmp_path / "runs/folder/version_2")
    assert documented == pytest.approx(own, abs=1e-6) and own["test/map_at_r"] > 0
    for config, folder in ((str(run / "config.yaml"), "own"), ("folder.yaml", "documented")):
        main(["predict", "--config", config, "--data.root", str(images), "--ckpt_path", ckpt,
              "--predictions_path", str(tmp_path / folder)])
    own_rows, documented_rows = load_predictions(tmp_path / "own"), load_predictions(tmp_path / "documented")
    torch.testing.assert_close(documented_rows["embeddings"], own_rows["embeddings"], atol=1e-6, rtol=0)

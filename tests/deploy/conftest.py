"""A tiny trained run shared by the deploy tests: ``ranklit fit`` for two steps of a test ResNet on 32-px images, and
a folder of generated images (gallery) with exact copies of some of them elsewhere (queries)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from ranklit.cli import main
from ranklit.models import RetrievalModule
from tests.built_once import built_once


@dataclass(frozen=True)
class Run:
    config: Path
    ckpt: Path

    def net(self) -> torch.nn.Module:
        """The checkpoint's network as Lightning loads it (not through ranklit.deploy)."""
        return RetrievalModule.load_from_checkpoint(self.ckpt, map_location="cpu").net.eval()


@pytest.fixture(scope="session")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Built once for all workers (:mod:`tests.built_once`): a test must not change its files."""

    def fit(root: Path) -> None:
        main([
            "fit", "--config", "quickstart.yaml", f"--trainer.logger.init_args.save_dir={root}",
            "--model.net.init_args.backbone=test_resnet", "--model.net.init_args.embedding_dim=16",
            "--trainer.max_epochs=1", "--data.batch_sampler.init_args.batches_per_epoch=2",
            "--baseline_validation=false", "--trainer.enable_progress_bar=false",
            "--trainer.enable_model_summary=false", "--trainer.accelerator=cpu",
        ])

    folder = built_once(tmp_path_factory, "deploy-run", fit) / "quickstart" / "version_0"
    return Run(folder / "config.yaml", folder / "checkpoints" / "last.ckpt")


@dataclass(frozen=True)
class Images:
    gallery: Path
    queries: Path
    originals: dict[str, Path]  # query file name -> its duplicate in the gallery


@pytest.fixture(scope="session")
def images(tmp_path_factory: pytest.TempPathFactory) -> Images:
    """24 gallery images (smooth colour fields of random size, some nested, PNG and JPEG); 4 queries are copies."""
    root = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    gallery, queries = root / "gallery", root / "queries"
    queries.mkdir()
    originals = {}
    for i in range(24):
        height, width = int(rng.integers(32, 64)), int(rng.integers(32, 64))
        low = rng.integers(0, 255, (4, 4, 3)).astype(np.uint8)
        image = Image.fromarray(low).resize((width, height), Image.BILINEAR)
        path = gallery / (f"shop{i % 3}" if i % 2 else "") / f"{i:02d}.{'jpg' if i % 4 == 1 else 'png'}"
        path.parent.mkdir(parents=True, exist_ok=True)
        image.save(path)
        if i % 6 == 3:
            (queries / f"q{i:02d}{path.suffix}").write_bytes(path.read_bytes())
            originals[f"q{i:02d}{path.suffix}"] = path.resolve()
    return Images(gallery, queries, originals)

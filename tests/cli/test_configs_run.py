"""Every config in ``configs/`` runs one ``fast_dev_run`` training step (tiny backbone, synthetic data)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ranklit.cli import main
from tests.cli.test_cli import CONFIGS, TINY


def _synthetic_overrides(config: Path) -> list[str]:
    """Point a config at the synthetic hierarchy with as many label levels as its dataset."""
    data = yaml.safe_load(config.read_text()).get("data", {})
    levels = 3 if "3" in str((data.get("dataset_options") or {}).get("levels", "")) else 2
    options = {"levels": levels, "num_coarse": 2, "fine_per_parent": 4, "images_per_class": 8, "image_size": 32}
    return [
        "--data.dataset=SyntheticHierarchy",
        "--data.root=null",
        f"--data.dataset_options={yaml.safe_dump(options, default_flow_style=True).strip()}",
        "--data.train_split=train",
        "--data.val_split=test",
        "--data.test_split=test",
        "--data.gallery_split=null",
        "--data.sampler=pk",
        "--data.batch_size=16",
        "--data.samples_per_class=4",
    ]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_config_runs_one_step_on_synthetic_data(config: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    main(["fit", "--config", str(config), *TINY, *_synthetic_overrides(config), "--trainer.fast_dev_run=1"])

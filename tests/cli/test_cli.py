"""The ``ranklit`` command line: help, config round trips, one fast_dev_run step per config, clear errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ranklit.cli import CONFIG_DIR, main

CONFIGS = sorted(CONFIG_DIR.glob("*.yaml"))
TINY = [
    "--model.net.init_args.backbone=test_resnet",
    "--model.net.init_args.pretrained=false",
    "--data.image_size=32",
    "--data.resize_size=32",
    "--data.crop_size=32",
    "--data.eval_batch_size=64",
    "--data.num_workers=0",
    "--trainer.accelerator=cpu",
    "--trainer.devices=1",
    "--trainer.logger=false",
]


def _print_config(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--print_config"])
    assert exit_info.value.code in (0, None)
    return yaml.safe_load(capsys.readouterr().out)


def test_help_lists_the_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for subcommand in ("fit", "validate", "test", "predict"):
        assert subcommand in out


def test_console_script_is_installed() -> None:
    result = subprocess.run(["ranklit", "fit", "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--config" in result.stdout


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_print_config_round_trip(config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = _print_config(["fit", "--config", str(config)], capsys)
    saved = tmp_path / "printed.yaml"
    saved.write_text(yaml.safe_dump(first))
    second = _print_config(["fit", "--config", str(saved)], capsys)
    assert first == second


def test_bare_config_name_is_found_in_configs_dir(capsys: pytest.CaptureFixture[str], monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    config = _print_config(["fit", "--config", "quickstart.yaml"], capsys)
    assert config["model"]["loss"]["class_path"] == "ranklit.losses.ROADMAPLoss"


def test_unknown_config_key_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", "quickstart.yaml", "--data.batch_sise=32"])
    assert exit_info.value.code != 0
    assert "batch_sise" in capsys.readouterr().err


def test_unknown_backbone_names_the_closest_timm_models() -> None:
    with pytest.raises(ValueError, match="Unknown timm backbone 'resnet5O'.*resnet50"):
        main(["fit", "--config", "quickstart.yaml", *TINY, "--model.net.init_args.backbone=resnet5O"])


def test_losses_metrics_and_data_do_not_import_lightning() -> None:
    """DESIGN.md: a user who wants only a loss, a metric or a dataset does not pull in Lightning."""
    code = (
        "import sys, ranklit.losses, ranklit.metrics, ranklit.functional, ranklit.data, ranklit.data.transforms; "
        "bad = [m for m in ('lightning', 'pytorch_lightning') if m in sys.modules]; "
        "assert not bad, bad"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr

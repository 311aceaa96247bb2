"""The ``ranklit`` command line: help, config round trips, one fast_dev_run step per config, clear errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ranklit.cli import main
from ranklit.config_files import config_dir
from tests.tiny import synthetic_args

CONFIGS = sorted(config_dir().glob("*.yaml"))
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


def test_fit_help_is_short_and_quiet() -> None:
    result = subprocess.run(["ranklit", "fit", "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--config" in result.stdout and "--data.batch_sampler" in result.stdout
    assert "ranklit.data.ClassFolderDataset" in result.stdout  # every dataset is listed for the dataset options
    assert len(result.stdout.splitlines()) < 800
    assert "Warning" not in result.stderr, result.stderr


def test_configs_subcommand_lists_every_config_with_its_description(capsys: pytest.CaptureFixture[str]) -> None:
    main(["configs"])
    out = capsys.readouterr().out
    for config in CONFIGS:
        assert config.name in out
    assert "Quick start: ROADMAP on the built-in synthetic hierarchy" in out


@pytest.mark.parametrize(
    ("option", "key"),
    [
        ("--data.train_dataset.init_args.levls=2", "levls"),
        ("--data.batch_sampler.init_args.q=3", "q"),
        ("--model.loss.init_args.tua=0.1", "tua"),
    ],
)
def test_typo_inside_init_args_is_rejected_at_parse_time(
    option: str, key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", "quickstart.yaml", option, "--print_config"])
    assert exit_info.value.code != 0
    assert f"'{key}' is not accepted" in capsys.readouterr().err


def test_keys_of_an_older_config_are_refused_naming_the_new_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "old.yaml"
    old.write_text("data:\n  dataset: CUB200\n  batch_size: 64\nmodel:\n  recall_at: [1, 2]\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(old), "--model.multistage_chunk_size=8"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    for key, new in [("data.dataset", "data.train_dataset"), ("data.batch_size", "data.batch_sampler"),
                     ("model.recall_at", "model.metric.init_args.recall_at"),
                     ("model.multistage_chunk_size", "model.multistage.init_args.chunk_size")]:  # fmt: skip
        assert f"`{key}` is now" in err and new in err


def test_missing_dataset_folder_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", "roadmap_cub.yaml", f"--data.root={tmp_path / 'missing'}", *TINY[:2]])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"error: CUB200: dataset folder {tmp_path / 'missing'} does not exist. Expected layout" in err
    assert "Union" not in err


def test_top_level_optimizer_is_refused_with_the_key_to_use(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", "quickstart.yaml", "--optimizer=torch.optim.SGD", "--optimizer.lr=0.1"])
    assert exit_info.value.code != 0
    assert "set `--model.optimizer` instead" in capsys.readouterr().err


def test_quick_start_prints_no_warning_of_ranklit(tmp_path: Path) -> None:
    args = ["ranklit", "fit", "--config", "quickstart.yaml", *TINY, *synthetic_args(), "--trainer.fast_dev_run=1"]
    result = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    warnings = [line for line in result.stderr.splitlines() if "warn" in line.lower()]
    caused = ("ranklit", "LightningCLI", "ckpt_path")  # ranklit's code, its CLI, its FaultTolerance's "last"
    assert not [line for line in warnings if any(word in line for word in caused)], warnings


def test_each_run_writes_its_config_into_its_own_directory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    small = [*TINY[:-1], *synthetic_args(), "--trainer.limit_train_batches=1", "--trainer.limit_val_batches=1"]
    for _ in range(2):
        main(["fit", "--config", "quickstart.yaml", *small, "--trainer.max_epochs=1", "--baseline_validation=false"])
    configs = sorted(tmp_path.glob("runs/quickstart/version_*/config.yaml"))
    assert [c.parent.name for c in configs] == ["version_0", "version_1"]


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
        main(["fit", "--config", "quickstart.yaml", "--data.eval_batch_sise=32"])
    assert exit_info.value.code != 0
    assert "batch_sise" in capsys.readouterr().err


def test_unknown_backbone_names_the_closest_timm_models() -> None:
    with pytest.raises(ValueError, match=r"Unknown timm backbone 'resnet5O'.*resnet50"):
        main(["fit", "--config", "quickstart.yaml", *TINY, "--model.net.init_args.backbone=resnet5O"])


def test_losses_metrics_and_data_do_not_import_lightning() -> None:
    """The layout promise: a user who wants only a loss, a metric or a dataset does not pull in Lightning."""
    code = (
        "import sys, ranklit.losses, ranklit.metrics, ranklit.functional, ranklit.data, ranklit.data.transforms; "
        "bad = [m for m in ('lightning', 'pytorch_lightning') if m in sys.modules]; "
        "assert not bad, bad"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr

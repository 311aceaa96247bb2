"""The ``ranklit`` command line: help, config round trips, one fast_dev_run step per config, clear errors."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ranklit.cli import main
from ranklit.cli._config_files import config_dir
from tests.cli.cli_cases import drive
from tests.data import layouts
from tests.ddp import scaled_timeout
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
    result = subprocess.run(["ranklit", "fit", "--help"], capture_output=True, text=True, timeout=scaled_timeout(120))
    assert result.returncode == 0, result.stderr
    assert "--config" in result.stdout and "--data.batch_sampler" in result.stdout
    assert "ranklit.data.ClassFolderDataset" in result.stdout  # every dataset is listed for the dataset options
    # 777 lines when the bound was set (issue 12), 825 with this wave's options (checkpoint schedule, new rates on
    # resume, bad images, landmark evaluation, evaluation scales), 847 with issue 28's (compile, compile_loss,
    # channels_last, pin_memory), 851 with issue 30's `--requeue`, 860 with issue 31's `--data.normalize_on_device`,
    # 879 with issue 39's `--data.decode_on_device`, the losses' `engine` (issue 38) and `--data.hflip` (issue 40);
    # most of the rest are Lightning's trainer options.
    assert len(result.stdout.splitlines()) < 885
    assert "Warning" not in result.stderr, result.stderr


def test_a_dataset_and_a_sampler_the_config_does_not_name_are_found_by_their_short_names(tmp_path: Path) -> None:
    """jsonargparse knows a subclass by its short name (``--data.val_dataset CUB200``) only once the class is imported,
    and ``import ranklit.data`` is lazy: the datamodule imports every dataset and sampler class. Run by a process that
    imported what the command imports, no more (tests/cli/cli_cases.py)."""
    (result,) = drive([["fit", "--config", "quickstart.yaml", "--data.val_dataset", "CUB200", "--data.batch_sampler",
                        "UniformBatchSampler", "--print_config"]], tmp_path)
    assert result["returncode"] == 0, result["stderr"][-2000:]
    data = yaml.safe_load(result["stdout"])["data"]
    assert data["val_dataset"]["class_path"] == "ranklit.data.CUB200"
    assert data["batch_sampler"]["class_path"] == "ranklit.data.UniformBatchSampler"


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
                     ("model.multistage_chunk_size", "model.multistage.init_args.chunk_size")]:
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


# What Lightning and ranklit print on stderr that is not a warning: the only lines a quiet quick start may show.
INFO = ("Seed set to", "GPU available", "TPU available", "HPU available", "Restoring states from",
        "Restored all states", "Loaded model weights", "`Trainer.fit` stopped", "Resuming ")
# Lightning's model summary: information, printed or not by Lightning's logger set-up (a root logging handler
# installed by another package at import silences it)
SUMMARY = re.compile(r"^(\s*\| Name|-+$|\d+\s+\|\s|[\d.]+\s*[KMG]?\s+(Trainable|Non-trainable|Total|Modules))")


def test_quick_start_fit_resume_test_and_predict_print_no_warning(tmp_path: Path) -> None:
    """No warning the user did not cause: the settings below cause none (p fits the classes, logging every step).
    ``fit`` runs as the console script (import-time warnings included); resume, test and predict then run as their
    own processes forked after the import (tests/cli/cli_cases.py)."""
    quiet = [*TINY[:-1], *synthetic_args(), "--data.batch_sampler.init_args.p=4", "--trainer.limit_train_batches=2",
             "--trainer.log_every_n_steps=1", "--trainer.enable_progress_bar=false"]
    run = tmp_path / "runs" / "quickstart" / "version_0"
    fit = ["ranklit", "fit", "--config", "quickstart.yaml", *quiet, "--trainer.max_epochs=1"]
    first = subprocess.run(fit, cwd=tmp_path, capture_output=True, text=True, timeout=scaled_timeout(600))
    shutil.copy(run / "config.yaml", tmp_path / "fit.yaml")  # the run's config, for test and predict
    checkpoint = f"--ckpt_path={run / 'checkpoints' / 'last.ckpt'}"
    later = [
        ["fit", "--config", "quickstart.yaml", *quiet, "--trainer.max_epochs=2", "--resume=true"],
        # the run's own config, logging into the run's folder (as an older ranklit saved it): left as it is
        ["test", "--config", str(run / "config.yaml"), checkpoint, "--trainer.logger.init_args.version=0"],
        ["predict", "--config", "fit.yaml", checkpoint],
        # an evaluation config without the training run's ModelCheckpoint: still no "Please add the following callbacks"
        ["test", "--config", "revisited_eval.yaml", checkpoint, "--data.root=data", "--data.num_workers=0",
         "--trainer.accelerator=cpu", "--model.landmarks.init_args.postprocess=[]",
         "--trainer.enable_progress_bar=false"],
    ]
    for name in ("roxford5k", "rparis6k"):
        layouts.revisited(tmp_path / "data" / name, name)
    runs = [{"args": fit[1:], "returncode": first.returncode, "stderr": first.stderr}, *drive(later, tmp_path)]
    for result in runs:
        assert result["returncode"] == 0, result["stderr"][-3000:]
        noise = [line for line in result["stderr"].splitlines() if line.strip() and not line.startswith(INFO)
                 and not SUMMARY.match(line)]
        if "revisited_eval.yaml" in result["args"]:  # another network than the checkpoint's: named, the user's doing
            note = noise.pop(0) if noise else ""
            assert "model.net.init_args.backbone: checkpoint 'test_resnet', config 'resnet101'" in note, note
            assert "data." not in note  # RevisitedTestSet has its own transform: the preprocessing is not used
        assert not noise, (result["args"][0], noise)
    assert f"Resuming {run.relative_to(tmp_path)}" in runs[1]["stderr"]
    saved = yaml.safe_load((run / "config.yaml").read_text())  # by the resume, as a fresh-run config
    version = saved["trainer"]["logger"]["init_args"]["version"]
    assert (saved["resume"], saved["ckpt_path"], version) == (False, None, None)
    assert any((tmp_path / "predictions").glob("*.json"))  # the descriptor shards' manifest, written last


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
    assert first["trainer"]["use_distributed_sampler"] is False  # the CLI's default: ranklit's samplers split batches


def test_bare_config_name_is_found_in_configs_dir(capsys: pytest.CaptureFixture[str], monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    config = _print_config(["fit", "--config", "quickstart.yaml"], capsys)
    assert config["model"]["loss"]["class_path"] == "ranklit.losses.ROADMAPLoss"


def test_unknown_config_key_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", "quickstart.yaml", "--data.eval_batch_sise=32"])
    assert exit_info.value.code != 0
    assert "batch_sise" in capsys.readouterr().err


# Every user error: (name, command line, what stderr must say). `{root}` is the folder of the planted mistakes.
CHEAP = ["--model.net.init_args.backbone=test_resnet", "--model.net.init_args.pretrained=false",
         "--trainer.accelerator=cpu", "--data.num_workers=0", "--trainer.logger=false"]
USER_ERRORS = [
    ("fit without config", ["fit"], "`ranklit fit` needs a config (`--config FILE`)"),
    ("test without config", ["test", "--ckpt_path", "{root}/run/checkpoints/last.ckpt"],
     "--config {root}/run/config.yaml --ckpt_path"),
    ("empty YAML", ["fit", "--config", "{root}/empty.yaml"], "empty.yaml is empty"),
    ("YAML with a tab", ["fit", "--config", "{root}/tab.yaml"], "tab.yaml, line 2, column 1: found character '\\t'"),
    ("YAML syntax", ["fit", "--config", "{root}/syntax.yaml"], "syntax.yaml, line 3, column 1: expected ',' or ']'"),
    ("typo in a key", ["fit", "--config", "quickstart.yaml", "--data.eval_batch_sise=3"], "eval_batch_sise"),
    # argparse's prefix matching took `--trainer.max_epoch` for `--trainer.max_epochs` and ran (a typo could set
    # another key than the one meant): refused, naming the key
    ("abbreviated key", ["fit", "--config", "quickstart.yaml", "--trainer.max_epoch", "3"],
     "unrecognized arguments: --trainer.max_epoch 3. Did you mean `--trainer.max_epochs`?"),
    ("negative max_epochs", ["fit", "--config", "quickstart.yaml", *CHEAP, "--trainer.max_epochs=-5"],
     "`max_epochs` must be a non-negative integer or -1. You passed in -5."),
    ("unknown backbone", ["fit", "--config", "quickstart.yaml", "--model.net.init_args.backbone=resnet5O"],
     "Unknown timm backbone 'resnet5O'. Closest timm names: resnet50"),
    ("CSV mistakes", ["fit", "--config", "csv.yaml", "--data.root={root}/csv", *CHEAP],
     "CSVDataset: 5 problems in {root}/csv/dataset.csv; fix them all"),
    ("CSV without a label column", ["fit", "--config", "csv.yaml", "--data.root={root}/nolabel", *CHEAP],
     "line 1: expected the header `path,label"),
    ("folder mistakes", ["fit", "--config", "folder.yaml", "--data.root={root}/folder", *CHEAP],
     "ClassFolderDataset: 2 problems in {root}/folder; fix them all"),
    ("one evaluation class", ["fit", "--config", "folder.yaml", "--data.root={root}/two", *CHEAP],
     "has a single class: every image retrieved is a positive"),
]


def _png(path: Path, value: int = 0) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (value, 0, 0)).save(path)


def _plant_mistakes(root: Path) -> None:
    (root / "empty.yaml").write_text("")
    (root / "tab.yaml").write_text("trainer:\n\tmax_epochs: 3\n")
    (root / "syntax.yaml").write_text("trainer:\n  max_epochs: [3\n")
    (root / "run" / "checkpoints").mkdir(parents=True)
    (root / "run" / "config.yaml").write_text("seed_everything: 0\n")
    splits = ["train"] * 3 + ["test"] * 3
    rows = ["path,label,split", *(f"{c}/{i}.png,{c},{s}" for c, s in zip("abcdef", splits, strict=True) for i in "01")]
    for row in rows[1:]:
        _png(root / "csv" / row.split(",")[0])
    rows += ["a/0.png,a,Train", "b/0.png,b,tset", "c/1.png,c,train", "c/9.png,c,train", "d/0.png,d"]
    (root / "csv" / "dataset.csv").write_text("\n".join(rows) + "\n")  # split Train, tset, duplicate, missing, short
    (root / "nolabel").mkdir()
    (root / "nolabel" / "dataset.csv").write_text("path,split\na.png,train\n")
    for c in "abcd":
        for i in range(3):
            _png(root / "folder" / c / f"{i}.png")
    for c in "ab":  # 2 classes: 1 trains, 1 evaluates
        for i in range(3):
            _png(root / "two" / c / f"{i}.png")
    _png(root / "folder" / "e" / "deeper" / "0.png")  # a class one folder deeper than the others
    (root / "folder" / "a" / "empty.png").write_bytes(b"")
    (root / "folder" / "a" / "._0.png").write_bytes(b"\x00\x05\x16\x07")  # macOS metadata: skipped, counted
    (root / "folder" / "notes.txt").write_text("not an image")


@pytest.fixture(scope="module")
def user_error_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Every command line of ``USER_ERRORS``, each run as its own process (one start-up: tests/cli/cli_cases.py)."""
    root = tmp_path_factory.mktemp("mistakes")
    _plant_mistakes(root)
    cases = [[arg.format(root=root) for arg in args] for _, args, _ in USER_ERRORS]
    runs = drive(cases, Path.cwd(), scratch=root)
    return {name: {**run, "root": str(root)} for (name, _, _), run in zip(USER_ERRORS, runs, strict=True)}


@pytest.mark.parametrize(("name", "expected"), [(name, expected) for name, _, expected in USER_ERRORS])
def test_user_error_is_a_few_lines_and_exit_code_2(name: str, expected: str, user_error_runs: dict) -> None:
    run = user_error_runs[name]
    stderr = run["stderr"]
    assert run["returncode"] == 2, stderr
    assert "Traceback" not in stderr and "Union" not in stderr, stderr
    assert len(stderr.splitlines()) <= 6, stderr
    assert expected.format(root=run["root"]) in stderr, stderr


def test_every_csv_and_folder_mistake_is_named_at_once(user_error_runs: dict) -> None:
    csv_err, folder_err = user_error_runs["CSV mistakes"]["stderr"], user_error_runs["folder mistakes"]["stderr"]
    for part in ("1 rows with fewer fields than the header's 3 (path,label,split): line 18",
                 "2 rows with an unknown split value (found 'Train' x1, 'tset' x1; expected one of train, val, test, "
                 "query, gallery): line 14, line 15",
                 "1 listed files not found: line 17 (c/9.png)",
                 "1 files listed more than once (they would count as extra queries): line 16 (c/1.png), first at "
                 "line 7 (c/1.png)"):
        assert part in csv_err, csv_err
    assert "e/deeper/0.png" in folder_err and "1 empty files (0 bytes)" in folder_err and "a/empty.png" in folder_err
    assert "skipped 2 file(s)" in folder_err and "._0.png" in folder_err  # the warning counting the skipped files


def test_bad_sampler_setting_stops_the_run_before_the_baseline_validation(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lightning.pytorch import Trainer

    def baseline(*args: object, **kwargs: object) -> None:
        raise AssertionError("the baseline validation ran before the sampler was checked")

    monkeypatch.setattr(Trainer, "validate", baseline)
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", "quickstart.yaml", *TINY, *synthetic_args(), "--data.batch_sampler.init_args.p=0"])
    assert exit_info.value.code == 2
    assert "error: `data.batch_sampler`: `p` must be a positive integer, got 0." in capsys.readouterr().err

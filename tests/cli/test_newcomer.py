"""What a newcomer still met (issue 47, items 5 and 7), each tried as a new user would: the ``ranklit`` command run
as a process (one start-up for every case: :func:`tests.cli.cli_cases.drive`) and what it prints."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
import torch

from ranklit.cli import main
from ranklit.cli._brief_help import COMMON, EXAMPLES
from ranklit.cli._export_command import arguments as export_arguments
from ranklit.cli._index_command import arguments as index_arguments
from ranklit.cli._prepare_command import prepare_parser
from ranklit.cli._search_command import arguments as search_arguments
from tests.cli.cli_cases import drive

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("newcomer")
    (root / "test_run.yaml").write_text("verbose: true\n")  # what `ranklit test` saves in its run's config.yaml
    run = root / "runs" / "quickstart" / "version_0"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("model: {}\n")
    torch.save({"state_dict": {}, "epoch": 0}, run / "checkpoints" / "last.ckpt")
    ckpt = str(run / "checkpoints" / "last.ckpt")
    examples = [word for example in EXAMPLES for word in example.split()]
    cases = {
        "predict with a test run's config": ["predict", "--config", "quickstart.yaml", "--config",
                                             str(root / "test_run.yaml")],
        "test --config CKPT": ["test", "--config", ckpt],
        "index --config CKPT": ["index", "--config", ckpt, "--ckpt_path", ckpt, "--images", str(root), "--output",
                                str(root / "index")],
        "index --image": ["index", "--config", str(run / "config.yaml"), "--ckpt_path", ckpt, "--image", str(root),
                          "--output", str(root / "index")],
        "search --exclude_self false": ["search", "--index", str(root / "no_index"), "--query", str(root / "q.jpg"),
                                        "--exclude_self", "false"],
        "fit --help": ["fit", "--help"],
        "fit --help all": ["fit", "--help", "all"],
        "the help's examples": ["fit", "--config", "quickstart.yaml", *examples, "--print_config"],
    }
    if not torch.cuda.is_available():  # where the kernels can run, the run would train
        cases["engine triton"] = ["fit", "--config", "quickstart.yaml", "--model.loss.init_args.engine", "triton",
                                  f"--trainer.logger.init_args.save_dir={root / 'triton_runs'}"]
    found = drive(list(cases.values()), REPOSITORY, scratch=root, TRITON_INTERPRET="0")
    return dict(zip(cases, found, strict=True))


def _error(result: dict) -> str:
    """The one error line of a case that exited with 2, no traceback."""
    assert result["returncode"] == 2 and "Traceback" not in result["stderr"], result["stderr"][-3000:]
    errors = [line for line in result["stderr"].splitlines() if "error: " in line]
    assert len(errors) == 1, result["stderr"][-3000:]
    return errors[0]


def test_a_test_runs_config_given_to_predict_says_where_verbose_comes_from(results: dict) -> None:
    """jsonargparse 4.53 says "Subcommand 'predict' does not accept option 'verbose'" on the real parse (the hint
    waited for "Option 'verbose' is not accepted", what only `--print_config` prints)."""
    line = _error(results["predict with a test run's config"])
    assert "Subcommand 'predict' does not accept option 'verbose'" in line
    assert "an option of `ranklit test` and `ranklit validate` only" in line and "delete its `verbose:` line" in line


@pytest.mark.parametrize("case", ["test --config CKPT", "index --config CKPT"])
def test_a_checkpoint_given_as_config_is_one_line_naming_it(results: dict, case: str) -> None:
    line = _error(results[case])
    assert re.search(r"error: \S+last\.ckpt is a checkpoint, not a config: give it as `--ckpt_path \S+last\.ckpt`",
                     line), line
    assert "runs/quickstart/version_0/config.yaml" in line  # the run's own config, found beside its checkpoints


def test_no_option_is_taken_for_another_that_it_begins(results: dict) -> None:
    line = _error(results["index --image"])
    assert "unrecognized arguments: --image. Did you mean `--images`?" in line, line


@pytest.mark.parametrize(
    ("parse", "args"),
    [
        (lambda args: export_arguments().parse_args(args), ["--form", "onnx"]),
        (lambda args: index_arguments().parse_args(args), ["--image", "x"]),
        (lambda args: search_arguments().parse_args(args), ["--exclude", "x"]),
        (lambda args: prepare_parser().parse_args(args), ["cub", "--root", "r", "--roo", "x"]),
        (lambda args: main(["data", "check", *args]), ["--config", "quickstart.yaml", "--no-prog"]),
    ],
)
def test_every_command_refuses_an_abbreviated_option(parse, args: list[str], capsys) -> None:
    """Every ranklit command's parser, not only the run commands' (`data check` leaves it to the fit parser)."""
    abbreviated = next(arg for arg in args if arg in ("--form", "--image", "--exclude", "--roo", "--no-prog"))
    with pytest.raises(SystemExit) as stop:
        parse(args)
    assert stop.value.code == 2
    assert f"unrecognized arguments: {abbreviated}" in capsys.readouterr().err


def test_search_takes_exclude_self_false_as_the_run_commands_spell_a_boolean(results: dict) -> None:
    assert "unrecognized" not in results["search --exclude_self false"]["stderr"]
    assert "query image" in _error(results["search --exclude_self false"])  # parsed: the missing query is next
    parse = search_arguments().parse_args
    base = ["--index", "i", "--query", "q"]
    assert [parse([*base, *extra]).exclude_self for extra in ([], ["--exclude_self", "false"], ["--exclude_self"],
                                                               ["--no-exclude_self"], ["--exclude_self=No"])] == [
        True, False, True, False, False]
    with pytest.raises(SystemExit):
        parse([*base, "--exclude_self", "maybe"])
    assert isinstance(search_arguments(), argparse.ArgumentParser)


def test_fit_help_shows_what_a_new_run_sets_and_says_how_to_get_every_option(results: dict) -> None:
    brief, full = results["fit --help"], results["fit --help all"]
    assert brief["returncode"] == 0 and full["returncode"] == 0, (brief["stderr"], full["stderr"])
    lines = brief["stdout"].splitlines()
    assert len(lines) < 300, len(lines)  # 879 before (issue 47)
    first_screen = " ".join(" ".join(lines[:8]).split())
    assert re.search(r"`\S+ fit --help all` lists every one", first_screen), first_screen
    shown = set(re.findall(r"^  (?:-h, |-c CONFIG, )?(--[\w.]+)", brief["stdout"], flags=re.M))
    expected = {f"--{key}" for key in COMMON if key not in ("overwrite",)}  # `overwrite`: predict's
    assert shown == expected, (shown ^ expected)
    assert "--trainer.gradient_clip_val" not in brief["stdout"]
    for example in EXAMPLES:
        assert example in brief["stdout"]
    assert len(full["stdout"].splitlines()) > 800 and "--trainer.gradient_clip_val" in full["stdout"]


def test_the_help_examples_are_keys_the_parser_takes(results: dict) -> None:
    printed = results["the help's examples"]
    assert printed["returncode"] == 0, printed["stderr"][-2000:]
    assert re.search(r"lr: 0\.0001\b", printed["stdout"]) and re.search(r"\bp: 8\b", printed["stdout"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="the Triton kernels can run here")
def test_engine_triton_where_it_cannot_run_is_refused_when_the_loss_is_built(results: dict) -> None:
    """Not at the first training step after the baseline validation: nothing is validated nor trained."""
    result = results["engine triton"]
    line = _error(result)
    assert "engine='triton' cannot run on this machine" in line and "engine='auto'" in line, line
    assert "val/" not in result["stdout"] + result["stderr"]  # no baseline validation ran

"""Start-up (issue 31): what the ``ranklit`` command answers without Lightning imports none of the training stack, and
the lean core (losses, metrics) imports no Lightning. Checked by the modules a fresh process has loaded, not by
timing (``benchmarks/startup.py`` times it); the answers themselves are checked in the same runs."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ranklit.cli import main
from ranklit.cli._dispatch import RUN_OPTIONS
from tests.ddp import scaled_timeout

ROOT = Path(__file__).resolve().parents[2]
HEAVY = {"lightning", "pytorch_lightning", "timm", "wandb", "matplotlib", "scipy", "torchvision", "jsonargparse"}
# Runs `python -m ranklit.cli ARGS` as the console script does, then writes the top-level modules it had loaded and
# the number of objects the collector had frozen (gc.get_freeze_count()) when the command returned.
_WRAPPER = """
import atexit, gc, json, runpy, sys
out = sys.argv.pop(1)
loaded = lambda: sorted({m.split(".")[0] for m in sys.modules})
atexit.register(lambda: json.dump([loaded(), gc.get_freeze_count()], open(out, "w")))
sys.argv[0] = "ranklit"
runpy.run_module("ranklit.cli", run_name="__main__")
"""


def _ranklit(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    run, loaded, _ = _ranklit_frozen(tmp_path, *args)
    return run, loaded


def _ranklit_frozen(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str], int]:
    out = tmp_path / "modules.json"
    command = [sys.executable, "-c", _WRAPPER, str(out), *args]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=scaled_timeout(120))
    modules, frozen = json.loads(out.read_text())
    return run, set(modules), frozen


EVERY_COMMAND = ["fit", "validate", "test", "predict", "configs", "check gpu", "data check", "data prepare", "export",
                 "index", "search"]


def test_help_and_mistakes_answer_without_the_training_stack(tmp_path: Path) -> None:
    run, loaded = _ranklit(tmp_path, "--help")
    assert run.returncode == 0 and not loaded & (HEAVY | {"torch"}), sorted(loaded & (HEAVY | {"torch"}))
    listed = [line.split("  ")[1].strip() for line in run.stdout.splitlines() if line.startswith("  ")]
    assert listed == EVERY_COMMAND

    run, loaded = _ranklit(tmp_path)  # `ranklit` alone lists the commands too (issue 32), as an error
    assert run.returncode == 2 and "configs" in run.stderr and "data prepare" in run.stderr and not loaded & HEAVY

    run, loaded = _ranklit(tmp_path, "fti", "--config", "quickstart.yaml")
    assert run.returncode == 2 and not loaded & HEAVY
    assert run.stderr.startswith("error: `fti` is not a ranklit command: did you mean `ranklit fit`?")
    assert run.stderr.count("\n") == 1

    run, loaded = _ranklit(tmp_path, "fit", "--config", "quickstart.yaml", "--trainer.max_epochs=1", "--nonsense", "1")
    assert run.returncode == 2 and not loaded & HEAVY and "Traceback" not in run.stderr
    assert run.stderr.startswith("error: `--nonsense` is not an option of `ranklit fit`") and "--trainer" in run.stderr

    run, loaded = _ranklit(tmp_path, "configs")
    assert run.returncode == 0 and "quickstart.yaml" in run.stdout and not loaded & HEAVY


def test_the_console_script_freezes_the_heap_before_exit_and_a_caller_of_main_keeps_its_collector(tmp_path) -> None:
    """The console script's process ends after the command: ``main()`` collects the command's garbage and freezes
    the rest, so that Python's finalisation skips its cyclic collections (1.8 s of every exit with the training
    stack loaded); on an error exit too. ``main(args)`` called in a process that goes on freezes nothing."""
    for args, code in ((["configs"], 0), (["fti"], 2)):
        run, _, frozen = _ranklit_frozen(tmp_path, *args)
        assert run.returncode == code and frozen > 0, (run.stderr, frozen)
    before = gc.get_freeze_count()
    main(["configs"])
    with pytest.raises(SystemExit):
        main(["fti"])
    assert gc.get_freeze_count() == before


@pytest.mark.parametrize("command", [["data", "prepare"], ["export"], ["index"], ["search"]])
def test_other_commands_help_without_the_training_stack(tmp_path: Path, command: list[str]) -> None:
    run, loaded = _ranklit(tmp_path, *command, "--help")
    assert run.returncode == 0 and f"usage: ranklit {' '.join(command)}" in run.stdout
    assert not loaded & HEAVY, sorted(loaded & HEAVY)
    if command == ["data", "prepare"]:  # nor torch (2 s): `import ranklit.data` is lazy
        assert "torch" not in loaded


def _importers(importtime: str, package: str) -> list[list[str]]:
    """For each first import of ``package`` in ``python -X importtime`` output, the chain of modules importing it
    (outermost first): a line's importer is the next line below it with less indentation."""
    rows = [line.split("|")[-1] for line in importtime.splitlines() if line.startswith("import time:")][1:]
    parsed = [(len(row) - len(row.lstrip()), row.strip()) for row in rows]
    chains = []
    for i, (depth, name) in enumerate(parsed):
        if name != package:
            continue
        chain = [name]
        for later_depth, later in parsed[i + 1 :]:
            if later_depth < depth:
                chain.append(later)
                depth = later_depth
        chains.append(chain[::-1])
    return chains


def test_the_lean_core_imports_no_lightning() -> None:
    command = [sys.executable, "-X", "importtime", "-c", "import ranklit.losses, ranklit.metrics"]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=scaled_timeout(120))
    assert run.returncode == 0
    for package in ("lightning", "pytorch_lightning", "timm", "wandb", "jsonargparse"):
        assert not _importers(run.stderr, package), package
    for package in ("torchvision", "scipy", "matplotlib"):  # torchmetrics imports them when they are installed
        for chain in _importers(run.stderr, package):
            innermost = max(i for i, name in enumerate(chain) if name.startswith("ranklit."))
            assert chain[innermost + 1].startswith("torchmetrics"), chain  # not a ranklit module's own import


NEWER_LIGHTNING = {"weights_only"}  # LightningCLI's options that its oldest supported version (2.5.5) lacks


def test_the_early_option_check_knows_every_top_level_option_of_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    """``RUN_OPTIONS`` is the first part of the options that ``ranklit COMMAND --help all`` lists (LightningCLI's): an
    option added to the parser without it would be refused before parsing."""
    for command, known in RUN_OPTIONS.items():
        with pytest.raises(SystemExit) as stopped:
            main([command, "--help", "all"])
        assert stopped.value.code == 0
        listed = {
            line.split("--", 1)[1].split()[0].split(".")[0].split("=")[0].rstrip("+")
            for line in capsys.readouterr().out.splitlines()
            if line.startswith("  -") and "--" in line
        }
        assert listed <= known, (command, sorted(listed - known))  # none refused before parsing
        assert known - listed <= NEWER_LIGHTNING, (command, sorted(known - listed))  # and no option made up

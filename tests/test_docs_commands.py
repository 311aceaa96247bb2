"""Every command of the README and the user guides (getting-started, cli, deploy, datasets, resuming, gpu), as written
in their ``bash`` blocks, is accepted by what it calls: each ``ranklit`` command by its own parser (the configs it
names exist, every option is one of the command's, every value has the option's type), ``pip install`` extras by
pyproject, ``pytest -m`` markers by the registered ones, benchmark scripts and their options by the script.

Parsing only: a command here builds no model and reads no data (``/data/inat`` is no folder on this machine). The
commands that print a figure are run for real, with the words of the docs, by their own tests: the getting-started
``fit``/``test``/``predict`` in ``tests/cli/test_checkpoint_settings.py``, the deploy ``export``/``index``/``search``
chain below, the serving snippet in ``tests/deploy/test_export.py``, ``data prepare cub`` in
``tests/data/prepare/``. The inline mentions (``ranklit test --config C.yaml --ckpt_path X.ckpt``) are
synopses with placeholders, not commands, and are left out.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/getting-started.md", "docs/cli.md", "docs/deploy.md", "docs/datasets.md",
         "docs/resuming.md", "docs/gpu.md")
_WRAPPERS = ("srun", "torchrun")  # launchers: the ranklit command follows


def documented_commands(page: str) -> list[list[str]]:
    """The commands of ``page``'s ``bash`` blocks: continuation lines joined, comments dropped, ``a && b`` split,
    ``[--json]`` (an optional part) kept as ``--json``."""
    text = (ROOT / page).read_text()
    found = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            if line.startswith("[ "):  # `[ $? -eq 143 ] && scontrol requeue ...`: the shell's, not a ranklit command
                continue
            words = shlex.split(line.replace("[--", "--").replace("] ", " ").rstrip("]"), comments=True)
            while words:
                cut = words.index("&&") if "&&" in words else len(words)
                found.append(words[:cut])
                words = words[cut + 1:]
    return [c for c in found if c]


def _unwrapped(words: list[str]) -> list[str]:
    """The command a launcher runs: ``srun ranklit ...``, ``torchrun ... $(which ranklit) ...``."""
    if words[0] in _WRAPPERS:
        start = next(i for i, w in enumerate(words) if w in ("ranklit", "ranklit)"))  # `$(which ranklit)`, split
        return ["ranklit", *words[start + 1:]]
    return words


CASES = [(page, i, words) for page in PAGES for i, words in enumerate(documented_commands(page))]


def _parse_run_command(args: list[str]) -> None:
    """``ranklit fit/test/validate/predict ARGS`` parsed by ranklit's LightningCLI as the command parses it, with
    the configs resolved as ``ranklit`` resolves them; no checkpoint read, no run looked up, nothing built."""
    from ranklit._compat.lightning import parse_only
    from ranklit.cli._app import RanklitCLI, command_line
    from ranklit.cli._config_files import resolve_config_paths
    from ranklit.cli._errors._surface import check_command_line
    from ranklit.data import RetrievalDataModule
    from ranklit.models import RetrievalModule

    class NothingBuilt(RanklitCLI):
        def _parse_ckpt_path(self) -> None: ...  # the docs' checkpoints are placeholders
        def before_instantiate_classes(self) -> None: ...
        def instantiate_classes(self) -> None: ...
        def after_instantiate_classes(self) -> None: ...

    args = resolve_config_paths(args)
    check_command_line(args)
    with command_line(args):
        parse_only(NothingBuilt)(RetrievalModule, RetrievalDataModule)


def _parse_ranklit(args: list[str]) -> None:
    from ranklit.cli._commands import find

    name = find(args)
    assert name is not None, f"no ranklit command {args[0]!r}"
    rest = args[len(name.split()):]
    if name == "data prepare":
        from ranklit.cli._prepare_command import prepare_parser
        from ranklit.data import DATASET_CATALOG

        name = prepare_parser().parse_args(rest).name
        assert name in DATASET_CATALOG, f"no dataset {name!r} in ranklit.data.DATASET_CATALOG"
    elif name == "data check":
        _parse_run_command(["fit", *rest])  # `data check` reads fit's command line
    elif name == "check gpu":
        from ranklit.cli._check_gpu_command import arguments

        arguments().parse_args(rest)
    elif name in ("export", "index", "search"):
        from ranklit.cli import _export_command, _index_command, _search_command

        module: Any = {"export": _export_command, "index": _index_command, "search": _search_command}[name]
        module.arguments().parse_args(rest)
    else:
        _parse_run_command(args)


def _pyproject() -> dict[str, Any]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+ (the suite's own environment)
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _check_other(words: list[str]) -> None:
    """``pip install``, ``python -m pytest``, ``python benchmarks/X.py``, ``bash benchmarks/X.sh``."""
    if words[:2] == ["pip", "install"]:
        extras = _pyproject()["project"]["optional-dependencies"]
        for target in (w for w in words[2:] if w not in ("-e", "ranklit", ".")):
            match = re.fullmatch(r"(?:ranklit|\.)\[(\w+)\]", target)
            assert match is not None and match.group(1) in extras, f"{target}: no such extra in pyproject.toml"
        return
    if words[:3] == ["python", "-m", "pytest"]:
        if "-m" in words[3:]:
            marker = words[words.index("-m", 3) + 1]
            markers = _pyproject()["tool"]["pytest"]["ini_options"]["markers"]
            assert any(m.startswith(f"{marker}:") for m in markers), f"no pytest marker {marker!r}"
        return
    assert words[0] in ("python", "bash") and (ROOT / words[1]).is_file(), f"{words[1]} does not exist"
    if words[0] == "python":
        shown = subprocess.run([sys.executable, words[1], "--help"], cwd=ROOT, capture_output=True, text=True,
                               timeout=120)
        assert shown.returncode == 0, shown.stderr
        for option in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
            assert option in shown.stdout, f"{words[1]} has no option {option}"


@pytest.mark.parametrize(("page", "i", "words"), CASES, ids=[f"{p}:{i}" for p, i, _ in CASES])
def test_every_documented_command_is_accepted_as_written(page: str, i: int, words: list[str], monkeypatch) -> None:
    monkeypatch.chdir(ROOT)  # `configs/quickstart.yaml` is relative to a clone's root
    words = _unwrapped(words)
    if words[0] == "ranklit":
        _parse_ranklit(words[1:])
    else:
        _check_other(words)


def test_a_documented_command_with_a_wrong_option_or_value_is_refused() -> None:
    """The check can fail: a misspelt option, a wrong type, a missing config, an unknown dataset or option."""
    for args in (["fit", "--config", "quickstart.yaml", "--trainer.max_epochz", "2"],
                 ["fit", "--config", "quickstart.yaml", "--trainer.max_epochs", "two"],
                 ["test", "--config", "no_such.yaml", "--ckpt_path", "x.ckpt"],
                 ["data", "prepare", "cubb", "--root", "x"],
                 ["search", "--index", "i", "--query", "q.jpg", "--top", "10"]):
        with pytest.raises((SystemExit, AssertionError)) as refused:
            _parse_ranklit(args)
        assert refused.type is AssertionError or refused.value.code == 2, args


def test_the_documented_commands_are_found() -> None:
    """The extraction finds what a reader sees (a change of the blocks' form would silently empty the test)."""
    readme = [" ".join(c) for c in documented_commands("README.md")]
    assert "ranklit fit --config configs/quickstart.yaml" in readme
    assert "ranklit data prepare cub --root data/CUB_200_2011" in readme  # the left side of `&&`
    assert "ranklit search --index catalogue_index --query photo.jpg --k 10 --json --output grid.png" in readme
    assert len(CASES) >= 45


def test_the_deploy_commands_run_as_written_and_search_prints_the_index_scores(tmp_path: Path, monkeypatch,
                                                                               capsys) -> None:
    """docs/deploy.md's ``export``/``index``/``search`` lines, word for word, after a tiny ``fit --config
    folder.yaml`` wrote ``runs/folder/version_0``: each exits 0, and the neighbours and scores ``search`` prints are
    those of the index searched from Python (the query is a JPEG of catalogue image 0: its first neighbour)."""
    from ranklit.cli import main
    from ranklit.data import SyntheticHierarchy
    from ranklit.deploy import Retriever

    data = SyntheticHierarchy(split="train", num_coarse=2, fine_per_parent=4, images_per_class=3, image_size=40)
    for i in range(len(data)):
        for folder in (tmp_path / "my_images" / f"class_{int(data.labels[i, 0])}", tmp_path / "my_catalogue"):
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray(data.images[i].permute(1, 2, 0).numpy()).save(folder / f"{i}.png")
    (tmp_path / "queries").mkdir()
    Image.open(tmp_path / "my_catalogue" / "0.png").save(tmp_path / "photo.jpg", quality=95)
    Image.open(tmp_path / "my_catalogue" / "1.png").save(tmp_path / "queries" / "a.png")
    monkeypatch.chdir(tmp_path)
    main(["fit", "--config", "folder.yaml", "--data.root", "my_images", "--model.net.init_args.backbone=test_resnet",
          "--model.net.init_args.pretrained=false", "--model.net.init_args.embedding_dim=16", "--data.image_size=32",
          "--data.resize_size=40", "--data.crop_size=32", "--data.num_workers=0",
          "--data.batch_sampler.init_args.p=3", "--data.batch_sampler.init_args.k=2",
          "--data.batch_sampler.init_args.batches_per_epoch=1", "--trainer.max_epochs=1",
          "--trainer.accelerator=cpu", "--baseline_validation=false", "--trainer.enable_progress_bar=false"])
    deploy = [c for c in documented_commands("docs/deploy.md") if c[0] == "ranklit"]
    assert [c[1] for c in deploy] == ["export", "index", "search", "search"]
    printed = []
    for words in deploy:
        capsys.readouterr()
        main(words[1:])
        printed.append(capsys.readouterr().out)
    assert Path("model.onnx").is_file() and Path("grid.png").is_file()
    rows = [line.split() for line in printed[2].splitlines()[1:]]  # "   1  0.9987  my_catalogue/0.png"
    hits = Retriever.from_index("catalogue_index").search(["photo.jpg"], k=10)[0]
    assert [(int(r), float(s), Path(p).name) for r, s, p in rows] == [
        (rank, round(hit.score, 4), Path(hit.path).name) for rank, hit in enumerate(hits, start=1)]
    assert len(rows) == 10 and Path(rows[0][2]).name == "0.png"

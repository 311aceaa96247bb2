"""The wheel carries the configs: installed without the source tree, ``ranklit`` runs them by bare name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli import TINY
from tests.ddp import scaled_timeout
from tests.tiny import synthetic_args

REPO = Path(__file__).resolve().parent.parent


def _run(args: list[str], cwd: Path, site: Path, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}  # the wheel's ranklit, never the source tree
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_wheel_installed_without_the_source_runs_configs_by_name(tmp_path: Path) -> None:
    wheels, site, empty = tmp_path / "wheels", tmp_path / "site", tmp_path / "empty"
    empty.mkdir()
    pip = [sys.executable, "-m", "pip"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", str(REPO), "-w", str(wheels)]
    assert subprocess.run(build, capture_output=True, text=True, timeout=scaled_timeout(300)).returncode == 0
    (wheel,) = wheels.glob("ranklit-*.whl")
    install = [*pip, "install", "--no-deps", "-q", "--target", str(site), str(wheel)]
    assert subprocess.run(install, capture_output=True, text=True, timeout=scaled_timeout(300)).returncode == 0
    probe = "import ranklit.cli._config_files as c; print(c.__file__); print(c.config_dir())"
    where = _run([sys.executable, "-c", probe], empty, site)
    module_file, configs = where.stdout.split()
    assert module_file.startswith(str(site)) and configs == str(site / "ranklit" / "configs"), where.stderr
    cli = [sys.executable, "-m", "ranklit.cli"]
    printed = _run([*cli, "fit", "--config", "roadmap_inat.yaml", "--print_config"], empty, site)
    assert printed.returncode == 0, printed.stderr[-2000:]
    assert "class_path: ranklit.data.INaturalist2018" in printed.stdout
    listed = _run([*cli, "configs"], empty, site)
    assert "roadmap_inat.yaml" in listed.stdout and "folder.yaml" in listed.stdout
    step = [*cli, "fit", "--config", "quickstart.yaml", *TINY, *synthetic_args(), "--trainer.fast_dev_run=1"]
    trained = _run(step, empty, site)
    assert trained.returncode == 0, trained.stderr[-3000:]
    # `ranklit data prepare` from the installed wheel against a local server (issue 26)
    from tests.data.prepare.archives import MINIATURES
    from tests.data.prepare.helpers import source_args
    from tests.data.prepare.server import Served, serving

    files = MINIATURES["cub"](tmp_path / "cub_files")
    with serving(Served(files={f"/{name}": content for name, content in files.items()})) as served:
        prepared = _run([*cli, "data", "prepare", "cub", "--root", "CUB", *source_args(served, files)], empty, site)
    assert prepared.returncode == 0 and f"--data.root {empty / 'CUB'}" in prepared.stdout, prepared.stderr[-2000:]


def test_ci_tests_the_lower_bounds_of_pyproject() -> None:
    """`.ci/min-versions.txt` (the second CI environment) pins exactly the lower bound of each ranged dependency."""
    import tomllib

    pins = {}
    for line in (REPO / ".ci" / "min-versions.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.split("[")[0]] = version
    bounds = {}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"] + project["optional-dependencies"]["train"]:
        name, _, rest = requirement.partition(">=")
        if "<" in rest:  # a range: its lower bound must be tested
            bounds[name.split("[")[0]] = rest.split(",")[0]
    assert pins == bounds

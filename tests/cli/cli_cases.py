"""Run many ``ranklit`` command lines as separate processes for the price of one start-up.

``python -m tests.cli.cli_cases CASES.json`` imports the CLI once, then forks one child per case: the child runs
``ranklit.cli.main(args)`` with its stderr and stdout (file descriptors 2 and 1) sent to files, exactly as the
console script would, with an uncaught exception printed as Python prints it (``Traceback ...``) and exit code 1. It
prints a JSON list of ``{"args", "returncode", "stderr", "stdout"}``. A child starts from the state after importing
the command's modules (``ranklit.cli._app``; ``import ranklit.cli`` alone imports none of the training stack):
warnings shown at import time are the quick-start test's business (``tests/cli/test_cli.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import ranklit.cli._app  # noqa: F401  (imported once, before the children fork: see the docstring)
from ranklit.cli import main
from tests.ddp import scaled_timeout


def _child(args: list[str], stderr_path: str) -> None:
    descriptor = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(descriptor, 2)
    os.dup2(os.open(stderr_path[: -len(".err")] + ".out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
    code = 0
    try:
        main(args)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # printed as the interpreter would, then exit code 1
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_cases(cases: list[list[str]]) -> list[dict]:
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for number, args in enumerate(cases):
            path = os.path.join(folder, f"{number}.err")
            pid = os.fork()
            if pid == 0:
                _child(args, path)
            _, status = os.waitpid(pid, 0)
            with open(path) as handle, open(path[: -len(".err")] + ".out") as out:
                code = os.waitstatus_to_exitcode(status)
                results.append({"args": args, "returncode": code, "stderr": handle.read(), "stdout": out.read()})
    return results


def drive(cases: list[list[str]], cwd: Path, *, scratch: Path | None = None, **env: str) -> list[dict]:
    """Run ``cases`` through this module as a subprocess in ``cwd`` (``env`` added to the environment, the repository
    on ``PYTHONPATH``) and return its results; the driver itself must exit 0. The cases are written to
    ``scratch / "cases.json"`` (default: ``cwd``)."""
    cases_file = (scratch or cwd) / "cases.json"
    cases_file.write_text(json.dumps(cases))
    repository = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(filter(None, [repository, os.environ.get("PYTHONPATH")]))
    driver = subprocess.run([sys.executable, "-m", "tests.cli.cli_cases", str(cases_file)], cwd=cwd,
                            env={**os.environ, "PYTHONPATH": path, **env}, capture_output=True, text=True,
                            timeout=scaled_timeout(600))
    assert driver.returncode == 0, driver.stderr[-3000:]
    return json.loads(driver.stdout.splitlines()[-1])


if __name__ == "__main__":
    with open(sys.argv[1]) as cases_file:
        sys.stdout.write(json.dumps(run_cases(json.load(cases_file))) + "\n")

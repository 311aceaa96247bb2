"""Run many ``ranklit`` command lines as separate processes for the price of one start-up.

``python -m tests.cli.cli_cases CASES.json`` imports the CLI once, then forks one child per case: the child runs
``ranklit.cli.main(args)`` with its stderr and stdout (file descriptors 2 and 1) sent to files and its stdin from
``/dev/null``, exactly as the console script would, with an uncaught exception printed as Python prints it
(``Traceback ...``) and exit code 1. It prints a JSON list of ``{"args", "returncode", "stderr", "stdout"}``. A child
starts from the state after importing the command's modules (``ranklit.cli._app``; ``import ranklit.cli`` alone
imports none of the training stack): warnings shown at import time are the quick-start test's business
(``tests/cli/test_cli.py``).

:func:`drive` keeps one such driver per test process (``--serve``: it reads one request a line on stdin, answers one
line on stdout) and sends it every batch whose environment is the driver's own: the batches of a test session pay
one start-up, not one each. A batch with other variables (``drive(..., HF_HUB_OFFLINE="1")``: read when the modules
are imported) gets a driver of its own. A child runs in the batch's ``cwd``, with it first on ``sys.path`` as for
``python -m`` started there.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import select
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import ranklit.cli._app  # noqa: F401  (imported once, before the children fork: see the docstring)
from ranklit.cli import main
from tests.ddp import REPOSITORY, repository_first_on_path, scaled_timeout


def _child(args: list[str], stderr_path: str, cwd: str | None) -> None:
    if cwd is not None:
        os.chdir(cwd)
        sys.path[0] = os.getcwd()
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
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


def run_cases(cases: list[list[str]], cwd: str | None = None) -> list[dict]:
    """Fork one child per case (in ``cwd``, default: this process's) and collect what each printed."""
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for number, args in enumerate(cases):
            path = os.path.join(folder, f"{number}.err")
            pid = os.fork()
            if pid == 0:
                _child(args, path, cwd)
            _, status = os.waitpid(pid, 0)
            with open(path) as handle, open(path[: -len(".err")] + ".out") as out:
                code = os.waitstatus_to_exitcode(status)
                results.append({"args": args, "returncode": code, "stderr": handle.read(), "stdout": out.read()})
    return results


_WARM: dict[str, object] = {}  # the driver of this process: "process", "environment", "log"


def _warm(environment: dict[str, str]) -> subprocess.Popen | None:
    """This process's serving driver, started on first use; ``None`` when ``environment`` is not its own."""
    if not _WARM:
        with tempfile.NamedTemporaryFile(prefix="cli_cases-", suffix=".log", delete=False) as log:
            process = subprocess.Popen([sys.executable, "-m", "tests.cli.cli_cases", "--serve"], env=environment,
                                       cwd=REPOSITORY, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=log, text=True)
        _WARM.update(process=process, environment=environment, log=log.name)
        atexit.register(_stop_warm)
    if _WARM["environment"] != environment:
        return None
    return _WARM["process"]  # type: ignore[return-value]


def _stop_warm() -> None:
    process: subprocess.Popen = _WARM["process"]  # type: ignore[assignment]
    if process.stdin:
        process.stdin.close()
    process.wait(timeout=60)
    os.unlink(str(_WARM["log"]))


def drive(cases: list[list[str]], cwd: Path, *, scratch: Path | None = None, **env: str) -> list[dict]:
    """Run ``cases`` through this module's driver in ``cwd`` (``env`` added to the environment, the repository
    on ``PYTHONPATH``) and return its results; the driver itself must not fail. The cases are written to
    ``scratch / "cases.json"`` (default: ``cwd``)."""
    cases_file = (scratch or cwd) / "cases.json"
    cases_file.write_text(json.dumps(cases))
    environment = {**os.environ, "PYTHONPATH": repository_first_on_path(), **env}
    process = None if env else _warm(environment)
    if process is None:
        driver = subprocess.run([sys.executable, "-m", "tests.cli.cli_cases", str(cases_file)], cwd=cwd,
                                env=environment, capture_output=True, text=True, timeout=scaled_timeout(600))
        assert driver.returncode == 0, driver.stderr[-3000:]
        return json.loads(driver.stdout.splitlines()[-1])
    assert process.stdin and process.stdout
    process.stdin.write(json.dumps({"cases": cases, "cwd": str(cwd)}) + "\n")
    process.stdin.flush()
    ready, _, _ = select.select([process.stdout], [], [], scaled_timeout(600))
    answer = process.stdout.readline() if ready else ""
    assert answer, f"no answer (exit code {process.poll()}): {Path(str(_WARM['log'])).read_text()[-3000:]}"
    return json.loads(answer)


def _serve() -> None:
    for request in sys.stdin:
        batch = json.loads(request)
        sys.stdout.write(json.dumps(run_cases(batch["cases"], batch["cwd"])) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        _serve()
    else:
        with open(sys.argv[1]) as cases_file:
            sys.stdout.write(json.dumps(run_cases(json.load(cases_file))) + "\n")
    sys.stdout.flush()
    gc.freeze()  # the process ends: no finalising collections over the training stack (see ranklit.cli.main)

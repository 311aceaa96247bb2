"""Issue 41: ``ranklit index`` stopped by a signal says how to re-run ``index``; one ``ranklit index`` / ``ranklit
predict`` per output folder (a second is refused in one line naming the first, before it writes anything)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ranklit._locks import sibling_lock, start_time
from ranklit.cli import main
from ranklit.deploy import Retriever
from ranklit.training import stops
from tests.cli.test_cli import TINY
from tests.ddp import scaled_timeout
from tests.tiny import synthetic_args

from .conftest import Images, Run

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture
def live_lock_of(tmp_path: Path) -> Iterator[Callable[[Path], int]]:
    """Write the lock of a folder as a live process (a sleeping one) holds it; its PID."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    while start_time(sleeper.pid) is None:
        time.sleep(0.01)

    def write(folder: Path) -> int:
        holder = {"pid": sleeper.pid, "host": socket.gethostname(), "started": start_time(sleeper.pid), "since": "x"}
        sibling_lock(folder).write_text(json.dumps(holder))
        return sleeper.pid

    yield write
    sleeper.kill()
    sleeper.wait()


def _index_args(run: Run, images: Images, output: Path) -> list[str]:
    return ["index", "--config", str(run.config), "--ckpt_path", str(run.ckpt), "--images", str(images.gallery),
            "--output", str(output), "--batch_size", "8", "--block_rows", "10", "--no-progress"]


def test_index_stopped_by_sigterm_names_index_s_own_rerun(run: Run, images: Images, tmp_path: Path, capsys) -> None:
    """A ``SIGTERM`` during ``ranklit index`` (here: already requested when it starts) exits 143 with the message
    to run the same command again (``index`` has no ``--overwrite``); the same command then finishes the index."""
    output = tmp_path / "index"
    stops._request(signal.SIGTERM, None)
    try:
        with pytest.raises(SystemExit) as stopped:
            main(_index_args(run, images, output))
    finally:
        stops.mark_stopped(None)
    err = capsys.readouterr().err
    assert stopped.value.code == 143, err
    assert "run the same `ranklit index` command again" in err and "--overwrite" not in err
    main(_index_args(run, images, output))
    assert "indexed 24 images" in capsys.readouterr().out


def test_a_second_index_into_a_folder_being_written_is_refused(run, images, tmp_path, capsys, live_lock_of) -> None:
    output = tmp_path / "index"
    pid = live_lock_of(output)
    with pytest.raises(SystemExit) as refused:
        main(_index_args(run, images, output))
    err = capsys.readouterr().err
    assert refused.value.code == 2 and err.count("\n") == 1, err
    assert f"{output} is being written by process {pid} on {socket.gethostname()}" in err and "ranklit index" in err
    assert not output.exists()


def test_a_second_predict_into_a_folder_being_written_is_refused(tmp_path, capsys, monkeypatch, live_lock_of) -> None:
    monkeypatch.chdir(tmp_path)
    pid = live_lock_of(tmp_path / "out")
    with pytest.raises(SystemExit) as refused:
        main(["predict", "--config", "quickstart.yaml", *TINY, *synthetic_args(images_per_class=2),
              "--predictions_path=out"])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and err.strip().splitlines()[-1].startswith("error: out is being written by"), err
    assert f"process {pid}" in err and "`ranklit predict`" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.long  # two fresh processes embedding: the long suite
def test_two_indexes_launched_together_into_one_output(run: Run, images: Images, tmp_path: Path) -> None:
    """Two ``ranklit index`` into one folder started in the same instant: one builds it, the other is refused in one
    line naming it (or, if it came second, finds the index complete); the index is the one a single build gives."""
    output = tmp_path / "index"
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    command = [sys.executable, "-m", "ranklit.cli", *_index_args(run, images, output)]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: subprocess.run(command, capture_output=True, text=True, env=env,
                                                         timeout=scaled_timeout(600)), range(2)))
    codes = sorted(r.returncode for r in results)
    assert codes in ([0, 0], [0, 2]), [r.stderr[-2000:] for r in results]
    for refused in (r for r in results if r.returncode == 2):
        assert "is being written by process" in refused.stderr and "Traceback" not in refused.stderr
    assert json.loads((output / "index.json").read_text())["index"]["complete"] is True
    assert not sibling_lock(output).exists()
    found = Retriever.from_index(output).search([images.queries / n for n in sorted(images.originals)], k=1)
    assert [hits[0].path for hits in found] == [str(images.originals[n]) for n in sorted(images.originals)]

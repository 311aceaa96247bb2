"""Issue 41: a decompression bomb is refused by its declared and running unpacked size whatever the free disk, and
two ``ranklit data prepare`` of one root never run at once (the second is refused in one line naming the first)."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ranklit._locks import start_time
from ranklit.data.prepare import _unpacked_size as unpacked_size
from ranklit.errors import UserError
from tests.data.prepare.archives import tar
from tests.data.prepare.helpers import outside, prepare, sha256, source_args
from tests.ddp import scaled_timeout

REPOSITORY = Path(__file__).resolve().parents[3]
ZEROS = b"\0" * (2 * 1024**2)  # 2 MiB that compress to a few KiB


def _deflated_zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for name, content in files.items():
            bundle.writestr(name, content)
    return buffer.getvalue()


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_a_bomb_is_refused_by_its_declared_size_before_it_fills_the_disk(tmp_path, capsys, monkeypatch, kind) -> None:
    """A 2-MiB-of-zeros archive of a few KiB, with the bound lowered to 1 MiB (the free disk is far larger): refused
    in one line before the big entry is written (a zip by its central directory, a tar by the entry's header), and
    nothing of it is kept."""
    monkeypatch.setattr(unpacked_size, "FLOOR_BYTES", 1024**2)
    members = {"CUB_200_2011/small.txt": b"ok", "CUB_200_2011/zeros.bin": ZEROS}
    content = _deflated_zip(members) if kind == "zip" else tar(members)
    assert len(content) < 20_000 and os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize > 100 * len(ZEROS)
    name = "CUB_200_2011.zip" if kind == "zip" else "CUB_200_2011.tgz"
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / name).write_bytes(content)
    root = tmp_path / "data" / "cub"
    code, _, err = prepare(capsys, "cub", "--root", str(root), "--source", str(tmp_path / "downloads" / name),
                           "--sha256", sha256(content))
    assert code == 2 and err.count("\n") == 1, err
    assert "declares 2.0 MiB of unpacked files, more than 1.0 MiB" in err and "decompression bomb" in err
    assert not root.exists() and outside(tmp_path / "data", root) == []


def test_the_running_size_is_held_to_the_bound_too(tmp_path: Path, monkeypatch) -> None:
    """The bytes written so far count whatever the headers declared."""
    monkeypatch.setattr(unpacked_size, "FLOOR_BYTES", 1024**2)
    archive = tmp_path / "a.tgz"
    archive.write_bytes(b"x" * 100)
    written = tmp_path / "big.bin"
    written.write_bytes(ZEROS)
    bound = unpacked_size.UnpackedSize(archive)
    bound.declare(10)
    with pytest.raises(UserError, match=r"has written 2\.0 MiB of unpacked files, more than 1\.0 MiB"):
        bound.wrote(written)


def test_a_second_prepare_of_a_root_being_prepared_is_refused_naming_the_first(tmp_path, capsys, cub_served) -> None:
    """A live process holds ``.cub.lock`` beside the root: the prepare is refused in one line naming it, downloads
    nothing and leaves the lock as it was; once that process is gone, the prepare takes the stale lock over."""
    served, files = cub_served
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        while start_time(holder.pid) is None:
            time.sleep(0.01)
        lock = tmp_path / ".cub.lock"
        lock.write_text(json.dumps({"pid": holder.pid, "host": socket.gethostname(),
                                    "started": start_time(holder.pid), "since": "x"}))
        before = lock.read_bytes(), lock.stat().st_mtime_ns
        code, _, err = prepare(capsys, "cub", "--root", str(tmp_path / "cub"), *source_args(served, files))
        assert code == 2 and err.count("\n") == 1, err
        assert f"{tmp_path / 'cub'} is being prepared by process {holder.pid} on {socket.gethostname()}" in err
        assert served.ranges == [] and (lock.read_bytes(), lock.stat().st_mtime_ns) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == [".cub.lock", "build"]
    finally:
        holder.kill()
        holder.wait()
    code, out, err = prepare(capsys, "cub", "--root", str(tmp_path / "cub"), *source_args(served, files))
    assert code == 0 and "Taking over" in err and "cub prepared in" in out, err
    assert not lock.exists()


@pytest.mark.long  # 35 s (two fresh processes on a throttled link): the long suite
def test_two_prepares_launched_together_prepare_once(tmp_path: Path, cub_served) -> None:
    """Two ``ranklit data prepare`` of one root started in the same instant (a slow link: the first is still
    downloading when the second starts): one prepares it, the other is refused naming it (or, if it came second,
    finds it prepared); never an error blaming the download or the archive."""
    served, files = cub_served
    served.throttle = 0.05
    command = [sys.executable, "-m", "ranklit.cli", "data", "prepare", "cub", "--root", str(tmp_path / "cub"),
               "--no-progress", *source_args(served, files)]
    env = os.environ | {"PYTHONPATH": str(REPOSITORY)}
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: subprocess.run(command, capture_output=True, text=True, env=env,
                                                         timeout=scaled_timeout(300)), range(2)))
    codes = sorted(r.returncode for r in results)
    assert codes in ([0, 0], [0, 2]), [r.stderr for r in results]
    for refused in (r for r in results if r.returncode == 2):
        assert "is being prepared by process" in refused.stderr and refused.stderr.count("\n") == 1
    assert (tmp_path / "cub" / "ranklit-prepared.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build", "cub"]

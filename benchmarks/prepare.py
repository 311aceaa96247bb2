"""What ``ranklit data prepare`` costs beyond the bytes: download over HTTP, a drop resumed, digests, safe unpacking.

A synthetic ``.tar.gz`` of ``--size`` MiB (``--files`` incompressible files, like JPEGs) is served from 127.0.0.1 by
the test suite's Range server (``tests/data/prepare/server.py``). Measured, each the best of ``--repeat`` runs:

- ``download``: :func:`ranklit.data.prepare._download.download` of the whole file, and the same with the connection
  dropped halfway (resumed with HTTP Range: bytes served / archive size);
- ``digests``: :func:`~ranklit.data.prepare._download.digests` (MD5 and SHA-256 in one read) against ``sha256sum``
  and ``md5sum`` one after the other;
- ``unpack``: :func:`ranklit.data.prepare._extraction.unpack` (every entry checked, ``data`` filter) against
  ``tarfile.extractall`` without checks and GNU ``tar -xzf``.

Run from the repository root (about a minute at the default size)::

    python benchmarks/prepare.py --size 256 --files 512

It prints the machine, the load average and the Markdown table of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ranklit.data.prepare._download import digests, download
from ranklit.data.prepare._extraction import unpack
from tests.data.prepare.server import Served, serving

_MIB = 1 << 20


def _archive(size_mib: int, files: int) -> bytes:
    buffer, each = io.BytesIO(), size_mib * _MIB // files
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as bundle:
        for i in range(files):
            info = tarfile.TarInfo(f"dataset/images/{i % 100:03d}/{i:06d}.jpg")
            info.size = each
            bundle.addfile(info, io.BytesIO(os.urandom(each)))
    return buffer.getvalue()


def _best(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256, help="archive size in MiB")
    parser.add_argument("--files", type=int, default=512, help="files in the archive")
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    data = _archive(options.size, options.files)
    mib = len(data) / _MIB
    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        archive = work / "a.tar.gz"
        archive.write_bytes(data)

        def fetch(drop: bool) -> Served:
            target = work / "download.tar.gz"
            target.unlink(missing_ok=True)
            served = Served(files={"/a.tar.gz": data}, drops={"/a.tar.gz": [len(data) // 2]} if drop else {})
            with serving(served):
                download(f"{served.url}/a.tar.gz", target, progress=False, room=lambda total, held: None)
            return served

        for drop in (False, True):
            runs: list[Served] = []
            seconds = _best(options.repeat, lambda drop=drop, runs=runs: runs.append(fetch(drop)))
            note = f"bytes served / archive {runs[-1].body_bytes / len(data):.2f}"
            note += "; includes the 1 s wait before the retry" if drop else ""
            rows.append((f"download{', dropped halfway' if drop else ''}", seconds, note))
        rows.append(("digests (md5 + sha256, one read)", _best(options.repeat, lambda: digests(archive)), ""))
        if shutil.which("sha256sum") and shutil.which("md5sum"):
            both = lambda: [subprocess.run([tool, str(archive)], capture_output=True, check=True)  # noqa: E731
                            for tool in ("sha256sum", "md5sum")]
            rows.append(("sha256sum + md5sum", _best(options.repeat, both), "baseline"))

        def extract(how: str) -> None:
            into = work / "out"
            shutil.rmtree(into, ignore_errors=True)
            into.mkdir()
            if how == "ranklit":
                unpack(archive, "tar", into, archive.name)
            elif how == "tarfile":
                with tarfile.open(archive) as bundle:
                    bundle.extractall(into)  # the unchecked baseline
            else:
                subprocess.run(["tar", "-xzf", str(archive), "-C", str(into)], check=True)

        for how, label in (("ranklit", "unpack (every entry checked)"), ("tarfile", "tarfile.extractall, unchecked"),
                           ("tar", "GNU tar -xzf")):
            if how != "tar" or shutil.which("tar"):
                seconds = _best(options.repeat, lambda how=how: extract(how))
                rows.append((label, seconds, "" if how == "ranklit" else "baseline"))
    machine = f"{platform.machine()}, {os.cpu_count()} cores visible, load average {os.getloadavg()[0]:.1f}"
    print(f"machine: {machine}, Python {platform.python_version()}; archive {mib:.0f} MiB, {options.files} files; "
          f"best of {options.repeat}")
    print("\n| step | seconds | MiB / s | note |\n|---|---:|---:|---|")
    for label, seconds, note in rows:
        print(f"| {label} | {seconds:.2f} | {mib / seconds:.0f} | {note} |")


if __name__ == "__main__":
    main()

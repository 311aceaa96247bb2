"""Issue 47: zip bombs given to ``prepare_dataset`` are refused by their size before anything is unpacked, as the
tar.gz one is: the kinds a zip bomb takes besides one big deflated entry (entries overlapping one compressed stream,
David Fifield's construction; a zip written to a pipe, whose sizes follow each entry in a data descriptor)."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

import pytest

from ranklit.data import prepare_dataset
from ranklit.data.prepare import _unpacked_size as unpacked_size
from ranklit.errors import UserError
from tests.data.prepare.helpers import outside, sha256

ZEROS = b"\0" * (2 * 1024**2)  # 2 MiB that deflate to a few KiB; the bound is lowered to 1 MiB below


def _overlapping(entries: int) -> bytes:
    """``entries`` central-directory records that all point to one local file of 2 MiB of zeros."""
    compressed = zlib.compress(ZEROS, 9)[2:-4]  # raw deflate
    crc, name = zlib.crc32(ZEROS), b"CUB_200_2011/zeros.bin"
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(compressed), len(ZEROS), len(name), 0)
    local += name + compressed
    directory = b""
    for i in range(entries):
        entry = b"CUB_200_2011/%03d.bin" % i
        directory += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(compressed),
                                 len(ZEROS), len(entry), 0, 0, 0, 0, 0, 0) + entry
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, entries, entries, len(directory), len(local), 0)
    return local + directory + end


class _Pipe(io.RawIOBase):
    """A write-only stream that cannot seek: zipfile then writes each entry's sizes after its data."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.buffer += data
        return len(data)


def _streamed() -> bytes:
    pipe = _Pipe()
    with zipfile.ZipFile(pipe, "w", compression=zipfile.ZIP_DEFLATED) as bundle:  # type: ignore[arg-type]
        with bundle.open("CUB_200_2011/zeros.bin", "w") as entry:
            entry.write(ZEROS)
    return bytes(pipe.buffer)


@pytest.mark.parametrize("kind", ["overlapping entries", "written to a pipe"])
def test_a_zip_bomb_is_refused_by_its_size_before_it_is_unpacked(tmp_path: Path, monkeypatch, kind: str) -> None:
    monkeypatch.setattr(unpacked_size, "FLOOR_BYTES", 1024**2)
    content = _overlapping(3) if kind == "overlapping entries" else _streamed()
    assert len(content) < 20_000
    bomb = tmp_path / "downloads" / "CUB_200_2011.zip"
    bomb.parent.mkdir()
    bomb.write_bytes(content)
    root = tmp_path / "data" / "cub"
    with pytest.raises(UserError, match=r"declares \d+\.\d MiB of unpacked files, more than 1\.0 MiB .*decompression"):
        prepare_dataset("cub", root, source=[bomb], sha256=[sha256(content)], progress=False)
    assert not root.exists() and outside(tmp_path / "data", root) == []  # nothing unpacked, nothing kept

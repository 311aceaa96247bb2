"""What ``ranklit data prepare`` refuses, in one line and exit code 2, leaving nothing behind: a wrong digest, a
hostile archive, bad input; an interrupted unpacking leaves no half-prepared root; a re-run checks the record."""

from __future__ import annotations

import errno
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from ranklit.data.prepare import _preparation as command
from tests.data.prepare.archives import MINIATURES, tar, zip_
from tests.data.prepare.helpers import outside, prepare, sha256, source_args


def _file(folder: Path, name: str, content: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(content)
    return folder / name


def test_a_wrong_digest_names_both_and_unpacks_nothing(tmp_path, capsys, cub_served) -> None:
    served, files = cub_served
    code, _, err = prepare(capsys, "cub", "--root", str(tmp_path / "cub"),
                           "--source", f"{served.url}/CUB_200_2011.tgz", "--sha256", "ab" * 32)
    assert code == 2 and err.count("\n") == 1
    assert f"expected sha256 {'ab' * 32} (given with --sha256), got sha256 {sha256(files['CUB_200_2011.tgz'])}" in err
    assert not (tmp_path / "cub").exists() and not (tmp_path / ".cub.prepare-tmp").exists()
    assert [p.name for p in (tmp_path / ".cub.downloads").iterdir()] == ["CUB_200_2011.tgz.rejected"]


def test_the_published_digest_is_checked_and_named_with_where_it_was_read(tmp_path, capsys, cub_served) -> None:
    served, _ = cub_served  # the miniature is not the official archive: its md5 differs from the published one
    code, _, err = prepare(capsys, "cub", "--root", str(tmp_path / "cub"), "--source", f"{served.url}/CUB_200_2011.tgz")
    assert code == 2 and "expected md5 97eceeb196236b17998738112f37df78 (TDeVries/cub2011_dataset cub2011.py" in err


def _hostile_tars(escape: Path) -> dict[str, bytes]:
    link = tarfile.TarInfo("CUB_200_2011/link")
    link.type, link.linkname = tarfile.SYMTYPE, "../../.."
    via_link = tarfile.TarInfo("CUB_200_2011/link/evil.txt")
    via_link.size = 4
    hard = tarfile.TarInfo("CUB_200_2011/hard")
    hard.type, hard.linkname = tarfile.LNKTYPE, "../outside.txt"
    archives = {
        "dotdot": tar({"CUB_200_2011/images/a.txt": b"ok", "CUB_200_2011/../../evil.txt": b"evil"}),
        "absolute": tar({"CUB_200_2011/a.txt": b"ok", str(escape / "abs_evil.txt"): b"evil"}),
    }
    for name, members in (("symlink", [link, via_link]), ("hardlink", [hard])):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as bundle:
            for member in members:
                bundle.addfile(member, io.BytesIO(b"evil") if member.isfile() else None)
        archives[name] = buffer.getvalue()
    return archives


def _hostile_zips(escape: Path) -> dict[str, bytes]:
    link = zipfile.ZipInfo("CUB_200_2011/link")
    link.external_attr = 0o120777 << 16
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        bundle.writestr(link, "../../../outside")
    return {
        "zip-dotdot": zip_({"CUB_200_2011/a.txt": b"ok", "../evil.txt": b"evil"}),
        "zip-absolute": zip_({str(escape / "abs_evil.txt"): b"evil"}),
        "zip-symlink": buffer.getvalue(),
    }


@pytest.mark.parametrize(
    "kind", ["dotdot", "absolute", "symlink", "hardlink", "zip-dotdot", "zip-absolute", "zip-symlink"]
)
def test_a_hostile_archive_is_refused_and_writes_nothing_outside_the_root(tmp_path, capsys, kind) -> None:
    sandbox = tmp_path / "sandbox"
    archives = {**_hostile_tars(sandbox), **_hostile_zips(sandbox)}
    name = "CUB_200_2011.zip" if kind.startswith("zip") else "CUB_200_2011.tgz"
    archive = _file(tmp_path / "downloads", name, archives[kind])
    root = sandbox / "data" / "cub"
    root.parent.mkdir(parents=True)
    before = outside(tmp_path, root)
    code, _, err = prepare(capsys, "cub", "--root", str(root), "--source", str(archive),
                           "--sha256", sha256(archives[kind]))
    assert code == 2 and err.count("\n") == 1 and "it would be written outside" in err, err
    assert outside(tmp_path, root) == before
    assert not root.exists()


def test_an_interrupted_unpacking_leaves_no_half_prepared_root_and_a_rerun_completes(
    tmp_path, capsys, monkeypatch
) -> None:
    files = MINIATURES["rparis6k"](tmp_path / "build")
    for name, content in files.items():
        _file(tmp_path / "downloaded", name, content)
    unpacked = []

    def interrupted(*args: object) -> int:
        if len(unpacked) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the third file is unpacked
        unpacked.append(args)
        return real(*args)  # type: ignore[arg-type]

    real = command.unpack
    monkeypatch.setattr(command, "unpack", interrupted)
    root = tmp_path / "revisited"
    code, _, err = prepare(capsys, "rparis6k", "--root", str(root), "--source", str(tmp_path / "downloaded"))
    assert code == 130 and err.startswith("interrupted: nothing was moved into --root") and err.count("\n") == 1
    assert not (root / "rparis6k").exists() and not (root / ".rparis6k.prepare-tmp").exists()
    monkeypatch.setattr(command, "unpack", real)
    code, out, err = prepare(capsys, "rparis6k", "--root", str(root), "--source", str(tmp_path / "downloaded"))
    assert code == 0, err
    assert "rparis6k prepared in" in out and (root / "rparis6k" / "gnd_rparis6k.pkl").is_file()


def test_a_disk_that_fills_up_while_unpacking_is_one_line_and_leaves_nothing(
    tmp_path, capsys, monkeypatch, cub_served
) -> None:
    served, files = cub_served

    def full(*args: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(command, "unpack", full)
    code, _, err = prepare(capsys, "cub", "--root", str(tmp_path / "cub"), *source_args(served, files))
    assert code == 2 and err.count("\n") == 1 and "filled up while unpacking cub" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [".cub.downloads", "build"]  # the archive is kept


def test_a_rerun_verifies_the_record_and_downloads_nothing(tmp_path, capsys, cub_served) -> None:
    served, files = cub_served
    args = ["cub", "--root", str(tmp_path / "cub"), *source_args(served, files)]
    assert prepare(capsys, *args)[0] == 0
    requests = len(served.ranges)
    code, out, _ = prepare(capsys, *args)
    assert code == 0 and "already prepared (its record verified; nothing downloaded)" in out
    assert len(served.ranges) == requests
    held = [p for p in (tmp_path / "cub").rglob("*") if p.is_file() and p.name != "ranklit-prepared.json"]
    next((tmp_path / "cub" / "images").rglob("*.jpg")).unlink()  # a file lost since
    code, _, err = prepare(capsys, *args)
    assert code == 2 and f"it now holds {len(held) - 1} files" in err and "remove it to prepare it again" in err
    assert len(served.ranges) == requests


def test_a_rerun_with_another_digest_names_it_and_one_made_from_a_mirror_keeps_its_own(
    tmp_path, capsys, cub_served
) -> None:
    served, files = cub_served
    args = ["cub", "--root", str(tmp_path / "cub"), "--source", f"{served.url}/CUB_200_2011.tgz"]
    assert prepare(capsys, *args, "--sha256", sha256(files["CUB_200_2011.tgz"]))[0] == 0
    assert prepare(capsys, *args)[0] == 0  # made from a mirror: the published md5 does not apply
    code, _, err = prepare(capsys, *args, "--sha256", "0" * 64)
    assert code == 2 and f"CUB_200_2011.tgz had sha256 {sha256(files['CUB_200_2011.tgz'])}, expected {'0' * 64}" in err


def test_a_folder_with_other_files_is_not_overwritten(tmp_path, capsys, cub_served) -> None:
    served, files = cub_served
    _file(tmp_path / "cub", "mine.txt", b"keep")
    code, _, err = prepare(capsys, "cub", "--root", str(tmp_path / "cub"), *source_args(served, files))
    assert code == 2 and "already holds files but no ranklit-prepared.json" in err
    assert [p.name for p in (tmp_path / "cub").iterdir()] == ["mine.txt"] and served.ranges == []


def test_a_root_that_is_a_file_and_an_unwritable_root_are_one_line(tmp_path, capsys, cub_served) -> None:
    served, files = cub_served
    _file(tmp_path, "afile", b"")
    for root, expected in ((tmp_path / "afile", "is a file"), (Path("/proc/ranklit-test/cub"), "cannot write in")):
        code, _, err = prepare(capsys, "cub", "--root", str(root), *source_args(served, files))
        assert code == 2 and err.count("\n") == 1 and expected in err, err
    assert served.ranges == []


def test_a_dataset_behind_a_form_says_what_to_download_from_where(tmp_path, capsys) -> None:
    code, _, err = prepare(capsys, "vehicleid", "--root", str(tmp_path / "v"))
    assert code == 2 and err.count("\n") == 1
    assert "https://www.pkuml.org/resources/pku-vehicleid.html" in err and "--source PATH/VehicleID_V1.0.zip" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--source", "/nonexistent/file.tgz"], "--source /nonexistent/file.tgz: no such file"),
        (["--source", "a.tgz", "--source", "b.tgz"],
         "cub is made of 1 file(s) (CUB_200_2011.tgz); 2 source(s) given (--source"),
        (["--sha256", "xyz"], "--sha256 'xyz' (Python: `sha256=`): a SHA-256 digest is 64 hexadecimal digits"),
        (["--sha256", "a" * 64, "--sha256", "b" * 64],
         "2 digest(s) given (--sha256; Python: `sha256=`) for the 1 file(s) of cub"),
    ],
)
def test_bad_sources_and_digests_are_one_line(tmp_path, capsys, extra, message) -> None:
    code, _, err = prepare(capsys, "cub", "--root", str(tmp_path / "cub"), *extra)
    assert code == 2 and err.count("\n") == 1 and message in err, err

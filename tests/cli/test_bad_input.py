"""Bad data and bad files, met as a user meets them: each is one ``error:`` line (or a ``data check`` PROBLEM line)
and exit code 2, never a traceback, whether the file is read by ``data check``, the main process or a loader worker.

The command lines run as separate processes for one start-up per test (``tests/cli/cli_cases.py``).
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from tests.cli.cli_cases import drive
from tests.data.layouts import bomb, revisited
from tests.ddp import default_signals, scaled_timeout

SMALL = ["--model.net.init_args.backbone=test_resnet", "--model.net.init_args.pretrained=false",
         "--data.image_size=16", "--data.resize_size=16", "--data.crop_size=16", "--trainer.accelerator=cpu",
         "--trainer.max_epochs=1", "--trainer.enable_progress_bar=false", "--baseline_validation=false",
         "--data.batch_sampler.init_args.p=2", "--data.batch_sampler.init_args.k=2"]


def _folders(root: Path) -> None:
    """images/ (6 classes of 6 JPEGs) and CSVs over it; bad/: the same plus a truncated JPEG, a bomb, a dangling and
    a looping symbolic link; p2k2.yaml: a second config that changes the batch sampler."""
    rng = np.random.default_rng(0)
    for c in range(6):
        (root / "images" / f"c{c}").mkdir(parents=True)
        for i in range(6):
            pixels = rng.integers(0, 255, (24, 24, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / "images" / f"c{c}" / f"{i}.jpg")
    rows = [f"c{c}/{i}.jpg,c{c},{'train' if c < 3 else 'test'}" for c in range(6) for i in range(6)]
    text = "path,label,split\n" + "\n".join(rows) + "\n"
    (root / "images" / "excel.csv").write_text(text, encoding="utf-8-sig")  # Excel's "CSV UTF-8": a BOM first
    (root / "images" / "latin.csv").write_bytes((text + "c0/0.jpg,caf\xe9,train\n").encode("latin-1"))
    (root / "images" / "escape.csv").write_text(text + "../bad/c0/0.jpg,c0,train\n")
    shutil.copytree(root / "images", root / "bad")
    (root / "bad" / "c0" / "cut.jpg").write_bytes((root / "bad" / "c0" / "0.jpg").read_bytes()[:100])
    bomb(root / "bad" / "c1" / "bomb.png")
    os.symlink("/nonexistent/x.jpg", root / "bad" / "c2" / "dangling.jpg")
    os.symlink("loop.jpg", root / "bad" / "c2" / "loop.jpg")
    (root / "p2k2.yaml").write_text("data:\n  batch_sampler:\n    class_path: ranklit.data.PKSampler\n"
                                    "    init_args: {p: 2, k: 2}\n")
    (root / "afile").write_text("not a folder")


def _revisited(root: Path) -> None:
    """Revisited Oxford trees: a truncated gallery image; an image name with ``../``; an index past imlist; a query box
    outside its 16 x 12 image."""
    revisited(root / "truncated" / "roxford5k")
    cut = root / "truncated" / "roxford5k" / "jpg" / "roxford5k_img_5.jpg"
    cut.write_bytes(cut.read_bytes()[:80])
    for name, change in (("escape", ("imlist", 3, "../../secret")), ("index", ("easy", 0, 6)),
                         ("box", ("bbx", 1, [0.0, 0.0, 40.0, 5.0]))):
        data = revisited(root / name / "roxford5k")
        key, position, value = change
        if key == "imlist":
            data["imlist"][position] = value
        else:
            data["gnd"][position][key] = [*data["gnd"][position][key], value] if key == "easy" else value
        with (root / name / "roxford5k" / "gnd_roxford5k.pkl").open("wb") as handle:
            pickle.dump(data, handle)


class _Evil:
    def __reduce__(self) -> tuple:
        return (os.system, ("echo pwned > pwned.txt",))


def _run(cases: list[list[str]], cwd: Path, **env: str) -> list[dict]:
    return drive(cases, cwd, **env)


def _one_error_line(result: dict) -> str:
    """The ``error:`` message of a case that exited with 2, with no traceback (a dataset's list of problems: the
    ``error:`` line and its ``  - `` lines)."""
    assert result["returncode"] == 2, result
    assert "Traceback" not in result["stderr"], result["stderr"][-3000:]
    errors = [line for line in result["stderr"].splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result["stderr"][-3000:]
    return result["stderr"][result["stderr"].index("error: ") :]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bad_input")
    _folders(root)
    _revisited(root / "revisited")
    torch.save({"state_dict": {}, "evil": _Evil()}, root / "evil.ckpt")
    return root


def test_data_check_reads_every_split_of_every_config_and_names_every_bad_file(data: Path) -> None:
    roxford = "--data.test_dataset.init_args.names=[roxford5k]"
    check = ["data", "check", "--no-progress"]
    csv = [*check, "--config", "csv.yaml", f"--data.root={data / 'images'}"]
    results = _run([
        [*check, "--config", "folder.yaml", "--config", str(data / "p2k2.yaml"), f"--data.root={data / 'bad'}"],
        [*check, "--config", "revisited_eval.yaml", f"--data.root={data / 'revisited' / 'truncated'}", roxford],
        [*check, "--config", "revisited_eval.yaml", f"--data.root={data / 'revisited' / 'box'}", roxford],
        [*check, "--config", "revisited_eval.yaml", f"--data.root={data / 'revisited' / 'escape'}", roxford],
        [*check, "--config", "revisited_eval.yaml", f"--data.root={data / 'revisited' / 'index'}", roxford],
        [*csv, *(f"--data.{s}_dataset.init_args.csv_file=excel.csv" for s in ("train", "val"))],
        [*csv, *(f"--data.{s}_dataset.init_args.csv_file=latin.csv" for s in ("train", "val"))],
        [*csv, *(f"--data.{s}_dataset.init_args.csv_file=escape.csv" for s in ("train", "val"))],
        [*check, "--config", "folder.yaml", f"--data.root={data / 'afile'}"],
        [*check, f"--data.root={data / 'images'}"],
    ], data)
    folder, truncated, box, escape, index, excel, latin, outside, afile, no_config = results

    out = folder["stdout"]  # both configs merged: the second one's sampler; every bad file named and counted
    assert folder["returncode"] == 2 and "Traceback" not in folder["stderr"], folder
    assert "batch plan: PKSampler, P x K = 2 x 2 = 4 images per batch" in out, out
    assert "PROBLEM: 2 unreadable files: " in out and "c0/cut.jpg (Truncated File Read" in out, out
    assert "c1/bomb.png (900000000 pixels, more than the 178956970 Pillow decodes (a possible decompression" in out
    assert "PROBLEM: ClassFolderDataset: skipped 2 symbolic link(s)" in out and "c2/dangling.jpg, c2/loop.jpg" in out
    assert "note: ClassFolderDataset: skipped 3 file(s)" in out and "excel.csv" in out  # not images: a note only

    assert truncated["returncode"] == 2, truncated  # the Revisited test set: queries (cropped) and gallery decoded
    assert "test roxford5k query: 2 images" in truncated["stdout"], truncated
    assert "test roxford5k gallery: 6 images" in truncated["stdout"]
    assert "PROBLEM: 1 unreadable files: " in truncated["stdout"] and "roxford5k_img_5.jpg (" in truncated["stdout"]
    assert box["returncode"] == 2 and "the box `bbx` [0.0, 0.0, 40.0, 5.0] of query 1" in box["stdout"], box
    assert "lies outside its image of 16 x 12 pixels" in box["stdout"]
    assert "1 image names that lead outside" in _one_error_line(escape) and ": ../../secret." in escape["stderr"]
    assert "1 indices outside imlist (0..5): query 0 easy 6" in _one_error_line(index)

    assert excel["returncode"] == 0 and "train: 18 images, 3 classes" in excel["stdout"], excel  # the BOM is read
    assert "latin.csv, line 38: byte 0xe9 is not UTF-8; save the file as UTF-8" in _one_error_line(latin)
    assert "1 rows whose path leads outside root" in _one_error_line(outside) and "line 38 (../bad/c0/0.jpg)" in (
        outside["stderr"])
    assert f"`root` {data / 'afile'} is a file, not the dataset folder" in _one_error_line(afile)
    assert "`ranklit data check` needs a config" in _one_error_line(no_config)


@pytest.mark.slow
def test_bad_files_met_by_the_run_commands_are_one_line(data: Path) -> None:
    """A truncated image met in a loader worker during ``fit`` and ``test`` (a Revisited gallery), a hostile
    checkpoint, an abstract loss, and ``pretrained: true`` without a network: one line each, exit 2 (the last within
    seconds, not a minute)."""
    (data / "hf").mkdir()
    started = time.monotonic()
    worker, gallery, evil, abstract, pretrained = _run([
        ["fit", "--config", "folder.yaml", f"--data.root={data / 'bad'}", *SMALL, "--data.num_workers=1"],
        ["test", "--config", "revisited_eval.yaml", f"--data.root={data / 'revisited' / 'truncated'}",
         "--data.test_dataset.init_args.names=[roxford5k]", "--model.landmarks.init_args.postprocess=[]",
         "--model.net.init_args.backbone=test_resnet", "--trainer.accelerator=cpu", "--data.num_workers=1"],
        ["test", "--config", "quickstart.yaml", "--ckpt_path", str(data / "evil.ckpt"), "--trainer.accelerator=cpu"],
        ["fit", "--config", "quickstart.yaml", "--model.loss=ranklit.losses.base.RetrievalLoss"],
        ["fit", "--config", "folder.yaml", f"--data.root={data / 'images'}", "--trainer.accelerator=cpu",
         "--model.net.init_args.backbone=resnet10t"],
    ], data, HF_HUB_OFFLINE="1", HF_HOME=str(data / "hf"))
    assert time.monotonic() - started < 120
    assert "error: Could not decode image " in _one_error_line(worker) and "Re-extract or remove" in worker["stderr"]
    assert "DataLoader worker" not in worker["stderr"]
    assert "error: Could not decode image " in _one_error_line(gallery) and "roxford5k_img_5.jpg" in gallery["stderr"]
    assert "refused to load a checkpoint that names code to run" in _one_error_line(evil)
    assert "posix.system" in evil["stderr"] and not (data / "pwned.txt").exists()
    assert "RetrievalLoss does not implement `retrieval_loss`: it is a base class" in _one_error_line(abstract)
    line = _one_error_line(pretrained)
    assert "backbone 'resnet10t': pretrained weights could not be downloaded: set model.net.init_args.pretrained " \
           "false or pre-download to the cache" in line and "HF_HUB_OFFLINE is set" in line
    assert "Retrying" not in pretrained["stderr"]


def test_ctrl_c_at_start_up_is_one_line_and_exit_130(tmp_path: Path) -> None:
    process = subprocess.Popen([sys.executable, "-m", "ranklit.cli", "data", "check", "--config", "folder.yaml"],
                               cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(Path.cwd())},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    time.sleep(1.5)  # importing the training stack takes several seconds
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=scaled_timeout(60))
    # 130, or death by SIGINT (-2), which a shell also reports as 130: seen once in 2 CI runs, the one line printed and
    # SystemExit(130) raised; most likely CPython's unhandled-interrupt flag, left set when the Ctrl-C fell inside code
    # it ran through PyRun_* during an import, makes it end itself with SIGINT
    assert process.returncode in (130, -signal.SIGINT), err[-3000:]
    assert err.strip() == "interrupted (Ctrl-C)", err[-3000:]

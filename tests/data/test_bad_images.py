"""Unreadable images: the cause named with its fix (truncated, permission denied, decompression bomb), and
``on_bad_image: skip`` skipping each kind, the oversized one included."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from ranklit.data import ClassFolderDataset
from ranklit.data.images.decoding import load_image
from ranklit.errors import UserError
from tests.data.layouts import bomb


def _classes(root: Path) -> Path:
    for c in range(2):
        for i in range(3):
            (root / f"c{c}").mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (8, 8), (40 * c, 30 * i, 0)).save(root / f"c{c}" / f"{i}.png")
    return root


def test_a_decompression_bomb_is_a_user_error_naming_the_file_and_its_pixels(tmp_path: Path) -> None:
    bomb(tmp_path / "big.png")
    with pytest.raises(UserError, match=r"big\.png: 900000000 pixels, more than the \d+ Pillow decodes \(a possible "
                                        r"decompression bomb\); downscale the file, or, in a training set, set "
                                        r"`data.on_bad_image: skip`"):
        load_image(tmp_path / "big.png")


def test_permission_denied_says_so_not_re_extract(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(The tests may run as root, who reads any file: the refusal is Pillow's open raising it.)"""
    Image.new("RGB", (4, 4)).save(tmp_path / "locked.jpg")

    def refuse(path: object, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(Image, "open", refuse)
    with pytest.raises(UserError, match=r"locked\.jpg: permission denied; make it readable \(chmod a\+r\)") as caught:
        load_image(tmp_path / "locked.jpg")
    assert "Re-extract" not in str(caught.value)


def test_on_bad_image_skip_also_skips_the_oversized_image(tmp_path: Path) -> None:
    root = _classes(tmp_path)
    bomb(root / "c0" / "0.png")  # replaces the first image of class c0
    strict = ClassFolderDataset(root)
    with pytest.raises(UserError, match="decompression bomb"):
        strict[0]
    lenient = ClassFolderDataset(root)
    lenient.on_bad_image = "skip"
    with pytest.warns(UserWarning, match=r"skipped \(`on_bad_image: skip`\): .*c0/0\.png: 900000000 pixels"):
        item = lenient[0]
    assert item["image"].size == (8, 8) and int(item["label"]) == 0  # the next image of the same class


def test_skip_replaces_a_training_image_never_an_evaluation_one(tmp_path: Path) -> None:
    """A replaced query or gallery image would change the metric (a class mate counted twice) or, in ``predict``, index
    another image under its path: the evaluation sets stop whatever ``on_bad_image`` says."""
    from ranklit.data import RetrievalDataModule

    root = _classes(tmp_path)
    (root / "c0" / "1.png").write_bytes(b"not an image")
    train, val, test, gallery = (ClassFolderDataset(root) for _ in range(4))
    RetrievalDataModule(train, val_dataset=val, test_dataset=test, gallery_dataset=gallery, on_bad_image="skip")
    bad = train.paths.index(root / "c0" / "1.png")
    with pytest.warns(UserWarning, match=r"skipped \(`on_bad_image: skip`\)"):
        assert train[bad]["index"] == bad
    for evaluation in (val, test, gallery):
        with pytest.raises(UserError, match=r"c0/1\.png") as refused:
            evaluation[bad]
        message = str(refused.value)  # skip was asked for: the message says why it does not apply, not to set it
        assert "It is an evaluation image" in message and "training images only" in message, message
        assert "or, in a training set, set" not in message and "\n" not in message

"""A reader written for the pre-0.2.0 hook names (`_file`, `_malformed`, `_set_samples`, `_load`) keeps working until
0.3.0, with a DeprecationWarning naming each new name; a reader on the new names warns about nothing."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from ranklit._moved import MESSAGE_PATTERN
from ranklit.data.datasets.base import ImageRetrievalDataset

OLD = "`ranklit.data.datasets.ImageRetrievalDataset.{}` moved to `ranklit.data.datasets.ImageRetrievalDataset.{}`"


def _folder(tmp_path: Path) -> Path:
    for name, colour in (("a.png", (255, 0, 0)), ("b.png", (0, 0, 255))):
        Image.new("RGB", (8, 8), colour).save(tmp_path / name)
    (tmp_path / "list.txt").write_text("a.png 0\nb.png 1\n")
    return tmp_path


def test_a_reader_on_the_old_hook_names_still_works_and_warns(tmp_path: Path) -> None:
    with pytest.warns(DeprecationWarning, match=OLD.format("_load", "read_image")):

        class OldReader(ImageRetrievalDataset):
            LAYOUT = "list.txt"

            def __init__(self, root: Path) -> None:
                super().__init__(root, None, None)
                listing = self._file("list.txt")
                rows = [line.split() for line in listing.read_text().splitlines()]
                if any(len(row) != 2 for row in rows):
                    raise self._malformed(listing, 1, "", "`<file> <label>`")
                self._set_samples([self.root / row[0] for row in rows], [(row[1],) for row in rows])

            def _load(self, index: int) -> Image.Image:  # the old override: it must still serve
                return Image.new("RGB", (4, 4), (0, 255, 0))

    with pytest.warns(DeprecationWarning, match=MESSAGE_PATTERN) as caught:  # the `ranklit` command shows these
        dataset = OldReader(_folder(tmp_path))
    messages = {str(w.message) for w in caught}
    assert any(OLD.format("_file", "required_path") in m for m in messages)
    assert any(OLD.format("_set_samples", "set_samples") in m for m in messages)
    assert all(Path(w.filename) == Path(__file__) for w in caught)  # attributed to the reader's own lines
    assert dataset.labels.tolist() == [0, 1]
    item: dict[str, Any] = dataset[0]
    assert item["image"].size == (4, 4)  # the old `_load` override decoded it
    with pytest.warns(DeprecationWarning, match=OLD.format("_malformed", "malformed_line")):
        error = dataset._malformed(tmp_path / "list.txt", 3, "x", "`<file> <label>`")
    assert isinstance(error, ValueError) and "line 3" in str(error)


def test_a_reader_on_the_new_hook_names_warns_about_nothing(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class NewReader(ImageRetrievalDataset):
            def __init__(self, root: Path) -> None:
                super().__init__(root, None, None)
                rows = [line.split() for line in self.required_path("list.txt").read_text().splitlines()]
                self.set_samples([self.root / row[0] for row in rows], [(row[1],) for row in rows])

        dataset = NewReader(_folder(tmp_path))
        assert dataset[1]["image"].getpixel((0, 0)) == (0, 0, 255)

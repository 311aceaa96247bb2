"""Facts the docs state in one place, or copy from the code: the image types and the quick start's time."""

from __future__ import annotations

import re
from pathlib import Path

from ranklit.data.images.decoding import IMAGE_EXTENSIONS

ROOT = Path(__file__).resolve().parents[1]


def test_every_list_of_image_types_is_the_code_s() -> None:
    expected = [extension.removeprefix(".") for extension in IMAGE_EXTENSIONS]
    for page in (ROOT / "README.md", ROOT / "docs" / "getting-started.md"):
        lists = re.findall(r"\((jpg, [a-z, ]+)[;)]", page.read_text())
        assert lists, f"{page.name}: no list of image types"
        for found in lists:
            assert found.split(", ") == expected, (page.name, found)


def test_the_quick_start_s_time_is_stated_in_the_readme_only() -> None:
    """getting-started.md includes the README's paragraph; other pages and the config link to it."""
    time = re.compile(r"\d+(\.\d+)? ?s\b|minute")
    pages = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "configs" / "quickstart.yaml"]
    for page in pages:
        if page.name == "changelog.md":
            continue
        for line in page.read_text().splitlines():
            if re.search(r"quick ?start", line, re.I) and "happier" not in line:
                assert not time.search(line), f"{page.name}: {line}"
    assert '--8<-- "README.md:quickstart"' in (ROOT / "docs" / "getting-started.md").read_text()

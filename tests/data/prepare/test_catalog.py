"""The catalogue of ``ranklit data prepare`` agrees with the docs page, the shipped configs and ``--help``."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ranklit.cli._prepare_command import prepare_parser as _prepare_parser
from ranklit.data import DATASET_CATALOG as CATALOG

_REPO = Path(__file__).resolve().parents[3]
_PAGE = (_REPO / "docs" / "datasets.md").read_text()


def test_the_datasets_page_gives_every_dataset_and_every_published_digest_with_where_it_was_read() -> None:
    for entry in CATALOG.values():
        assert f"`{entry.name}`" in _PAGE, entry.name
        assert entry.homepage in _PAGE, entry.homepage
        for archive in entry.archives:
            for digest, read_at in archive.digests:
                kind, _, value = digest.partition(":")
                row = next(line for line in _PAGE.splitlines() if value in line)
                assert f"{kind} `{value}`" in row and f"`{archive.filename}`" in row
                assert read_at.split(" ")[0] in row, archive.filename


def test_published_digests_are_well_formed() -> None:
    digests = [d for e in CATALOG.values() for a in e.archives for d, _ in a.digests]
    assert digests and all(re.fullmatch(r"md5:[0-9a-f]{32}|sha256:[0-9a-f]{64}", d) for d in digests)


def test_every_shipped_config_on_a_catalogued_dataset_is_listed_with_it() -> None:
    readers = {reader.cls.rsplit(".", 1)[-1] for entry in CATALOG.values() for reader in entry.readers} - {"CSVDataset"}
    listed = {config for entry in CATALOG.values() for config in entry.configs}
    for config in sorted((_REPO / "configs").glob("*.yaml")):
        data = yaml.safe_load(config.read_text()).get("data") or {}
        parts = [value for value in data.values() if isinstance(value, dict)]
        classes = {str(part.get("class_path", "")).rsplit(".", 1)[-1] for part in parts}
        if classes & (readers | {"RevisitedTestSet"}):
            assert config.name in listed, config.name
    assert all((_REPO / "configs" / name).is_file() for name in listed)


def test_help_lists_every_dataset_with_size_terms_and_source() -> None:
    text = _prepare_parser().format_help()
    for entry in CATALOG.values():
        assert re.search(rf"^  {re.escape(entry.name)} +{re.escape(entry.title)}$", text, re.MULTILINE), entry.name
        assert f" {entry.size}; {entry.homepage}\n" in text and f"terms: {entry.terms}\n" in text

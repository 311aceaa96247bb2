"""Every benchmark dataset ranklit reads, prepared in one call (:func:`prepare_dataset`) or one command
(``ranklit data prepare NAME --root DIR``, its face in :mod:`ranklit.cli`).

- ``_catalog`` — the datasets, their files, official digests (and where each was read), terms (the fields:
  ``_entries``).
- ``_sources`` — the files' addresses, or the ``source`` / ``sha256`` given.
- ``_download`` — resumable HTTP downloads (``Range``, retries, ``*.part``, disk space).
- ``_extraction`` — tar / zip unpacking that refuses entries landing outside.
- ``_conversions`` — from the unpacked files to each reader's layout.
- ``_record`` — ``ranklit-prepared.json``, what a prepared root holds.
- ``_preparation`` — the steps in order (:func:`prepare_dataset`).

The datasets, their sources and the commands are listed on the documentation's Datasets page (``docs/datasets.md``).
"""

from ranklit.data.prepare._catalog import CATALOG as DATASET_CATALOG
from ranklit.data.prepare._entries import DatasetEntry
from ranklit.data.prepare._preparation import PreparedDataset, prepare_dataset

__all__ = ["DATASET_CATALOG", "DatasetEntry", "PreparedDataset", "prepare_dataset"]

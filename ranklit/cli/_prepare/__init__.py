"""``ranklit data prepare NAME --root DIR``: every benchmark dataset ranklit reads, in one command.

- :mod:`~ranklit.cli._prepare._catalog` — the datasets, their files, official digests (and where each was read), terms
  (the fields: :mod:`~ranklit.cli._prepare._entries`).
- :mod:`~ranklit.cli._prepare._sources` — the files' addresses, or the ``--source`` / ``--sha256`` given.
- :mod:`~ranklit.cli._prepare._download` — resumable HTTP downloads (``Range``, retries, ``*.part``, disk space).
- :mod:`~ranklit.cli._prepare._extraction` — tar / zip unpacking that refuses entries landing outside.
- :mod:`~ranklit.cli._prepare._conversions` — from the unpacked files to each reader's layout.
- :mod:`~ranklit.cli._prepare._record` — ``ranklit-prepared.json``, what a prepared root holds.
- :mod:`~ranklit.cli._prepare._command` — the command (``main``).

The datasets, their sources and the commands are listed on the documentation's Datasets page (``docs/datasets.md``).
"""

from ranklit.cli._prepare._catalog import CATALOG
from ranklit.cli._prepare._command import main

__all__ = ["CATALOG", "main"]

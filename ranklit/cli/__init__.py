"""The ``ranklit`` command line (everything here is command-line code; nothing else in ranklit imports it).

- :mod:`ranklit.cli.app` — :class:`RanklitCLI` (the LightningCLI subclass) and :func:`main`, the console script.
- :mod:`ranklit.cli.config_files` — the shipped configs (``ranklit configs``) and the keys older configs used.
- :mod:`ranklit.cli.runs`, :mod:`ranklit.cli.resuming` — run folders, their saved config and ``--resume``.
- :mod:`ranklit.cli.error_surface`, :mod:`ranklit.cli.warning_filters` — short errors, exit codes, quiet runs.
- :mod:`ranklit.cli.data_check` — ``ranklit data check``.
- :mod:`ranklit.cli.prepare` — ``ranklit data prepare`` (download, verify, unpack, lay out a benchmark dataset).
"""

from ranklit.cli.app import RanklitCLI, main

__all__ = ["RanklitCLI", "main"]

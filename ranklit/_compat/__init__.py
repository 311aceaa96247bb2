"""Every use of a private or undocumented API of Lightning, torchmetrics and torch's DDP, in one place.

Each function or class names what it reaches into and the versions it was checked against: the range that
``pyproject.toml`` allows and ``.ci/run`` tests, oldest and newest (Lightning 2.5.5 and 2.6.6, torchmetrics 1.3.1 and
1.9.0, torch 2.14.1). Everywhere else ranklit uses public API only: ``tests/test_compat.py`` fails when another module
reads, writes or overrides a private attribute of a Lightning or torchmetrics object. When a release moves one of
these, this package is the one place to change.

- :mod:`ranklit._compat.torchmetrics`: metric synchronisation flags (no Lightning import, so ``ranklit.metrics`` stays
  importable without Lightning);
- :mod:`ranklit._compat.lightning`: the trainer's loops, signal connector and cluster environment, LightningCLI's
  checkpoint-settings step, DDP's gradient-sync flag.
"""

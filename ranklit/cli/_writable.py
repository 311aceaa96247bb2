"""A run folder this process cannot write is refused before anything is written or trained.

``ranklit fit`` writes into its run folder (``config.yaml``, ``hparams.yaml``, ``metrics.csv``, ``run.lock``) and its
``checkpoints/``. A folder it may not write used to be found at the first checkpoint save, after a batch had trained
and the logs and configs of a resumed run had been rewritten. :func:`check_writable` is called where the folder is
known, before its lock is taken (a resume: :func:`ranklit.cli._resuming.find_resume`; a new run: when its trainer is
built), on the process that will be global rank 0 (the one that writes them). A folder that does not exist yet is
checked through the nearest one that does, where it will be made. The check is ``os.access`` (permissions, a
read-only mount; root's override of the permissions counts as writing): a file system that refuses writes it does
not report (some network mounts) still fails at the first write.

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> check_writable(folder / "runs/quickstart/version_0", checkpoints=True)  # made later, under a writable folder
    >>> (folder / "runs").write_text("")
    0
    >>> check_writable(folder / "runs/quickstart/version_0", checkpoints=True)
    Traceback (most recent call last):
    ...
    ranklit.errors.UserError: .../runs is a file, where the folder .../runs/quickstart/version_0 is to be made: ...
"""

from __future__ import annotations

import os
from pathlib import Path

from ranklit.errors import UserError

__all__ = ["check_writable"]


def check_writable(folder: Path, checkpoints: bool) -> None:
    """Raise a :class:`UserError` (one line: the folder, why, the fix) unless this process can write the run folder
    ``folder`` and, with ``checkpoints``, its ``checkpoints/`` (each, or where it is to be made)."""
    for path in (folder, folder / "checkpoints") if checkpoints else (folder,):
        existing = path
        while not existing.exists() and existing.parent != existing:
            existing = existing.parent
        made = "" if existing == path else f", where the folder {path} is to be made"
        if not existing.is_dir():
            problem, fix = f"is a file{made}", f"move it away (`mv {existing} {existing}.moved`)"
        elif not os.access(existing, os.W_OK | os.X_OK):
            problem = f"is not writable by this process (uid {os.geteuid()}){made}"
            fix = f"make it writable (`chmod u+w {existing}`, or ask its owner)"
        else:
            continue
        raise UserError(
            f"{existing} {problem}: `ranklit fit` writes config.yaml, hparams.yaml, metrics.csv and run.lock into the "
            f"run folder {folder} and its checkpoints into {folder / 'checkpoints'}. Nothing was written or trained: "
            f"{fix}, or train elsewhere (another `--trainer.logger.init_args.save_dir`; a resume: `--ckpt_path` of a "
            "copy of the run folder)."
        )

"""A user's config written for ranklit 0.1 names a callback by its old path: ``ranklit fit`` still runs it, and says
where it moved (a ``DeprecationWarning`` the command line shows, see ``ranklit/_moved.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ranklit.cli import main
from tests.cli.test_cli import TINY
from tests.tiny import synthetic_args


def test_an_old_class_path_in_a_config_still_runs_and_names_the_new_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old.yaml").write_text(
        "trainer:\n"
        "  callbacks:\n"
        "    - class_path: ranklit.training.RunCheckpoint\n"
        "      init_args: {dirpath: kept, every_n_steps: 1}\n"
    )
    fit = ["fit", "--config", "quickstart.yaml", "--config", "old.yaml", *TINY, *synthetic_args(),
           "--trainer.max_steps=2", "--trainer.limit_val_batches=1", "--baseline_validation=false",
           "--trainer.enable_progress_bar=false"]  # fmt: skip
    moved = r"`ranklit\.training\.RunCheckpoint` moved to `ranklit\.callbacks\.RunCheckpoint`"
    with pytest.warns(DeprecationWarning, match=moved):
        main(fit)
    assert (tmp_path / "kept" / "last.ckpt").is_file()  # the old path's callback ran

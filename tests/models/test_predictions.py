"""``ranklit predict`` writes embeddings, labels and indices that load back as plain tensors."""

from __future__ import annotations

from pathlib import Path

import torch

from ranklit.cli import main
from ranklit.data import SyntheticHierarchy
from ranklit.models import load_predictions
from tests.cli.test_cli import TINY
from tests.tiny import SMALL, synthetic_args


def test_predict_writes_every_test_sample_once(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "emb" / "test"
    main(["predict", "--config", "quickstart.yaml", *TINY, *synthetic_args(), f"--predictions_path={out}"])
    predictions = load_predictions(out)
    expected = SyntheticHierarchy(split="test", **SMALL)
    assert predictions["embeddings"].shape == (len(expected), 128)
    assert torch.equal(predictions["index"], torch.arange(len(expected)))
    assert torch.equal(predictions["labels"], expected.labels)
    torch.testing.assert_close(predictions["embeddings"].norm(dim=1), torch.ones(len(expected)))

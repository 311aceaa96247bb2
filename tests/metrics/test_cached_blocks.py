"""Flat labels, row by row: each chunk's product and counting run by blocks of rows whose scores stay in the cache
(issue 31); the values are those of one block per chunk, bit for bit (the blocks' counts are concatenated, padded to
the chunk's width, before any metric is computed)."""

from __future__ import annotations

import pytest
import torch

from ranklit.functional.metrics import _row_metrics
from ranklit.functional.metrics._retrieval import retrieval_metric_tensors


def _tied_embeddings(n: int, generator: torch.Generator) -> torch.Tensor:
    """Rounded to few values: many exact score ties between positives and negatives; used unnormalised, their dot
    products are exact, so a block of 3 rows computes the scores of the whole chunk (with MKL a row's scores are the
    same in any product of 64 rows or more, the smallest block; tiny products may round differently)."""
    return (torch.randn(n, 5, generator=generator) * 2).round() / 2


@pytest.mark.parametrize("ties", ["pessimistic", "average", "optimistic"])
def test_blocks_of_a_chunk_give_the_values_of_the_whole_chunk(ties: str, monkeypatch: pytest.MonkeyPatch) -> None:
    g = torch.Generator().manual_seed(3)
    queries, gallery = _tied_embeddings(70, g), _tied_embeddings(90, g)
    labels, gallery_labels = torch.randint(0, 9, (70,), generator=g), torch.randint(0, 9, (90,), generator=g)
    junk = torch.rand(70, 90, generator=g) < 0.05
    ids = torch.arange(70)
    cases = [dict(embeddings=queries, labels=labels, ref_embeddings=gallery, ref_labels=gallery_labels),
             dict(embeddings=queries, labels=labels, ref_embeddings=gallery, ref_labels=gallery_labels, junk=junk),
             dict(embeddings=queries, labels=labels, ids=ids, ref_embeddings=queries, ref_labels=labels, ref_ids=ids),
             dict(embeddings=queries, labels=labels, ref_embeddings=gallery, ref_labels=gallery_labels,
                  chunk_size=20)]
    for kwargs in cases:
        whole = retrieval_metric_tensors(**kwargs, ties=ties, per_query=True, normalize=False)
        with monkeypatch.context() as small:
            small.setattr(_row_metrics, "cached_rows", lambda *args: 3)  # blocks of 3 rows: widths differ
            blocks = retrieval_metric_tensors(**kwargs, ties=ties, per_query=True, normalize=False)
        for key in whole:
            assert torch.equal(whole[key].nan_to_num(-7.0), blocks[key].nan_to_num(-7.0)), (key, sorted(kwargs))

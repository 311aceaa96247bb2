"""Random retrieval problems shared by the loss tests (flat, hierarchical, larger retrieval set with ids)."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn.functional import normalize

CASES = ("flat", "hierarchical", "refs")


def make_case(kind: str, seed: int = 0, batch: int = 12, dim: int = 5) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """``(args, kwargs)`` of a loss call in float64 with ``requires_grad`` embeddings.

    - ``flat``: ``[B]`` labels, some classes with a single image (queries without positive).
    - ``hierarchical``: ``[B, 2]`` labels (fine, fine // 2).
    - ``refs``: ``B / 2`` queries ranked against ``B + 4`` items; the queries are items of the retrieval set (same
      ids), so each is excluded from its own ranking by id.
    """
    gen = torch.Generator().manual_seed(seed)
    fine = torch.randint(0, batch // 3, (batch,), generator=gen)
    fine[-1] = batch  # a class with a single image: its query has no positive
    emb = normalize(torch.randn(batch, dim, generator=gen, dtype=torch.float64), dim=1).requires_grad_()
    if kind == "flat":
        return {"embeddings": emb, "labels": fine}, {}
    if kind == "hierarchical":
        return {"embeddings": emb, "labels": torch.stack([fine, fine // 2], dim=1)}, {}
    extra = normalize(torch.randn(4, dim, generator=gen, dtype=torch.float64), dim=1)
    refs = torch.cat([emb, extra]).detach().requires_grad_()
    ref_labels = torch.cat([fine, torch.randint(0, batch // 3, (4,), generator=gen)])
    ref_ids = torch.randperm(batch + 4, generator=gen) + 100
    half = batch // 2
    queries = refs.detach()[:half].clone().requires_grad_()
    kwargs = {"ref_embeddings": refs, "ref_labels": ref_labels, "ids": ref_ids[:half], "ref_ids": ref_ids}
    return {"embeddings": queries, "labels": fine[:half]}, kwargs


def oracle_args(args: dict[str, Tensor], kwargs: dict[str, Tensor]) -> tuple:
    """Positional arguments of the oracles in ``tests.oracles.losses``."""
    return (
        args["embeddings"],
        args["labels"],
        kwargs.get("ref_embeddings"),
        kwargs.get("ref_labels"),
        kwargs.get("ids"),
        kwargs.get("ref_ids"),
    )


def grads(loss: Tensor, args: dict[str, Tensor], kwargs: dict[str, Tensor]) -> list[Tensor]:
    """Gradients of ``loss`` w.r.t. the embeddings (and the retrieval set when there is one)."""
    inputs = [args["embeddings"]] + ([kwargs["ref_embeddings"]] if "ref_embeddings" in kwargs else [])
    return list(torch.autograd.grad(loss, inputs))

"""Generic checks every loss of the registry must pass: forward, backward, no NaN, dtypes, parameters' gradients,
permutation invariance, minimum at perfect separation, and the retrieval-set/ids call."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn
from torch.nn.functional import normalize

import ranklit.losses
from ranklit._public import defined_in
from ranklit.losses import EmbeddingLoss, create_loss, list_losses, loss_entry
from tests.losses.registry import AP_LOSSES, DIM, NUM_CLASSES, PROXY_LOSSES, RANDOM_LOSSES, REGISTRY

NAMES = sorted(REGISTRY)
# Exports of ranklit.losses that are not losses one can build: the base classes new losses subclass.
BASE_CLASSES = {"EmbeddingLoss", "RetrievalLoss", "BinaryRetrievalLoss"}


def _loss_classes(cls: type) -> set[type]:
    return {sub for direct in cls.__subclasses__() for sub in {direct} | _loss_classes(direct)}


def test_every_loss_class_of_the_package_is_registered_and_exported() -> None:
    """A public loss class defined in ``ranklit/losses/`` without ``@register_loss`` fails here (so it cannot miss
    the generic checks below, ``__all__`` or the docs index)."""
    defined = {
        cls.__name__
        for cls in _loss_classes(EmbeddingLoss)
        if defined_in(cls).startswith("ranklit.losses.") and not cls.__name__.startswith("_")
    }
    assert defined - BASE_CLASSES == set(list_losses()), "decorate the class with @register_loss"
    exported = set(ranklit.losses.__all__)
    assert BASE_CLASSES <= exported and set(list_losses()) <= exported
    assert all(getattr(ranklit.losses, name) is loss_entry(name).cls for name in list_losses())
    assert {type(make()).__name__ for make in REGISTRY.values()} == set(list_losses())


def test_create_loss_and_unknown_names() -> None:
    assert create_loss("SupAPLoss", tau=0.05).options.tau == 0.05
    with pytest.raises(ValueError, match="no loss named 'SupAP'; the losses are BlackBoxAPLoss, "):
        create_loss("SupAP")


@pytest.mark.parametrize("name", sorted(BASE_CLASSES))
def test_excluded_names_are_base_classes_of_registered_losses(name: str) -> None:
    """The exclusion list cannot hide a loss: each excluded name is a base class that registered losses extend."""
    base = getattr(ranklit.losses, name)
    assert inspect.isclass(base) and issubclass(base, nn.Module)
    assert any(isinstance(make(), base) and type(make()) is not base for make in REGISTRY.values())


def _batch(dtype: torch.dtype = torch.float32, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    emb = normalize(torch.randn(12, DIM, generator=gen, dtype=torch.float64), dim=1).to(dtype)
    labels = torch.arange(NUM_CLASSES).repeat_interleave(2)
    return emb, torch.stack([labels, labels // 3], dim=1)


@pytest.mark.parametrize("name", NAMES)
def test_forward_backward_no_nan_and_parameters_get_gradients(name: str) -> None:
    torch.manual_seed(0)
    loss_fn = REGISTRY[name]()
    emb, labels = _batch()
    emb.requires_grad_()
    loss = loss_fn(emb, labels)
    assert loss.ndim == 0 and torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(emb.grad).all() and emb.grad.abs().sum() > 0
    for pname, param in loss_fn.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all() and param.grad.abs().sum() > 0, pname


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", NAMES)
def test_low_precision_is_accumulated_in_float32(name: str, dtype: torch.dtype) -> None:
    loss_fn = REGISTRY[name]().eval()
    emb, labels = _batch(dtype)
    emb.requires_grad_()
    torch.manual_seed(0)
    loss = loss_fn(emb, labels)
    torch.manual_seed(0)
    reference = loss_fn(emb.detach().float(), labels)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, reference)
    loss.backward()
    assert emb.grad.dtype == dtype and torch.isfinite(emb.grad.float()).all()


@pytest.mark.parametrize("name", NAMES)
def test_float64_is_computed_in_float64(name: str) -> None:
    loss_fn = REGISTRY[name]().double()
    emb, labels = _batch(torch.float64)
    assert loss_fn(emb, labels).dtype == torch.float64


@pytest.mark.parametrize("name", [n for n in NAMES if n not in RANDOM_LOSSES or n == "BlackBoxAPLoss"])
def test_permutation_invariance(name: str) -> None:
    """Reordering the batch leaves the loss unchanged (random-sampling losses draw in batch order: excluded)."""
    loss_fn = REGISTRY[name]().double().eval()
    emb, labels = _batch(torch.float64, seed=1)
    perm = torch.randperm(emb.shape[0], generator=torch.Generator().manual_seed(3))
    torch.manual_seed(0)
    before = loss_fn(emb, labels)
    torch.manual_seed(0)
    after = loss_fn(emb[perm], labels[perm])
    torch.testing.assert_close(before, after)


@pytest.mark.parametrize("name", sorted(set(NAMES) - PROXY_LOSSES))
def test_perfect_separation_gives_the_minimum(name: str) -> None:
    # Every class on its own axis: positives score 1, negatives 0 (ties among positives included).
    labels = torch.arange(NUM_CLASSES).repeat_interleave(3)
    emb = torch.eye(DIM, dtype=torch.float64)[labels]
    loss = REGISTRY[name]().double().eval()(emb, labels)
    assert loss.item() == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("name", sorted(AP_LOSSES))
def test_ap_losses_are_at_most_one_and_worse_for_a_bad_ranking(name: str) -> None:
    labels = torch.arange(NUM_CLASSES).repeat_interleave(3)
    good = torch.eye(DIM, dtype=torch.float64)[labels]
    bad = torch.eye(DIM, dtype=torch.float64)[(labels + torch.arange(labels.shape[0])) % NUM_CLASSES]
    loss_fn = REGISTRY[name]().double().eval()
    assert loss_fn(good, labels) < loss_fn(bad, labels) <= 1.0


@pytest.mark.parametrize("name", sorted(set(NAMES) - PROXY_LOSSES - RANDOM_LOSSES))
def test_in_batch_call_equals_explicit_retrieval_set_with_ids(name: str) -> None:
    loss_fn = REGISTRY[name]().double()
    emb, labels = _batch(torch.float64, seed=2)
    ids = torch.arange(100, 112)
    explicit = loss_fn(emb, labels, ref_embeddings=emb, ref_labels=labels, ids=ids, ref_ids=ids)
    torch.testing.assert_close(loss_fn(emb, labels), explicit)


@pytest.mark.parametrize("name", sorted(set(NAMES) - PROXY_LOSSES - RANDOM_LOSSES))
def test_queries_without_positive_are_skipped(name: str) -> None:
    loss_fn = REGISTRY[name]().double()
    emb, labels = _batch(torch.float64, seed=4)
    ids = torch.arange(12)
    lone = normalize(torch.randn(1, DIM, dtype=torch.float64), dim=1)
    queries = torch.cat([emb, lone])
    query_labels = torch.cat([labels, torch.tensor([[99, 99]])])
    kwargs = {"ref_embeddings": emb, "ref_labels": labels, "ref_ids": ids}
    with_lone = loss_fn(queries, query_labels, ids=torch.arange(13), **kwargs)
    torch.testing.assert_close(with_lone, loss_fn(emb, labels, ids=ids, **kwargs))


def test_repr_shows_hyper_parameters() -> None:
    assert "tau=0.01, rho=100.0, delta=0.05" in repr(REGISTRY["SupAPLoss"]())
    assert "lam=0.5" in repr(REGISTRY["ROADMAPLoss"]())


def test_a_second_loss_with_a_registered_name_is_refused() -> None:
    """Two classes may not share a name in the registry (``__all__`` and the docs would show only one)."""
    impostor = type("SupAPLoss", (EmbeddingLoss,), {"__module__": "mypackage.losses"})
    with pytest.raises(ValueError, match="two losses are registered as 'SupAPLoss'"):
        ranklit.losses.register_loss(summary="-", paper="-")(impostor)
    assert loss_entry("SupAPLoss").cls is ranklit.losses.SupAPLoss

"""The switches that reproduce the papers' released code (docs/spec.md §6), each against a float64 oracle written
from reading that code (tests/oracles/released.py):

* elias-ramzi/ROADMAP @ fed37d75f475f636542b2ccd1ffc0c3918498a57: ``roadmap/losses/smooth_rank_ap.py`` (``step_rank``,
  ``SupAP``), ``roadmap/losses/calibration_loss.py``, ``roadmap/engine/base_update.py``,
  ``roadmap/config/loss/roadmap.yaml`` and ``roadmap_inat.yaml``;
* elias-ramzi/HAPPIER @ 5af91b3ac6c216a936232da33b42af7efaba5c6b: ``happier/losses/hap_loss.py``,
  ``happier/losses/cluster_loss.py``, ``happier/engine/compute_relevance_on_the_fly.py`` (``relevance_type: pop``),
  ``happier/engine/base_training_loop.py``, ``happier/config/loss/HAPPIER.yaml``, ``HAPPIER_SOP.yaml``,
  ``HAPPIER_inat.yaml``, ``HAPPIER_5.yaml``, ``HAPPIER_5_SOP.yaml`` and ``happier/config/dataset/*.yaml``;
* kunhe/FastAP-metric-learning @ ca85b2ab3f22460795d4306c8fa01c655d17027e: ``pytorch/FastAP_loss.py``;
* Andrew-Brown1/Smooth_AP @ 59927ec4c59565bff209301d2c2b449ed1937806: ``src/Smooth_AP_loss.py``.
"""

from __future__ import annotations

import pytest
import torch

from ranklit.losses import CalibrationLoss, FastAPLoss, HAPLoss, HAPPIERLoss, ROADMAPLoss, SmoothAPLoss, SupAPLoss
from tests.oracles import released

VALUE = dict(rtol=1e-9, atol=1e-12)
GRADIENT = dict(rtol=1e-7, atol=1e-10)
CONFIGS = {"roadmap.yaml / HAPPIER.yaml": dict(offset=1.44, start=0.5), "*_inat.yaml": dict(offset=1.0, start=0.0)}


def _batch(seed: int, levels: bool | int = False) -> tuple[torch.Tensor, torch.Tensor]:
    """10 close embeddings; labels ``[10]``, or ``[10, L]`` with ``levels`` columns (``True``: 2)."""
    g = torch.Generator().manual_seed(seed)
    raw = (torch.randn(10, 4, generator=g, dtype=torch.float64) * 0.3 + torch.tensor([1.0, 0, 0, 0])).requires_grad_()
    fine = torch.tensor([0, 0, 1, 1, 1, 2, 2, 3, 3, 4])
    if not levels:
        return raw, fine
    return raw, torch.stack([fine // 2**h for h in range(2 if levels is True else levels)], 1)


def _same_value_and_gradient(value: torch.Tensor, expected: torch.Tensor, raw: torch.Tensor) -> None:
    torch.testing.assert_close(value, expected, **VALUE)
    (got,) = torch.autograd.grad(value, raw, retain_graph=True)
    (want,) = torch.autograd.grad(expected, raw)
    torch.testing.assert_close(got, want, **GRADIENT)


@pytest.mark.parametrize("config", CONFIGS)
def test_supap_offset_and_start_reproduce_roadmap_configs(config: str) -> None:
    raw, labels = _batch(0)  # close embeddings: many score gaps inside (0, delta] and beyond
    loss = SupAPLoss(include_self=True, **CONFIGS[config]).double()
    _same_value_and_gradient(loss(raw, labels), released.roadmap_supap(raw, labels, **CONFIGS[config]), raw)
    paper = SupAPLoss(include_self=True).double()(raw, labels)
    assert not torch.isclose(paper, loss(raw, labels), rtol=1e-6)  # the switch matters on this batch


@pytest.mark.parametrize("config", CONFIGS)
def test_roadmap_released_recipe_weights_both_terms_one(config: str) -> None:
    raw, labels = _batch(1)
    loss = ROADMAPLoss(include_self=True, calibration_reduction="batch_active", weights=(1.0, 1.0),
                       **CONFIGS[config]).double()
    _same_value_and_gradient(loss(raw, labels), released.roadmap_total(raw, labels, **CONFIGS[config]), raw)
    half = ROADMAPLoss(include_self=True, calibration_reduction="batch_active", **CONFIGS[config]).double()
    torch.testing.assert_close(half(raw, labels), 0.5 * loss(raw, labels), **VALUE)  # the paper's (1 - lam, lam)


def test_batch_active_calibration_without_positive_pair_returns_the_released_value() -> None:
    raw = torch.randn(6, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64).requires_grad_()
    labels = torch.arange(6)  # no positive pair at all
    value = CalibrationLoss(reduction="batch_active").double()(raw, labels)
    _same_value_and_gradient(value, released.pml_calibration(raw, labels), raw)
    assert float(value.detach()) > 0
    with pytest.raises(ValueError, match="no query has a positive"):
        CalibrationLoss()(raw, labels)  # the paper's per-query average is undefined


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("loss_class", [HAPLoss, HAPPIERLoss])
def test_hap_offset_and_start_reproduce_happier_configs(config: str, loss_class: type) -> None:
    raw, labels = _batch(3, levels=True)
    options = dict(include_self=True, with_hrank=False, **CONFIGS[config])
    if loss_class is HAPPIERLoss:  # the clustering term off: the H-AP term alone is compared
        loss = HAPPIERLoss(num_classes=5, embedding_dim=4, lam=0.0, **options).double()
    else:
        loss = HAPLoss(**options).double()
    _same_value_and_gradient(loss(raw, labels), released.happier_hap(raw, labels, **CONFIGS[config]), raw)


@pytest.mark.parametrize("num_levels", [2, 3])
@pytest.mark.parametrize("alpha", [1.0, 3.0, 5.0])
def test_hap_alpha_reproduces_the_released_relevance(alpha: float, num_levels: int) -> None:
    """The datasets' ``relevance_type: pop`` with ``alpha`` (HAPPIER 1; HAPPIER_F 5 on SOP, 3 on iNaturalist), with
    2 label columns (SOP, iNaturalist-base) and 3 (DyML)."""
    raw, labels = _batch(6, levels=num_levels)
    options = dict(include_self=True, with_hrank=False, offset=1.44)
    loss = HAPLoss(alpha=alpha, **options).double()
    _same_value_and_gradient(loss(raw, labels), released.happier_hap(raw, labels, alpha=alpha, offset=1.44), raw)
    if alpha != 1.0:  # the exponent matters on this batch
        assert not torch.isclose(loss(raw, labels), HAPLoss(**options).double()(raw, labels), rtol=1e-6)


def test_hap_with_hrank_reproduces_the_happier_5_sop_config() -> None:
    """``HAPPIER_5_SOP.yaml``: the H-rank lower bound on (``with_hrank: True``, beta 25, gamma 0.5, leak 10)."""
    raw, labels = _batch(7, levels=True)
    loss = HAPLoss(include_self=True, with_hrank=True, offset=1.44).double()
    expected = released.happier_hap(raw, labels, offset=1.44, with_hrank=True)
    _same_value_and_gradient(loss(raw, labels), expected, raw)
    assert not torch.isclose(expected, released.happier_hap(raw, labels, offset=1.44), rtol=1e-6)


@pytest.mark.parametrize(("lam", "config"), [(0.1, "HAPPIER.yaml"), (0.5, "HAPPIER_5.yaml")])
def test_happier_lam_weights_the_two_terms_as_the_released_configs(lam: float, config: str) -> None:
    """The total of ``base_training_loop.py``: ``(1 - lam) H-AP + lam clustering`` with the configs' weights, value
    and gradients with respect to the embeddings and to the proxies."""
    raw, labels = _batch(8, levels=True)
    loss = HAPPIERLoss(num_classes=5, embedding_dim=4, lam=lam, include_self=True, with_hrank=False,
                       offset=1.44).double()
    proxies = loss.cluster.proxies
    assert proxies is not None
    value = loss(raw, labels)
    expected = released.happier_total(raw, labels, proxies, weights=(1.0 - lam, lam), offset=1.44)
    torch.testing.assert_close(value, expected, **VALUE)
    got = torch.autograd.grad(value, (raw, proxies))
    want = torch.autograd.grad(expected, (raw, proxies))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, **GRADIENT)
    assert float(released.happier_cluster(raw, labels, proxies).detach()) > 0.1  # the clustering term is not negligible


def test_fastap_default_leaves_the_query_out_as_the_released_code() -> None:
    raw, labels = _batch(4)
    _same_value_and_gradient(FastAPLoss().double()(raw, labels), released.fastap(raw, labels), raw)
    assert not torch.isclose(FastAPLoss(include_self=True).double()(raw, labels), released.fastap(raw, labels))


def test_smooth_ap_include_self_reproduces_brown_et_al() -> None:
    raw, labels = _batch(5)
    value = SmoothAPLoss(include_self=True).double()(raw, labels)
    _same_value_and_gradient(value, released.brown_smooth_ap(raw, labels), raw)


def test_recipe_options_are_validated() -> None:
    with pytest.raises(ValueError, match="`offset`"):
        SupAPLoss(offset=-1.0)
    with pytest.raises(ValueError, match="`start`"):
        HAPLoss(start=float("nan"))
    with pytest.raises(ValueError, match="`weights`"):
        ROADMAPLoss(weights=(1.0,))

"""A pretrained backbone is fine-tuned with frozen batch-norm statistics unless told otherwise (issue 44: trained
batch statistics made every loss worse than the untrained features on the real-image benchmark); a randomly
initialised one keeps training them."""

from __future__ import annotations

from typing import Any

import pytest
import timm
import torch
from torch import nn

from ranklit.models import EmbeddingNet, _backbones


@pytest.fixture
def offline_pretrained(monkeypatch: pytest.MonkeyPatch) -> None:
    """``pretrained=True`` without a network: timm's random weights stand for the hub's."""

    def create(name: str, **kwargs: Any) -> nn.Module:
        return timm.create_model(name, pretrained=False, **kwargs)

    monkeypatch.setattr(_backbones, "create_pretrained", create)


def batchnorm(net: EmbeddingNet) -> nn.BatchNorm2d:
    return next(m for m in net.modules() if isinstance(m, nn.BatchNorm2d))


def test_a_pretrained_backbone_keeps_its_batchnorm_statistics_by_default(offline_pretrained: None) -> None:
    net = EmbeddingNet("test_resnet", pretrained=True, embedding_dim=8).train()
    bn = batchnorm(net)
    before = bn.running_mean.clone()
    net(torch.randn(4, 3, 32, 32)).sum().backward()
    assert net.freeze_batchnorm and not bn.training and torch.equal(bn.running_mean, before)
    assert bn.weight.grad is None


def test_an_explicit_choice_and_a_random_backbone_train_the_statistics(offline_pretrained: None) -> None:
    for net in (EmbeddingNet("test_resnet", pretrained=True, freeze_batchnorm=False, embedding_dim=8),
                EmbeddingNet("test_resnet", embedding_dim=8)):
        bn = batchnorm(net.train())
        before = bn.running_mean.clone()
        net(torch.randn(4, 3, 32, 32))
        assert not net.freeze_batchnorm and bn.training and not torch.equal(bn.running_mean, before)

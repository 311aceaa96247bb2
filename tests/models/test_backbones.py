"""EmbeddingNet: timm backbones, pooling variants, LayerNorm, frozen batch-norm, unknown names."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ranklit.models import EmbeddingNet, GeM
from ranklit.models._backbones import create_backbone


@pytest.mark.parametrize("pooling", ["avg", "max", "gem"])
def test_cnn_pooling_gives_normalised_embeddings(pooling: str) -> None:
    net = EmbeddingNet("test_resnet", embedding_dim=8, pooling=pooling, layer_norm=True)
    out = net(torch.randn(3, 3, 32, 32))
    assert out.shape == (3, 8)
    torch.testing.assert_close(out.norm(dim=1), torch.ones(3))


@pytest.mark.parametrize("pooling", ["token", "avg"])
def test_vit_token_and_average_pooling(pooling: str) -> None:
    net = EmbeddingNet("test_vit", embedding_dim=0, pooling=pooling, normalize=False)
    images = torch.randn(2, 3, 160, 160)
    tokens = net.backbone.forward_features(images)
    expected = tokens[:, 0] if pooling == "token" else tokens[:, net.backbone.num_prefix_tokens :].mean(1)
    torch.testing.assert_close(net(images), expected)


def test_token_pooling_on_a_cnn_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="transformer backbone"):
        EmbeddingNet("test_resnet", pooling="token")(torch.randn(2, 3, 32, 32))


def test_gem_interpolates_between_average_and_max() -> None:
    x = torch.rand(2, 4, 5, 5) + 0.1
    torch.testing.assert_close(GeM(p=1.0)(x), x.mean(dim=(2, 3)))
    assert torch.allclose(GeM(p=200.0)(x), x.amax(dim=(2, 3)), rtol=0.05)
    assert GeM().p.requires_grad and float(GeM().p) == 3.0


def test_frozen_batchnorm_keeps_statistics_and_gets_no_gradient() -> None:
    net = EmbeddingNet("test_resnet", embedding_dim=8, freeze_batchnorm=True).train()
    bn = next(m for m in net.modules() if isinstance(m, nn.BatchNorm2d))
    before = bn.running_mean.clone()
    net(torch.randn(4, 3, 32, 32)).sum().backward()
    assert not bn.training and torch.equal(bn.running_mean, before)
    assert bn.weight.grad is None and net.head.weight.grad is not None


def test_unknown_backbone_suggests_close_names() -> None:
    with pytest.raises(ValueError, match="resnet50"):
        create_backbone("resnet_50")


def test_invalid_pooling_and_dimension_are_rejected() -> None:
    with pytest.raises(ValueError, match="pooling"):
        EmbeddingNet("test_resnet", pooling="mean")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="embedding_dim"):
        EmbeddingNet("test_resnet", embedding_dim=-1)


def test_frozen_batchnorm_is_in_eval_mode_from_construction() -> None:
    net = EmbeddingNet("test_resnet", embedding_dim=8, freeze_batchnorm=True)
    assert all(not m.training for m in net.modules() if isinstance(m, nn.BatchNorm2d))
    assert net.training and net.head.training

"""``EmbeddingNet(weights=PATH)``: a timm state dict (torch.save or safetensors) loads tensor for tensor, under any
common prefix, its classifier left out; a file that does not fit is one error naming the counts and keys."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import timm
import torch
from safetensors.torch import save_file
from torch import Tensor

from ranklit.errors import UserError
from ranklit.models import EmbeddingNet
from ranklit.models._weights import load_backbone_weights


def _timm_state(num_classes: int = 0, seed: int = 1) -> dict[str, Tensor]:
    torch.manual_seed(seed)
    return timm.create_model("test_resnet", num_classes=num_classes).state_dict()


def _save(state: dict[str, Tensor], path: Path) -> Path:
    if path.suffix == ".safetensors":
        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    else:
        torch.save(state, path)
    return path


def _assert_backbone_equals(net: EmbeddingNet, state: dict[str, Tensor]) -> None:
    own = net.backbone.state_dict()
    assert set(own) == {k for k in state if not k.startswith("fc.")}
    for name, value in own.items():
        assert torch.equal(value, state[name]), name


@pytest.mark.parametrize("suffix", [".pth", ".safetensors", ".bin"])
@pytest.mark.parametrize("num_classes", [0, 1000])
def test_a_timm_state_dict_loads_tensor_for_tensor(tmp_path: Path, suffix: str, num_classes: int) -> None:
    """Saved with or without its classifier (`fc`, which the backbone does not have): every tensor equal."""
    state = _timm_state(num_classes)
    net = EmbeddingNet("test_resnet", embedding_dim=8, weights=_save(state, tmp_path / f"w{suffix}"))
    _assert_backbone_equals(net, state)
    assert not torch.equal(net.backbone.state_dict()["conv1.0.weight"], _timm_state(seed=2)["conv1.0.weight"])


def test_a_safetensors_file_is_recognised_by_its_header_whatever_its_name(tmp_path: Path) -> None:
    state = _timm_state()
    path = _save(state, tmp_path / "w.safetensors").rename(tmp_path / "model.bin")
    _assert_backbone_equals(EmbeddingNet("test_resnet", embedding_dim=8, weights=path), state)


@pytest.mark.parametrize("prefix", ["module.", "model.", "backbone.", "net.backbone.", "module.backbone."])
@pytest.mark.parametrize("wrapper", [None, "state_dict", "model"])
def test_common_prefixes_and_wrappers_are_stripped(tmp_path: Path, prefix: str, wrapper: str | None) -> None:
    state = _timm_state(1000)
    prefixed = {prefix + k: v for k, v in state.items()}
    torch.save(prefixed if wrapper is None else {wrapper: prefixed, "epoch": 3}, tmp_path / "w.pth")
    backbone = timm.create_model("test_resnet", num_classes=0)
    line = load_backbone_weights(backbone, tmp_path / "w.pth", "test_resnet")
    assert f"90 of 90 tensors of backbone 'test_resnet' loaded; prefix `{prefix}` stripped" in line
    assert "the classifier left out (2 tensors)" in line
    torch.testing.assert_close(backbone.state_dict(), {k: v for k, v in state.items() if not k.startswith("fc.")})


def test_a_whole_embedding_net_or_lightning_state_dict_gives_its_backbone(tmp_path: Path) -> None:
    """The head, pooling and loss tensors lie outside the backbone's prefix: left out, and counted."""
    trained = EmbeddingNet("test_resnet", embedding_dim=8, pooling="gem")
    state = {f"net.{k}": v for k, v in trained.state_dict().items()} | {"loss.proxies": torch.zeros(3, 8)}
    torch.save({"state_dict": state, "pytorch-lightning_version": "2.6.6", "epoch": 0}, tmp_path / "run.ckpt")
    backbone = timm.create_model("test_resnet", num_classes=0)
    line = load_backbone_weights(backbone, tmp_path / "run.ckpt", "test_resnet")
    assert "(a Lightning checkpoint): 90 of 90 tensors" in line and "prefix `net.backbone.` stripped" in line
    assert "4 tensors outside it left out" in line  # net.head.weight, net.head.bias, net.pool.p, loss.proxies
    torch.testing.assert_close(backbone.state_dict(), trained.backbone.state_dict())


def test_missing_batchnorm_counters_keep_their_value(tmp_path: Path) -> None:
    state = {k: v for k, v in _timm_state().items() if not k.endswith("num_batches_tracked")}
    backbone = timm.create_model("test_resnet", num_classes=0)
    line = load_backbone_weights(backbone, _save(state, tmp_path / "w.pth"), "test_resnet")
    assert "missing `num_batches_tracked` counters kept at 0" in line


def test_missing_unexpected_and_reshaped_tensors_are_one_error(tmp_path: Path) -> None:
    state = {"module." + k: v for k, v in _timm_state().items()}
    state["module.conv1.0.weight"] = torch.zeros(8, 3, 3, 3)
    del state["module.layer1.0.conv1.weight"], state["module.layer2.0.conv1.weight"]
    state["module.extra.weight"] = torch.zeros(1)
    path = _save(state, tmp_path / "w.pth")
    with pytest.raises(UserError) as raised:
        EmbeddingNet("test_resnet", weights=path)
    message = str(raised.value)
    assert str(path) in message and "under the prefix `module.`" in message
    assert "2 missing (`layer1.0.conv1.weight`, `layer2.0.conv1.weight`)" in message
    assert "1 unexpected (`extra.weight`)" in message
    assert "1 of another shape (`conv1.0.weight`: file [8, 3, 3, 3] vs backbone [16, 3, 3, 3])" in message
    assert "timm.create_model('test_resnet').state_dict()" in message and "\n" not in message


def test_weights_of_another_architecture_are_named_as_such(tmp_path: Path) -> None:
    path = _save(timm.create_model("test_vit").state_dict(), tmp_path / "vit.safetensors")
    with pytest.raises(UserError, match=r"none of its 80 tensors is one of backbone 'test_resnet' \(the file's keys: "
                                        r"`blocks\.0\..*another architecture"):
        EmbeddingNet("test_resnet", weights=path)


def test_a_file_that_names_code_to_run_is_refused_before_anything_runs(tmp_path: Path) -> None:
    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {tmp_path / 'pwned'}",))

    torch.save({"conv1.0.weight": Payload()}, tmp_path / "evil.pth")
    with pytest.raises(UserError, match="names code to run"):
        EmbeddingNet("test_resnet", weights=tmp_path / "evil.pth")
    assert not (tmp_path / "pwned").exists()


def test_pretrained_and_weights_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"`pretrained: true` and `weights: .*w\.pth` both choose"):
        EmbeddingNet("test_resnet", pretrained=True, weights=tmp_path / "w.pth")

"""Training/test transforms: input types, sizes, normalisation, centre crop, and timm-driven configuration."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from ranklit.data import transforms as T


def _constant(value: int, height: int = 40, width: int = 60) -> torch.Tensor:
    return torch.full((3, height, width), value, dtype=torch.uint8)


@pytest.mark.parametrize("as_pil", [False, True])
def test_train_transform_types_and_normalisation(as_pil: bool) -> None:
    image = _constant(128)
    source = Image.fromarray(image.permute(1, 2, 0).numpy()) if as_pil else image
    out = T.train_transform(24)(source)
    assert type(out) is torch.Tensor and out.dtype == torch.float32 and out.shape == (3, 24, 24)
    expected = (128 / 255 - torch.tensor(T.IMAGENET_MEAN)) / torch.tensor(T.IMAGENET_STD)
    torch.testing.assert_close(out.mean(dim=(1, 2)), expected.float(), atol=1e-5, rtol=0)


def test_train_transform_is_random_crop_and_flip() -> None:
    image = torch.arange(64 * 64, dtype=torch.int64).reshape(1, 64, 64).expand(3, 64, 64).remainder(256).to(torch.uint8)
    torch.manual_seed(0)
    outs = {tuple(T.train_transform(16)(image).flatten()[:20].tolist()) for _ in range(5)}
    assert len(outs) > 1


def test_test_transform_centre_crop_region() -> None:
    # left third dark, right third bright, middle mid-grey: resize 30 then centre-crop 20 of a 30x45 image keeps
    # only columns 12.5..32.5 of 45 -> mostly the middle band, no full dark or bright strip
    image = torch.zeros(3, 60, 90, dtype=torch.uint8)
    image[:, :, 30:60] = 128
    image[:, :, 60:] = 255
    transform = T.test_transform(30, 20, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
    out = transform(image)
    assert out.shape == (3, 20, 20)
    torch.testing.assert_close(out[:, :, 5:15], torch.full((3, 20, 10), 128 / 255), atol=1e-2, rtol=0)
    assert torch.equal(out, transform(image))  # deterministic
    pil = Image.fromarray(image.permute(1, 2, 0).numpy())
    torch.testing.assert_close(transform(pil), out, atol=2e-2, rtol=0)


def test_transform_errors() -> None:
    with pytest.raises(ValueError, match="`crop_size` \\(40\\) must not exceed `resize_size` \\(30\\)"):
        T.test_transform(30, 40)
    with pytest.raises(ValueError, match="`image_size` must be a positive integer"):
        T.train_transform(0)
    with pytest.raises(ValueError, match="`interpolation` must be one of"):
        T.train_transform(8, interpolation="cubic-ish")


def test_transforms_from_timm_name_and_module() -> None:
    import timm

    config = T.timm_data_config("deit_small_patch16_224")
    assert config["input_size"] == (3, 224, 224) and config["crop_pct"] == pytest.approx(0.9)
    train, test = T.transforms_from_timm("deit_small_patch16_224", image_size=32)
    assert train(_constant(10)).shape == (3, 32, 32)
    resize = test.transforms[1]
    assert resize.size == [round(32 / 0.9)] and test.transforms[2].size == (32, 32)
    model = timm.create_model("resnet18", pretrained=False, num_classes=0)
    _, test = T.transforms_from_timm(model)
    assert test(_constant(10, 300, 260)).shape == (3, 224, 224)
    with pytest.raises(ValueError, match="timm knows no model called 'no_such_net'"):
        T.timm_data_config("no_such_net")

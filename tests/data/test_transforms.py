"""Training/test transforms: input types, sizes, normalisation, centre crop, and timm-driven configuration."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from ranklit.data.images import transforms as T


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


def _coordinate_image(size: int = 256) -> torch.Tensor:
    """Channel 0 holds the column index, channel 1 the row index, channel 2 a constant: a crop can be read back."""
    ramp = torch.arange(size, dtype=torch.uint8)
    return torch.stack([ramp.expand(size, size), ramp[:, None].expand(size, size), torch.full((size, size), 7,
                                                                                              dtype=torch.uint8)])


def _raw(out: torch.Tensor) -> torch.Tensor:
    """Undo the normalisation: back to 0..255 pixel values."""
    mean, std = torch.tensor(T.IMAGENET_MEAN)[:, None, None], torch.tensor(T.IMAGENET_STD)[:, None, None]
    return (out * std + mean) * 255


def _crop_extent(out: torch.Tensor) -> tuple[float, float, bool]:
    """Width and height (in source pixels) of the crop an output shows, and whether it was mirrored."""
    raw = _raw(out)
    columns, rows = raw[0, raw.shape[1] // 2], raw[1, :, raw.shape[2] // 2]
    width = float(columns.max() - columns.min()) + 1
    height = float(rows.max() - rows.min()) + 1
    return width, height, bool(columns[0] > columns[-1])


def test_train_crop_area_and_aspect_ratio_stay_within_the_bounds() -> None:
    image = _coordinate_image()
    torch.manual_seed(0)
    transform = T.train_transform(32)
    extents = [_crop_extent(transform(image)) for _ in range(200)]
    areas = torch.tensor([w * h / 256**2 for w, h, _ in extents])
    ratios = torch.tensor([w / h for w, h, _ in extents])
    # RandomResizedCrop(scale=(0.16, 1), ratio=(3/4, 4/3)); the 32-pixel output blurs the edges by a few pixels
    assert areas.min() >= 0.16 * 0.9 and areas.max() <= 1.0
    assert areas.min() < 0.3 and areas.max() > 0.8  # the whole range is used, not one fixed crop
    assert ratios.min() >= 0.75 * 0.93 and ratios.max() <= 4 / 3 / 0.93
    torch.manual_seed(0)
    narrow = [_crop_extent(T.train_transform(32, scale=(0.25, 0.25), ratio=(1.0, 1.0))(image)) for _ in range(20)]
    for width, height, _ in narrow:  # a 128 x 128 crop, wherever it lands
        assert width == pytest.approx(128, abs=6) and height == pytest.approx(128, abs=6)


def test_train_flip_mirrors_half_of_the_images() -> None:
    image = _coordinate_image(64)
    transform = T.train_transform(64, scale=(1.0, 1.0), ratio=(1.0, 1.0))  # the crop is the whole image
    plain = T.test_transform(64, 64)(image)  # the same normalisation, no crop, no flip
    torch.manual_seed(0)
    outs = [transform(image) for _ in range(400)]
    flipped = [torch.allclose(out, plain.flip(-1), atol=1e-5) for out in outs]
    unflipped = [torch.allclose(out, plain, atol=1e-5) for out in outs]
    assert all(f != u for f, u in zip(flipped, unflipped, strict=True))  # each output is the image or its exact mirror
    assert 0.43 < sum(flipped) / len(outs) < 0.57  # p = 0.5: 400 draws, about 3 standard deviations



def test_train_flip_can_be_switched_off_for_direction_sensitive_classes(tmp_path) -> None:
    from ranklit.data import RetrievalDataModule
    from ranklit.data.datasets import ImageFiles

    image = _coordinate_image(64)
    plain = T.test_transform(64, 64)(image)
    transform = T.train_transform(64, scale=(1.0, 1.0), ratio=(1.0, 1.0), hflip=False)
    assert all(torch.allclose(transform(image), plain, atol=1e-5) for _ in range(50))  # never mirrored
    with pytest.raises(TypeError, match="`hflip` must be True or False"):
        T.train_transform(64, hflip="no")  # type: ignore[arg-type]
    Image.fromarray(image.permute(1, 2, 0).numpy()).save(tmp_path / "a.png")
    train = ImageFiles(tmp_path)  # the datamodule's option reaches its training transform (decoded at crop size)
    RetrievalDataModule(train, image_size=64, crop_scale=(1.0, 1.0), hflip=False, normalize_on_device=False)
    expected = T.train_transform(64, scale=(1.0, 1.0), hflip=False)(Image.open(tmp_path / "a.png"))
    assert all(torch.allclose(train[0]["image"], expected, atol=1e-2) for _ in range(20))

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

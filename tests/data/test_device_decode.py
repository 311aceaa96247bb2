"""Decoding on the device, run on CPU tensors: the worker reads the header and draws the CPU path's boxes and flips
(the same random state after each item), the device's output equals the CPU path's (bit for bit below 1 megapixel;
above it, exactly decoding first, and within the reduced decoding's tolerance of the CPU path), bad files behave as
on the CPU path, a missing or disagreeing decoder keeps the CPU path."""

from __future__ import annotations

import warnings
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from ranklit.data import ClassFolderDataset, PKSampler, RetrievalDataModule, SeededIndex
from ranklit.data.images import _device_decode
from ranklit.data.images._crop_first import crop_first
from ranklit.data.images._device_decode import decode_encoded, device_decoder
from ranklit.data.images._encoded import EncodedImage, EncodedImages, collate
from ranklit.data.images.decoding import load_image
from ranklit.data.images.transforms import test_transform, train_transform
from tests.data.test_decoding import _photo

TRAIN, TEST = train_transform(224), test_transform(256, 224)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("device_decode")
    for name, (width, height) in {"small": (400, 300), "odd": (301, 227), "big": (1200, 900)}.items():
        Image.fromarray(_photo(width, height)).save(root / f"{name}.jpg", quality=90)
    Image.fromarray(_photo(300, 240)).convert("L").save(root / "gray.jpg", quality=90)
    Image.fromarray(_photo(320, 240)).save(root / "progressive.jpg", quality=90, progressive=True)
    for orientation in (3, 6, 8):  # stored 400 x 240; 6 and 8 displayed 240 x 400
        exif = Image.Exif()
        exif[0x0112] = orientation
        Image.fromarray(_photo(400, 240)).save(root / f"rotated{orientation}.jpg", quality=90, exif=exif)
    return {path.stem: path for path in root.iterdir()}


def _cpu(transform, path: Path, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    return crop_first(transform, on_device=True).from_file(path), torch.get_rng_state()


def _device(transform, path: Path, seed: int) -> tuple[torch.Tensor, torch.Tensor, EncodedImage]:
    torch.manual_seed(seed)
    crop = crop_first(transform, on_device=True)
    crop.encode = True
    encoded = crop.from_file(path)
    state = torch.get_rng_state()
    assert isinstance(encoded, EncodedImage)
    batch = collate([{"image": encoded, "label": torch.tensor(0)}])
    return decode_encoded(batch["encoded"], batch["image"])[0], state, encoded


NAMES = ("small", "odd", "gray", "progressive", "rotated3", "rotated6", "rotated8")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("transform", [TRAIN, TEST], ids=["train", "test"])
def test_below_a_megapixel_the_device_path_equals_the_cpu_path_with_the_same_draws(files, name, transform) -> None:
    for seed in range(4):  # crops and flips of both kinds
        expected, cpu_state = _cpu(transform, files[name], seed)
        actual, device_state, encoded = _device(transform, files[name], seed)
        assert torch.equal(actual, expected), (name, seed)
        assert torch.equal(device_state, cpu_state)  # the same random draws: seeded items and resume unchanged
    width, height = Image.open(files[name]).size
    if name in ("rotated6", "rotated8"):  # the box is drawn on the size as displayed (the header's, transposed)
        width, height = height, width
    left, top, right, bottom = encoded.geometry.box
    assert 0 <= left < right <= width and 0 <= top < bottom <= height


@pytest.mark.parametrize("transform", [TRAIN, TEST], ids=["train", "test"])
def test_above_a_megapixel_the_device_path_decodes_first_and_stays_within_the_reduced_tolerance(files, transform):
    """The CPU path decodes 1200 x 900 at a reduction; the device decodes in full: decoding first, bit for bit."""
    for seed in range(3):
        reduced, _ = _cpu(transform, files["big"], seed)
        actual, _, _ = _device(transform, files["big"], seed)
        torch.manual_seed(seed)
        assert torch.equal(actual, crop_first(transform, on_device=True).transform(load_image(files["big"])))
        difference = (actual.float() - reduced.float()).abs().mean().item()
        assert difference < 1.5, difference  # the reduced decoding's tolerance (measured here 0.6-0.7)


def _folder(root: Path, bad: dict[str, tuple[Image.Image, str, dict] | bytes]) -> Path:
    """Two classes of three 48 x 40 JPEGs; ``bad`` replaces ``a/0.jpg`` (name -> (image, format, options) or bytes)."""
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(_photo(48 + i, 40)).save(root / c / f"{i}.jpg", quality=90)
    for name, content in bad.items():
        (root / "a" / "0.jpg").unlink()
        if isinstance(content, bytes):
            (root / "a" / name).write_bytes(content)
        else:
            image, kind, options = content
            image.save(root / "a" / name, format=kind, **options)
    return root


def _batch(root: Path, on_device: bool, on_bad_image: str = "stop") -> dict[str, torch.Tensor]:
    dataset = ClassFolderDataset(root)
    module = RetrievalDataModule(dataset, batch_sampler=partial(PKSampler, p=2, k=3, seed=1), image_size=32,
                                 decode_on_device=on_device, on_bad_image=on_bad_image)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return module.on_after_batch_transfer(next(iter(module.train_dataloader())), 0)


def _bad_files() -> dict[str, tuple[dict[str, tuple[Image.Image, str, dict]], bool]]:
    """Kind -> (the file replacing a/0.jpg, whether the device decodes it)."""
    photo = Image.fromarray(_photo(48, 40))
    exif = Image.Exif()
    exif[0x0112] = 6
    sixteen = Image.fromarray(np.asarray(photo.convert("L")).astype(np.uint16) * 257)
    return {
        "cmyk": ({"0.jpg": (photo.convert("CMYK"), "JPEG", {"quality": 90})}, False),
        "png among jpegs": ({"0.png": (photo, "PNG", {})}, False),
        "png named .jpg": ({"0.jpg": (photo, "PNG", {})}, False),
        "16-bit": ({"0.png": (sixteen, "PNG", {})}, False),
        "exif-rotated": ({"0.jpg": (photo, "JPEG", {"quality": 90, "exif": exif})}, True),
    }


@pytest.mark.parametrize("kind", list(_bad_files()))
def test_other_files_take_the_cpu_path_in_the_batch(tmp_path: Path, kind: str) -> None:
    bad, on_device = _bad_files()[kind]
    root = _folder(tmp_path, bad)
    expected, actual = _batch(root, False), _batch(root, True)
    assert torch.equal(actual["image"], expected["image"]) and torch.equal(actual["index"], expected["index"])
    transform = crop_first(TRAIN, on_device=True)
    transform.encode = True
    handed = transform.from_file(next((root / "a").glob("0.*")))
    assert isinstance(handed, EncodedImage) is on_device


def test_a_truncated_jpeg_stops_or_is_skipped_as_on_the_cpu_path(tmp_path: Path) -> None:
    whole = Image.fromarray(_photo(300, 200))
    whole.save(tmp_path / "whole.jpg", quality=90)
    root = _folder(tmp_path / "images", {"0.jpg": (tmp_path / "whole.jpg").read_bytes()[:3000]})
    for on_device in (False, True):
        with pytest.raises(ValueError, match=r"^Could not decode image .*a/0\.jpg: image file is truncated"):
            _batch(root, on_device)
    expected, actual = _batch(root, False, "skip"), _batch(root, True, "skip")
    assert torch.equal(actual["image"], expected["image"])


def test_a_jpeg_the_decoder_rejects_takes_the_cpu_route_or_raises_its_error(files, monkeypatch) -> None:
    images = [_device(TRAIN, files[name], 0)[2] for name in ("small", "odd")]
    batch = collate([{"image": image, "label": torch.tensor(0)} for image in images])
    expected = decode_encoded(batch["encoded"], batch["image"].clone())
    decoder = device_decoder(torch.device("cpu"))
    assert decoder is not None

    def rejects_odd(data, device):
        if any(piece.numel() == images[1].data.numel() for piece in data):
            raise RuntimeError("nvjpeg: unsupported")
        return decoder(data, device)

    monkeypatch.setattr(_device_decode, "device_decoder", lambda device: rejects_odd)
    assert torch.equal(decode_encoded(batch["encoded"], batch["image"].clone()), expected)
    encoded = batch["encoded"]
    gone = EncodedImages(encoded.positions, encoded.data, encoded.offsets, [encoded.paths[0], "/missing/odd.jpg"],
                         encoded.orientations, encoded.geometries)
    with pytest.raises(FileNotFoundError, match=r"Image file not found: /missing/odd\.jpg"):
        decode_encoded(gone, batch["image"].clone())


@pytest.fixture
def no_cached_decoder():
    device_decoder.cache_clear()
    yield
    device_decoder.cache_clear()


@pytest.mark.parametrize("decoder", ["missing", "disagreeing", "failing"])
def test_a_missing_or_disagreeing_decoder_keeps_the_cpu_path(tmp_path, monkeypatch, no_cached_decoder, decoder):
    works = _device_decode._torchvision()
    assert works is not None
    replacement = {
        "missing": None,
        "disagreeing": lambda data, device: [image // 2 for image in works(data, device)],
        "failing": lambda data, device: (_ for _ in ()).throw(RuntimeError("no nvjpeg")),
    }[decoder]
    monkeypatch.setattr(_device_decode, "_torchvision", lambda: replacement)
    monkeypatch.setattr(_device_decode, "_torchcodec", lambda: None)
    assert device_decoder(torch.device("cpu")) is None
    root = _folder(tmp_path, {})
    module = RetrievalDataModule(ClassFolderDataset(root), batch_sampler=partial(PKSampler, p=2, k=3),
                                 image_size=32, decode_on_device=True)
    with pytest.warns(UserWarning, match=r"`data.decode_on_device`: no JPEG decoder on cpu decodes as Pillow"):
        loader = module.train_dataloader()
    assert "encoded" not in next(iter(loader)) and not module.train_dataset.transform.encode


def test_auto_decodes_on_the_device_on_cuda_only_and_the_options_are_checked(tmp_path, monkeypatch) -> None:
    root = _folder(tmp_path, {})
    module = RetrievalDataModule(ClassFolderDataset(root), ClassFolderDataset(root),
                                 batch_sampler=partial(PKSampler, p=2, k=3), image_size=32, decode_on_device="auto")
    assert "encoded" not in next(iter(module.train_dataloader()))  # no trainer: the CPU
    monkeypatch.setattr("ranklit.data._datamodule.device_decoder", lambda device: object())  # CUDA faked
    module.trainer = SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device("cuda", 0)))
    assert module.train_dataloader().collate_fn is collate and module.val_dataloader().collate_fn is collate
    assert module.train_dataset.transform.encode and module.val_dataset.transform.encode
    with pytest.raises(ValueError, match=r"`data.decode_on_device` must be false, true or 'auto', got 'yes'"):
        RetrievalDataModule(decode_on_device="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"needs `data.normalize_on_device: true`"):
        RetrievalDataModule(decode_on_device=True, normalize_on_device=False)
    assert RetrievalDataModule(decode_on_device="auto", normalize_on_device=False).decode_on_device is False


def test_a_seeded_item_is_the_same_crop_in_any_process_through_the_datamodule(tmp_path: Path) -> None:
    root = _folder(tmp_path, {})
    dataset = ClassFolderDataset(root)
    module = RetrievalDataModule(dataset, batch_sampler=partial(PKSampler, p=2, k=3), image_size=32,
                                 decode_on_device=True)
    loader = module.train_dataloader()
    batch = loader.collate_fn([dataset[SeededIndex(i, 77 + i)] for i in range(4)])
    assert isinstance(batch["encoded"], EncodedImages) and len(batch["encoded"]) == 4
    pinned = batch["encoded"].pin_memory() if torch.cuda.is_available() else batch["encoded"]
    images = decode_encoded(pinned, batch["image"])
    for i in range(4):
        torch.manual_seed(77 + i)
        assert torch.equal(images[i], dataset.transform.transform(load_image(dataset.paths[i])))


@pytest.mark.parametrize("error", [torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
                                   RuntimeError("CUDA error: an illegal memory access was encountered")])
def test_cuda_out_of_memory_and_cuda_errors_are_not_taken_for_a_bad_image(files, monkeypatch, error) -> None:
    """Only "this image cannot be decoded here" takes the CPU route: an OOM or a sticky CUDA error propagates (it
    silently became CPU decoding, or resurfaced later with a wrong message)."""
    batch = collate([{"image": _device(TRAIN, files["small"], 0)[2], "label": torch.tensor(0)}])

    def failing(data, device):
        raise error

    monkeypatch.setattr(_device_decode, "device_decoder", lambda device: failing)
    with pytest.raises(type(error), match="CUDA"):
        decode_encoded(batch["encoded"], batch["image"].clone())
    assert _device_decode.rejects_image(RuntimeError("nvjpeg: unsupported")) and not _device_decode.rejects_image(error)


def test_a_batch_is_decoded_a_bounded_group_at_a_time(files, monkeypatch) -> None:
    image = _device(TRAIN, files["small"], 0)[2]
    batch = collate([{"image": image, "label": torch.tensor(0)} for _ in range(_device_decode.DECODE_GROUP + 5)])
    expected = decode_encoded(batch["encoded"], batch["image"].clone())
    decoder, calls = device_decoder(torch.device("cpu")), []
    assert decoder is not None
    monkeypatch.setattr(_device_decode, "device_decoder",
                        lambda device: lambda data, dev: calls.append(len(data)) or decoder(data, dev))
    assert torch.equal(decode_encoded(batch["encoded"], batch["image"].clone()), expected)
    assert calls == [_device_decode.DECODE_GROUP, 5]  # never the whole batch's full-size decodes at once

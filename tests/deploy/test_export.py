"""``ranklit export``: the ONNX (onnxruntime) and TorchScript (torch.jit.load) files compute the checkpoint's network
within 1e-4 for batches of 1 and 5, their card says how to feed them, and a mistake is one line and exit code 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from ranklit.cli import main
from ranklit.data.transforms import test_transform
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
              str(output)])  # fmt: skip
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
                             "dtype": "float32"}  # fmt: skip
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


def test_the_docs_onnxruntime_server_gives_the_networks_embeddings(run: Run, exported: dict[str, Path],
                                                                   tmp_path: Path) -> None:  # fmt: skip
    """The serving snippet of docs/deploy.md, run as written (file names replaced), on images of odd sizes."""
    pytest.importorskip("onnxruntime")
    page = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    snippet = re.search(r"### Serving.*?```python\n(.*?)```", page, flags=re.S).group(1)  # type: ignore[union-attr]
    rng = np.random.default_rng(0)
    names = []
    for number, (height, width) in enumerate([(45, 61), (70, 33), (32, 32)]):
        low = Image.fromarray(rng.integers(0, 255, (5, 5, 3), dtype=np.uint8)).resize((width, height), Image.BILINEAR)
        low.save(tmp_path / f"{'abc'[number]}.png")
        names.append(str(tmp_path / f"{'abc'[number]}.png"))
    code = snippet.replace('"model.onnx', f'"{exported["onnx"]}').replace('["a.jpg", "b.jpg", "c.jpg"]', repr(names))
    namespace: dict = {}
    exec(code, namespace)  # the documentation's own code
    transform = test_transform(32, 32)
    with torch.no_grad():
        expected = run.net()(torch.stack([transform(Image.open(n).convert("RGB")) for n in names]))
    # Pillow's and torchvision's bilinear resizes differ by one grey level on some pixels (measured: <= 1, mean
    # 0.002-0.2): 4.7e-4 on these embeddings; a missing normalisation or crop would be off by > 0.1
    torch.testing.assert_close(torch.from_numpy(namespace["embeddings"]), expected, atol=2e-3, rtol=0)

"""The deploy commands' mistakes (one line, exit code 2, nothing written), and the faiss backends against the exact
search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ranklit.deploy import build_index, load_model
from ranklit.deploy._faiss_backend import build_faiss_index, factory_string, faiss_search, recall_at_k
from ranklit.index import TensorDescriptors, top_k
from tests.cli.cli_cases import drive

from .conftest import Images, Run


def _other_checkpoint(run: Run, path: Path) -> Path:
    """The same network with one weight changed: another model for the index's card."""
    checkpoint = torch.load(run.ckpt, map_location="cpu", weights_only=False)
    name = next(n for n in checkpoint["state_dict"] if n.startswith("net.head."))
    checkpoint["state_dict"][name] = checkpoint["state_dict"][name] + 0.01
    torch.save(checkpoint, path)
    return path


def test_mistakes_exit_2_with_one_line(run: Run, images: Images, tmp_path: Path) -> None:
    index, unfinished = tmp_path / "index", tmp_path / "unfinished"
    model = load_model(run.config, run.ckpt)
    build_index(model, images.gallery, index, progress=False)
    build_index(model, images.gallery, unfinished, progress=False)
    card = json.loads((unfinished / "index.json").read_text())
    card["index"]["complete"] = False
    (unfinished / "index.json").write_text(json.dumps(card))
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8\xff not a JPEG")
    (tmp_path / "empty").mkdir()
    other = _other_checkpoint(run, tmp_path / "other.ckpt")
    build = ["index", "--config", str(run.config), "--images", str(images.gallery), "--no-progress"]
    query = ["--query", str(next(images.queries.iterdir()))]
    cases = {
        "missing index": (["search", "--index", str(tmp_path / "nowhere"), *query], "nowhere not found"),
        "foreign folder": (["search", "--index", str(images.gallery), *query], "is not a ranklit index"),
        "unfinished index": (["search", "--index", str(unfinished), *query], "run the same `ranklit index`"),
        "unreadable query": (["search", "--index", str(index), "--query", str(tmp_path / "broken.jpg")],
                             "broken.jpg"),
        "missing query": (["search", "--index", str(index), "--query", str(tmp_path / "no.png")], "no.png not found"),
        "another model": ([*build, "--ckpt_path", str(other), "--output", str(index)], "built by another model"),
        "index without config": ([*build[:1], *build[3:], "--ckpt_path", str(run.ckpt), "--output",
                                  str(tmp_path / "new")], "needs a config"),
        "no images": (["index", "--config", str(run.config), "--images", str(tmp_path / "none"), "--ckpt_path",
                       str(run.ckpt), "--output", str(tmp_path / "new")], "none: no such folder"),
        "folder without images": (["index", "--config", str(run.config), "--images", str(tmp_path / "empty"),
                                   "--ckpt_path", str(run.ckpt), "--output", str(tmp_path / "new")],
                                  "lists no image"),
        "not a checkpoint": (["index", "--config", str(run.config), "--images", str(images.gallery), "--ckpt_path",
                              str(tmp_path / "broken.jpg"), "--output", str(tmp_path / "new")],
                             "cannot be read as a checkpoint"),
        "faiss structure absent": (["search", "--index", str(index), *query, "--backend", "ivf"], "has no ivf"),
    }
    results = drive([args for args, _ in cases.values()], Path(__file__).resolve().parents[2], scratch=tmp_path)
    for (name, (_, expected)), result in zip(cases.items(), results, strict=True):
        lines = [line for line in result["stderr"].splitlines() if line.strip()]
        assert result["returncode"] == 2, (name, result["stderr"][-2000:])
        assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], (name, lines)
    assert not (tmp_path / "new").exists()


@pytest.mark.slow  # a fresh Python with torch, Lightning and faiss
def test_command_line_faiss_index_reports_its_recall_and_searches(run: Run, images: Images, tmp_path: Path) -> None:
    args = ["index", "--config", str(run.config), "--ckpt_path", str(run.ckpt), "--images", str(images.gallery),
            "--output", str(tmp_path / "index"), "--backend", "flat", "--evaluate", "--evaluate_k", "3",
            "--no-progress"]
    (built,) = drive([args], Path.cwd(), scratch=tmp_path)
    assert built["returncode"] == 0, built["stderr"][-3000:]
    assert "recall@3 of Flat (nprobe 16) vs exact search: 1.0000 over 24 queries" in built["stdout"], built["stdout"]
    card = json.loads((tmp_path / "index" / "index.json").read_text())
    assert card["index"]["backend"] == "flat" and card["index"]["evaluation"]["recall"] == 1.0
    from ranklit.deploy import Retriever

    faiss_hits = Retriever.from_index(tmp_path / "index").search(images.queries / sorted(images.originals)[0], k=3)
    exact_hits = Retriever.from_index(tmp_path / "index", backend="exact").search(faiss_hits[0][0].path, k=3)
    assert [h.path for h in faiss_hits[0]] == [h.path for h in exact_hits[0]]
    assert faiss_hits[0][0].path == str(images.originals[sorted(images.originals)[0]])


@pytest.mark.parametrize(("backend", "least"), [("flat", 1.0), ("ivf", 0.9), ("hnsw", 0.9), ("pq", 0.3)])
def test_faiss_backends_recall_against_the_exact_search(backend: str, least: float) -> None:
    """Clustered descriptors (2000 in 50 clusters, d = 32): the approximate top-10 against ranklit's exact one."""
    pytest.importorskip("faiss")
    generator = torch.Generator().manual_seed(0)
    centres = torch.randn(50, 32, generator=generator)
    gallery = torch.nn.functional.normalize(centres.repeat(40, 1) + 0.3 * torch.randn(2000, 32, generator=generator))
    queries = gallery[:200] + 0.05 * torch.randn(200, 32, generator=generator)
    exact = top_k(queries, gallery, 10)[1]
    structure = build_faiss_index(TensorDescriptors(gallery), factory_string(backend, 32, 2000, m=8 if backend == "pq"
                                  else None))
    recall = recall_at_k(faiss_search(structure, queries, 10, nprobe=8)[1], exact)
    assert least <= recall <= 1.0, recall
    if backend == "pq":
        assert recall < 1.0  # 8 bytes a vector lose something: the measure can tell

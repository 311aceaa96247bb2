"""``ranklit index`` + ``ranklit search`` and ``Retriever``: each query finds its duplicate first (score >= 0.999),
from the command line (subprocesses) and from Python; the exact search equals a brute-force ranking of the
checkpoint's own embeddings; an interrupted build resumes; mistakes are one line and exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from ranklit.data.images.transforms import test_transform
from ranklit.deploy import Retriever, build_index, load_model
from ranklit.errors import UserError
from ranklit.index import DescriptorShards
from ranklit.landmarks import learn_whitening
from ranklit.landmarks.postprocess import AlphaQueryExpansion, DatabaseAugmentation, LearntWhitening, apply_postprocess
from tests.ddp import scaled_timeout

from .conftest import Images, Run

K = 5


REPOSITORY = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ranklit.cli", *args], capture_output=True, text=True,
                          timeout=scaled_timeout(300),
                          env={**os.environ, "PYTHONPATH": str(REPOSITORY)})


@pytest.fixture(scope="module")
def index(run: Run, images: Images, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("index") / "index"
    build_index(load_model(run.config, run.ckpt), images.gallery, folder, block_rows=10, progress=False)
    return folder


@pytest.mark.slow  # two commands, each a fresh Python with torch and Lightning
def test_command_line_index_and_search_find_each_duplicate_first(run: Run, images: Images, tmp_path: Path) -> None:
    built = _cli("index", "--config", str(run.config), "--ckpt_path", str(run.ckpt), "--images", str(images.gallery),
                 "--output", str(tmp_path / "index"), "--batch_size", "8", "--no-progress")
    assert built.returncode == 0, built.stderr[-3000:]
    assert "indexed 24 images" in built.stdout
    found = _cli("search", "--index", str(tmp_path / "index"), "--query", str(images.queries), "--k", str(K),
                 "--json", "--output", str(tmp_path / "grid.png"))
    assert found.returncode == 0, found.stderr[-3000:]
    results = json.loads(found.stdout)
    assert sorted(Path(r["query"]).name for r in results) == sorted(images.originals)
    for result in results:
        best = result["results"]
        assert len(best) == K and [b["score"] for b in best] == sorted((b["score"] for b in best), reverse=True)
        assert best[0]["path"] == str(images.originals[Path(result["query"]).name]) and best[0]["score"] >= 0.999
        assert best[1]["score"] < 0.999  # the other images are not duplicates: the first place means something
    assert Image.open(tmp_path / "grid.png").size[0] > 100


def test_python_search_finds_each_duplicate_first_from_files_images_and_tensors(index: Path, images: Images) -> None:
    retriever = Retriever.from_index(index)
    names = sorted(images.originals)
    files = [images.queries / name for name in names]
    pil = [Image.open(f).convert("RGB") for f in files]
    uint8 = [torch.from_numpy(__import__("numpy").asarray(p).copy()).permute(2, 0, 1) for p in pil]
    for queries in (files, pil, uint8, retriever.embed(files)):
        hits = retriever.search(queries, k=K)
        assert [h[0].path for h in hits] == [str(images.originals[n]) for n in names]
        assert all(h[0].score >= 0.999 and len(h) == K for h in hits)


def test_exact_search_equals_brute_force_over_the_checkpoints_embeddings(run: Run, index: Path, images: Images) -> None:
    retriever = Retriever.from_index(index)
    transform = test_transform(32, 32)
    with torch.no_grad():
        net = run.net()
        gallery = net(torch.stack([transform(Image.open(p).convert("RGB")) for p in retriever.paths]))
        queries = net(torch.stack([transform(Image.open(images.queries / n).convert("RGB"))
                                   for n in sorted(images.originals)]))
    scores, rows = (queries @ gallery.T).topk(K, dim=1)
    hits = retriever.search(queries, k=K)
    assert [[h.path for h in found] for found in hits] == [[retriever.paths[r] for r in row] for row in rows.tolist()]
    torch.testing.assert_close(torch.tensor([[h.score for h in found] for found in hits]), scores, atol=1e-5, rtol=0)


def test_post_processing_equals_the_landmark_pipeline_on_the_gallery_in_memory(index: Path, images: Images) -> None:
    """Whitening learnt on the index, DBA, α-QE (the search's order) give the ranking of ``apply_postprocess`` on the
    gallery as a tensor, computed from scratch."""
    plain = Retriever.from_index(index)
    gallery = torch.cat([plain.embed([p]) for p in plain.paths])
    queries = plain.embed([images.queries / n for n in sorted(images.originals)])
    steps = [LearntWhitening(whitening=learn_whitening(gallery, power=0.5)), DatabaseAugmentation(k=3),
             AlphaQueryExpansion(k=3)]
    q, g = apply_postprocess(steps, queries, gallery)
    scores, rows = (q @ g.T).topk(K, dim=1)
    processed = Retriever.from_index(index, postprocess=[LearntWhitening(power=0.5), DatabaseAugmentation(k=3),
                                                         AlphaQueryExpansion(k=3)])
    hits = processed.search(queries, k=K)
    assert [[h.path for h in found] for found in hits] == [[plain.paths[r] for r in row] for row in rows.tolist()]
    torch.testing.assert_close(torch.tensor([[h.score for h in found] for found in hits]), scores, atol=1e-4, rtol=0)


def test_an_interrupted_build_resumes_from_its_last_complete_block(run: Run, images: Images, tmp_path: Path,
                                                                   index: Path) -> None:
    model = load_model(run.config, run.ckpt)
    folder = tmp_path / "index"
    build_index(model, images.gallery, folder, block_rows=10, progress=False)
    # as a kill during the last block leaves it: its manifest marked incomplete, the card not complete
    manifest = folder / "descriptors" / "block00002-rank0.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "complete": False}))
    card = json.loads((folder / "index.json").read_text())
    card["index"]["complete"] = False
    (folder / "index.json").write_text(json.dumps(card))
    with pytest.raises(UserError, match="unfinished"):
        Retriever.from_index(folder)
    first = {p: p.stat().st_mtime_ns for p in (folder / "descriptors").glob("block0000[01]*")}
    build_index(model, images.gallery, folder, block_rows=10, progress=False)
    assert {p: p.stat().st_mtime_ns for p in first} == first  # the complete blocks were not embedded again
    assert json.loads(manifest.read_text())["complete"] is True  # the cut block was embedded again
    queries = [images.queries / n for n in sorted(images.originals)]
    resumed, whole = Retriever.from_index(folder).search(queries, k=K), Retriever.from_index(index).search(queries, K)
    assert resumed == whole


def test_descriptors_of_another_size_are_refused(index: Path) -> None:
    with pytest.raises(UserError, match="size 7 given; this index's model gives 16"):
        Retriever.from_index(index).search(torch.randn(2, 7), k=3)


@pytest.mark.slow  # two processes (DDP on CPU), started by Lightning
def test_two_processes_index_the_same_descriptors(run: Run, images: Images, index: Path, tmp_path: Path) -> None:
    built = _cli("index", "--config", str(run.config), "--ckpt_path", str(run.ckpt), "--images", str(images.gallery),
                 "--output", str(tmp_path / "index"), "--devices", "2", "--accelerator", "cpu", "--block_rows", "10",
                 "--no-progress")
    assert built.returncode == 0, built.stderr[-3000:]
    assert len(list((tmp_path / "index" / "descriptors").glob("block*-rank1.json"))) == 3  # both ranks wrote blocks
    one, two = DescriptorShards(index / "descriptors"), DescriptorShards(tmp_path / "index" / "descriptors")
    assert sorted(two.index.tolist()) == list(range(24))  # every image once (the sampler's padding repeats dropped)
    torch.testing.assert_close(two.tensor()[two.index.argsort()], one.tensor()[one.index.argsort()], atol=1e-5, rtol=0)
    queries = [images.queries / n for n in sorted(images.originals)]
    assert [h[0].path for h in Retriever.from_index(tmp_path / "index").search(queries, k=1)] == [
        str(images.originals[n]) for n in sorted(images.originals)
    ]

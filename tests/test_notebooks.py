"""Every notebook runs end to end on tiny synthetic data and draws its figures; notebooks are committed clean.

The notebooks read ``RANKLIT_NOTEBOOK_FAST=1`` and shrink to a smoke run (``test_resnet``, 32-px images, one epoch).
They execute with nbclient in the ``python3`` kernel (jupyter_client runs it with this interpreter), in a temporary
working directory, and any cell error fails the test (``CellExecutionError`` names the cell and the traceback).
"""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient
from PIL import Image

from tests.ddp import scaled_timeout

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
# figures each notebook must draw (displayed matplotlib figures)
FIGURES = {"quickstart": 2, "rankings": 2, "embedding_space": 1, "surrogates": 3}


def _read(name: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)


def _figures(notebook: nbformat.NotebookNode) -> list[str]:
    return [
        output["data"]["image/png"]
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if "image/png" in output.get("data", {})
    ]


# the notebooks' RANKLIT_NOTEBOOK_FAST settings
FAST_DATASET = {"levels": 2, "num_coarse": 3, "fine_per_parent": 4, "images_per_class": 4, "image_size": 32}
FAST_EMBEDDING_DIM, FAST_QUERIES, FAST_TOP_K, FAST_BATCH_SIZES = 32, 3, 4, 3
NUMBER = r"(-?\d+\.\d+)"


def _stdout(notebook: nbformat.NotebookNode) -> str:
    return "".join(
        o.get("text", "") for c in notebook.cells for o in c.get("outputs", []) if o.get("output_type") == "stream"
    )


def _check_quickstart(text: str) -> None:
    keys = ["map_at_r", "map", "precision_at_1", "recall_at_1", "recall_at_4", "hap", "asi", "ndcg", "map_level1"]
    for key in keys:
        match = re.search(rf"^{key}\s+{NUMBER}\s+{NUMBER}$", text, re.MULTILINE)
        assert match, f"no '{key}' row in the metrics table:\n{text}"
        assert all(0.0 <= float(v) <= 1.0 for v in match.groups()), match.group(0)
    match = re.search(r"^RetrievalModule (\d+) parameters$", text, re.MULTILINE)
    assert match and int(match.group(1)) > 0


def _check_rankings(text: str) -> None:
    counts = re.findall(r"same class\s+(\d+)\s+same shape only\s+(\d+)\s+unrelated\s+(\d+)", text)
    assert len(counts) == 2, text  # one line per model
    for row in counts:  # every retrieved image falls in exactly one of the three groups
        assert sum(int(c) for c in row) == FAST_QUERIES * FAST_TOP_K, row
    rows = re.findall(rf"^.+?\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}$", text, re.MULTILINE)
    assert len(rows) == 2 and all(0.0 <= float(v) <= 1.0 for row in rows for v in row), text


def _check_embedding_space(text: str) -> None:
    from ranklit.data import SyntheticHierarchy

    match = re.search(r"embeddings \((\d+), (\d+)\) labels \((\d+), (\d+)\)", text)
    assert match, text
    n, dim, n_labels, levels = (int(v) for v in match.groups())
    assert n == n_labels == len(SyntheticHierarchy(split="test", **FAST_DATASET))
    assert (dim, levels) == (FAST_EMBEDDING_DIM, FAST_DATASET["levels"])


def _check_surrogates(text: str) -> None:
    rows = re.findall(rf"whole-set mAP {NUMBER}\s+gaps \[([^\]]*)\]", text)
    assert len(rows) == 2, text  # SupAP and ROADMAP
    for whole, gaps in rows:
        assert 0.0 <= float(whole) <= 1.0
        values = [float(g) for g in gaps.split(",")]
        assert len(values) == FAST_BATCH_SIZES and all(-1.0 <= g <= 1.0 for g in values), gaps


CHECKS = {
    "quickstart": _check_quickstart,
    "rankings": _check_rankings,
    "embedding_space": _check_embedding_space,
    "surrogates": _check_surrogates,
}


def _check_figures(figures: list[str]) -> None:
    """Every figure decodes to a drawing (not a blank canvas), and no two figures are the same picture."""
    arrays = [np.asarray(Image.open(io.BytesIO(base64.b64decode(f))).convert("L")) for f in figures]
    for array in arrays:
        assert min(array.shape) > 100 and array.std() > 5
    assert len({a.tobytes() for a in arrays}) == len(arrays)


def test_output_checks_cover_every_notebook() -> None:
    assert sorted(CHECKS) == sorted(FIGURES)


def test_every_notebook_is_executed_by_the_suite() -> None:
    assert sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb")) == sorted(FIGURES)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_notebook_is_committed_without_outputs(name: str) -> None:
    notebook = _read(name)
    nbformat.validate(notebook)
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    dirty = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"{name}.ipynb has outputs in cells {dirty}: clear them before committing"


@pytest.mark.slow  # a fresh kernel imports torch and Lightning, then trains for a few steps
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_notebook_runs_end_to_end(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKLIT_NOTEBOOK_FAST", "1")
    monkeypatch.setenv("WANDB_MODE", "offline")
    notebook = _read(name)
    client = NotebookClient(
        notebook, timeout=int(scaled_timeout(600)), kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    errors = [o for c in notebook.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    figures = _figures(notebook)
    assert len(figures) == FIGURES[name]
    _check_figures(figures)
    CHECKS[name](_stdout(notebook))

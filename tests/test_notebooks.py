"""Every notebook runs end to end on tiny synthetic data and draws its figures; notebooks are committed clean.

The notebooks read ``RANKLIT_NOTEBOOK_FAST=1`` and shrink to a smoke run (``test_resnet``, 32-px images, one epoch).
They execute with nbclient in the ``python3`` kernel (jupyter_client runs it with this interpreter), in a temporary
working directory, and any cell error fails the test (``CellExecutionError`` names the cell and the traceback).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

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
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    errors = [o for c in notebook.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    assert len(_figures(notebook)) == FIGURES[name]

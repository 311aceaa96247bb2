"""Generated at every docs build (mkdocs-gen-files): the figures from ``ranklit.viz``, the config reference page, the
losses index table and the losses' nav entries (from the ``@register_loss`` declarations), the metrics tables (from
the metrics' declarations), and checks that no loss,
metric or config is left without its page.

Run by ``mkdocs build`` / ``mkdocs serve``; nothing generated is committed, so the pages never drift from the code.
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import mkdocs_gen_files
import torch
from matplotlib.figure import Figure
from torch.nn.functional import normalize

import ranklit.losses
import ranklit.metrics
from ranklit.data import PKSampler
from ranklit.losses import list_losses, loss_entry
from ranklit.metrics import decomposability_gap
from ranklit.viz import gap_figure, step_functions_figure

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS))
import metric_tables  # noqa: E402  (docs/metric_tables.py, beside this file)


def _save(fig: Figure, name: str) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    with mkdocs_gen_files.open(f"figures/{name}", "wb") as out:
        out.write(buffer.getvalue())


def figures() -> None:
    """The surrogate step functions (ROADMAP Fig. 3) and a decomposability-gap curve (ROADMAP Fig. 5)."""
    _save(step_functions_figure(), "step_functions.png")
    _save(step_functions_figure(x_range=(-0.3, 0.3), tau=0.05), "step_functions_tau005.png")
    # Synthetic embeddings (no model): 40 classes of 8 points around random centres in 32 dimensions.
    gen = torch.Generator().manual_seed(0)
    labels = torch.arange(40).repeat_interleave(8)
    centres = normalize(torch.randn(40, 32, generator=gen), dim=1)
    batch_sizes = [8, 16, 32, 64, 128]
    gaps = {}
    for name, noise in (("tight classes (noise 0.15)", 0.15), ("overlapping classes (noise 0.3)", 0.3)):
        emb = normalize(centres[labels] + noise * torch.randn(len(labels), 32, generator=gen), dim=1)
        gaps[name] = []
        for b in batch_sizes:
            sampler = PKSampler(labels, p=b // 4, k=4, seed=0)
            gaps[name].append(decomposability_gap(emb, labels, [torch.tensor(x) for x in sampler])["gap"])
    _save(gap_figure(batch_sizes, gaps), "decomposability_gap.png")


def _header(path: Path) -> tuple[str, list[str]]:
    """The leading comment block of a config: its prose and the command lines (indented ``ranklit ...``)."""
    prose, commands = [], []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line[1:].strip()
        if re.match(r"^(\d+\.\s+)?`?ranklit ", text):
            commands.append(re.sub(r"^(\d+\.\s+)?`?|`$", "", text))
        else:
            prose.append(text)
    return " ".join(prose).strip(), commands


def _plain(text: str) -> str:
    """Markdown-escape a header's prose outside `code` spans: `[a][b]` is no reference link, `<image>` no HTML tag."""
    parts = re.split(r"(`[^`]*`)", text)
    escape = {"[": "\\[", "]": "\\]", "<": "&lt;", ">": "&gt;", "*": "\\*", "_": "\\_"}
    return "".join(p if p.startswith("`") else "".join(escape.get(c, c) for c in p) for p in parts)


def config_reference() -> None:
    """``configs.md``: every YAML of configs/ with its header comment (the paper, the table, the settings)."""
    lines = [
        "# Config reference",
        "",
        "Every experiment config shipped in `configs/`, with the header comment it carries (generated from the files "
        "at each docs build). Run one with `ranklit fit --config NAME.yaml` (a bare name is looked up in `configs/`); "
        "see [the CLI page](cli.md) for overrides and `--print_config`, and "
        "[Reproducing the papers](reproducing.md) for the numbers each one should reach.",
        "",
    ]
    for path in sorted((ROOT / "configs").glob("*.yaml")):
        prose, commands = _header(path)
        lines += [f"## `{path.name}`", "", _plain(prose) if prose else "(no header comment)", ""]
        if commands:
            lines += ["```bash", *commands, "```", ""]
    with mkdocs_gen_files.open("configs.md", "w") as out:
        out.write("\n".join(lines))


def _loss_page(name: str) -> Path:
    """The page of docs/api/losses/ that documents the loss ``name``: ``::: ranklit.losses.NAME`` on a line, or
    ``::: ranklit.losses.MODULE.NAME`` (a loss whose name is not imported statically by ``ranklit/losses/__init__.py``
    is found by mkdocstrings in its module only)."""
    pattern = re.compile(rf"^::: ranklit\.losses\.(\w+\.)?{name}$", flags=re.M)
    pages = [path for path in sorted((DOCS / "api" / "losses").glob("*.md")) if pattern.search(path.read_text())]
    if not pages:
        raise SystemExit(f"docs/gen_pages.py: `ranklit.losses.{name}` has no page in docs/api/losses/")
    return pages[0]


def losses_index() -> None:
    """The losses table of ``api/losses/index.md`` and the losses' entries of the nav, from the registry: one row and
    one entry per ``@register_loss`` declaration (``ranklit.losses.list_losses()``), in the order of the names."""
    rows = ["| loss | what it optimises | paper |", "|---|---|---|"]
    entries = []
    for name in list_losses():
        entry, page = loss_entry(name), _loss_page(name)
        rows.append(f"| [{name}]({page.name}) | {entry.summary} | {entry.paper} |")
        entries.append({name: f"api/losses/{page.name}"})
    index = (DOCS / "api" / "losses" / "index.md").read_text()
    marker = next(line for line in index.splitlines() if line.startswith("<!-- losses-table"))
    with mkdocs_gen_files.open("api/losses/index.md", "w") as out:
        out.write(index.replace(marker, "\n".join(rows)))
    section = _losses_section(mkdocs_gen_files.config["nav"])
    if section is None:
        raise SystemExit("docs/gen_pages.py: mkdocs.yml's nav has no section holding api/losses/index.md")
    position = section.index("api/losses/index.md") + 1
    section[position:position] = entries


def _losses_section(nav: list) -> list | None:
    """The list of the nav that holds ``api/losses/index.md``."""
    for item in nav:
        for children in item.values() if isinstance(item, dict) else ():
            if isinstance(children, list):
                found = children if "api/losses/index.md" in children else _losses_section(children)
                if found is not None:
                    return found
    return None


def metrics_tables() -> None:
    """The metrics table of the spec page and of the metrics' API page, from the metrics' declarations
    (docs/metric_tables.py)."""
    for page in ("spec.md", "api/metrics/index.md"):
        with mkdocs_gen_files.open(page, "w") as out:
            out.write(metric_tables.fill((DOCS / page).read_text()))


def check_coverage() -> None:
    """Fail the build when a public loss or metric has no API page, or a config is missing from the reproduction."""
    problems = []
    pages = "\n".join(p.read_text() for p in (DOCS / "api").rglob("*.md"))
    for module in (ranklit.losses, ranklit.metrics):
        for name in module.__all__:
            if not re.search(rf"^::: {module.__name__}\.(\w+\.)?{name}$", pages, flags=re.M):
                problems.append(f"`{module.__name__}.{name}` has no API page (add `::: {module.__name__}.{name}`)")
    reproducing = (DOCS / "reproducing.md").read_text()
    for path in sorted((ROOT / "configs").glob("*.yaml")):
        if f"`{path.name}`" not in reproducing:
            problems.append(f"configs/{path.name} has no row in docs/reproducing.md")
    if problems:
        raise SystemExit("docs/gen_pages.py:\n  " + "\n  ".join(problems))


check_coverage()
losses_index()
metrics_tables()
figures()
config_reference()

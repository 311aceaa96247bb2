"""``ranklit data prepare NAME --root DIR``: the command's face over :func:`ranklit.data.prepare_dataset` (its
options, help listing every dataset, the lines printed once prepared, Ctrl-C as exit 130)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ranklit.data import DATASET_CATALOG, prepare_dataset


def _epilog() -> str:
    rows = [
        f"  {e.name:<13} {e.title}\n  {'':<13} {e.size}; {e.homepage}\n  {'':<13} terms: {e.terms}\n"
        f"  {'':<13} e.g. --root data/{e.folder}"
        for e in DATASET_CATALOG.values()
    ]
    return "datasets (NAME, title, download size, source, terms):\n" + "\n".join(rows) + "\n\nSee docs/datasets.md."


def prepare_parser() -> argparse.ArgumentParser:
    """The options of ``ranklit data prepare`` (the keywords of :func:`ranklit.data.prepare_dataset`)."""
    parser = argparse.ArgumentParser(
        prog="ranklit data prepare",
        description="Download, verify, unpack and lay out a benchmark dataset in one command.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # `--sha 5` is not `--sha256 5` (no ranklit command takes an abbreviated option)
    )
    parser.add_argument("name", metavar="NAME", help=f"the dataset: {', '.join(DATASET_CATALOG)}")
    parser.add_argument("--root", required=True, type=Path, help="the folder to prepare (created; must be empty)")
    parser.add_argument("--source", action="append", default=[], metavar="URL|PATH",
                        help="a mirror's address or a file already on disk (repeat for each file of the dataset), "
                        "or a folder holding the files")
    parser.add_argument("--sha256", action="append", default=[], metavar="HEX",
                        help="the expected SHA-256 of each --source (a mirror's repacked archive)")
    parser.add_argument("--retries", type=int, default=5, help="tries after a failed download without progress")
    parser.add_argument("--keep-archives", action="store_true", help="keep the downloaded archives")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def main(args: list[str]) -> None:
    """``ranklit data prepare ...`` (``args`` after ``prepare``); Ctrl-C exits with 130 in one line."""
    options = prepare_parser().parse_args(args)
    try:
        prepared = prepare_dataset(
            options.name,
            options.root,
            source=options.source,
            sha256=options.sha256,
            retries=options.retries,
            keep_archives=options.keep_archives,
            progress=not options.no_progress,
        )
    except KeyboardInterrupt:
        sys.stderr.write("interrupted: nothing was moved into --root; run the same command to continue (a partial "
                         "download resumes).\n")
        raise SystemExit(130) from None
    entry, data_root = prepared.entry, prepared.data_root
    state = "already prepared (its record verified; nothing downloaded)" if prepared.already_prepared else "prepared"
    lines = [f"{entry.name} {state} in {prepared.path}: {'; '.join(prepared.layout)}", f"--data.root {data_root}"]
    if entry.configs:
        example = f"ranklit data check --config {entry.configs[0]} --data.root {data_root}"
        lines.append(f"configs: {', '.join(entry.configs)}, e.g. `{example}`")
    if entry.usage:
        lines.append(f"note: {entry.usage.replace('ROOT', str(data_root))}")
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()

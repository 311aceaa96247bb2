"""``ranklit data check --config CONFIG [--config MORE] [--KEY VALUE ...]``: read every image before training.

The configs and options are parsed by the ``ranklit fit`` parser itself (several ``--config`` merged in order,
``--data.root`` and any other override, the shipped-config lookup; an invalid config is refused as ``fit`` refuses
it), then only the ``data`` section is built (no model, no trainer, nothing downloaded): the datasets run their index
checks (:mod:`ranklit.data.datasets.validation`: missing, empty or twice-listed files, bad CSV rows, paths outside
``--data.root``, misplaced images; any of them is one ``error:`` line and exit code 2). Then every image of every
split is decoded as training or testing would (the query crop and the gallery of a Revisited test set included), with
a progress bar, and the summary lists, per split, the images and classes, images per class (min / median / max),
image sizes and modes, the unreadable files with their cause, the files the datasets skipped (named and counted),
with hierarchical labels the classes per level and whether they form a tree (each class under one coarser class),
files of identical content with different labels within a split, then the files of identical content in the
training split and an evaluation split (a leak) and the batch plan (sampler, P × K, batches per epoch, its
warnings). Each split is named by its role and, where they differ, by its dataset's own split ("val (split 'test')").
Exit code 0 when nothing is wrong, 2 when an unreadable file, a link to no file, labels that are not a tree,
identical files with different labels, a leak or a sampler error is found, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from jsonargparse import Namespace
from lightning.pytorch.cli import LightningArgumentParser

from ranklit._compat.lightning import parse_only
from ranklit.cli._errors._surface import BUILD_ERRORS, as_user_error
from ranklit.data import BrokenLinksWarning, RetrievalDataModule
from ranklit.data.inspection import inspect_split, leaks, report_lines, splits_with_images
from ranklit.errors import UserError
from ranklit.functional.inputs import check_hierarchy

__all__ = ["main"]

DATASETS = ("train_dataset", "val_dataset", "test_dataset", "gallery_dataset")


def _data_only(config: Any) -> RetrievalDataModule:
    """Instantiate the ``data`` section of a parsed ``fit`` config (``data.root`` already linked into the datasets)."""
    parser = LightningArgumentParser(exit_on_error=False)
    parser.add_lightning_class_args(RetrievalDataModule, "data")
    try:
        return parser.instantiate(Namespace(data=config.data)).data
    except BUILD_ERRORS as error:
        raise as_user_error(error) from error


def _datamodule(args: list[str]) -> RetrievalDataModule:
    """``ranklit fit <args>`` parsed exactly as ``fit`` parses it (the same CLI class, run nothing); only the
    datamodule built."""
    from ranklit.cli._app import RanklitCLI, command_line  # the command's own CLI
    from ranklit.models import RetrievalModule

    class DataCheckCLI(RanklitCLI):
        datamodule: RetrievalDataModule

        def before_checkpoint_settings(self) -> Any:
            return None  # a data check resumes nothing

        def instantiate_classes(self) -> None:
            self.datamodule = _data_only(self.config[self.subcommand])

    with command_line(["fit", *args]):
        cli = parse_only(DataCheckCLI)(RetrievalModule, RetrievalDataModule)
    return cli.datamodule


def _plan(datamodule: RetrievalDataModule) -> tuple[str, bool]:
    train = datamodule.train_dataset
    if train is None or datamodule.batch_sampler is None:
        return "no training set or batch sampler in this config", False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            sampler = datamodule.batch_sampler(train.labels)
        except (ValueError, TypeError) as error:
            return f"PROBLEM: `data.batch_sampler` cannot be built: {error}", True
    p, k, size = (getattr(sampler, name, None) for name in ("p", "k", "batch_size"))
    shape = f"P x K = {p} x {k} = {size} images" if p is not None else f"{size} images"
    text = (
        f"{type(sampler).__name__}, {shape} per batch, {len(sampler)} batches per epoch "  # type: ignore[arg-type]
        f"(the training set has {len(train.labels)} images)"
    )
    return "; ".join([text, *(f"note: {w.message}" for w in caught)]), False


def _not_a_tree(name: str, data: Any) -> str | None:
    """The problem line of a split whose hierarchical labels are not a tree (a fine class under two coarser ones),
    naming the labels as the dataset's files write them (its ``class_names``), not the relabelled ids."""
    labels = getattr(data, "labels", None)
    if labels is None or labels.dim() != 2 or labels.shape[1] < 2:
        return None
    try:
        check_hierarchy(labels, f"{name.removesuffix('_dataset')} labels", getattr(data, "class_names", None))
    except ValueError as error:
        return f"PROBLEM: {error}"
    return None


def main(args: list[str]) -> None:
    """``ranklit data check ...`` (``args`` after ``check``); exits with 0 or 2."""
    parser = argparse.ArgumentParser(
        prog="ranklit data check",
        description=__doc__.splitlines()[0],
        epilog="Every option of `ranklit fit` is accepted (--config several times, --data.root DIR, --data.*).",
        allow_abbrev=False,  # `--no-prog` is left to the fit parser, which refuses it (no abbreviated option)
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    options, rest = parser.parse_known_args(args)
    if not any(a in ("--config", "-c") or a.startswith("--config=") for a in rest):
        raise UserError("`ranklit data check` needs a config (`--config FILE`; several merge as for `ranklit fit`).")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        datamodule = _datamodule(rest)
    notes = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, UserWarning)))
    broken = [str(w.message) for w in caught if issubclass(w.category, BrokenLinksWarning)]
    splits = [part for name in DATASETS for part in splits_with_images(name, getattr(datamodule, name))]
    reports = [inspect_split(name, data, not options.no_progress) for name, data in splits]
    leaked = leaks(reports)
    plan, sampler_problem = _plan(datamodule)
    lines = report_lines(reports, leaked, plan)
    not_trees = [problem for name, data in splits if (problem := _not_a_tree(name, data)) is not None]
    lines += not_trees
    lines += [f"{'PROBLEM' if note in broken else 'note'}: {note}" for note in notes]
    sys.stdout.write("\n".join(lines) + "\n")
    problems = sampler_problem or bool(leaked) or bool(broken) or bool(not_trees)
    problems = problems or any(r.unreadable or r.conflicts for r in reports)
    raise SystemExit(2 if problems else 0)

"""``ranklit fit --help``: the options a new run sets, on one screen; ``ranklit fit --help all``: every option.

The run commands' parser lists about 880 lines of options, most of them Lightning's trainer settings a run rarely
touches, so the first screen showed none of what a newcomer sets. jsonargparse and LightningCLI offer no shorter
listing (their conventions are the whole ``--help`` and a class's own options with ``--KEY.help CLASS``), so
:func:`brief_help` shows the parser's own entries (the same help strings, types and defaults) for the keys of
:data:`COMMON` only, in the parser's groups, then how to set a class's arguments and how to get the rest:
``--help all`` (the full listing, unchanged) and ``--KEY.help CLASS``.

Example:
    >>> full_help_asked(["ranklit", "fit", "--help", "all"]), full_help_asked(["ranklit", "fit", "--help"])
    (True, False)
"""

from __future__ import annotations

import argparse
import copy
import itertools
from collections.abc import Callable, Sequence

__all__ = ["COMMON", "EXAMPLES", "FULL", "brief_help", "full_help_asked", "is_run_parser"]

FULL = "all"
"""The word after ``--help`` that asks for every option."""

COMMON = frozenset({
    "help", "config", "print_config", "seed_everything",  # the command line itself
    "resume", "ckpt_path", "baseline_validation", "predictions_path", "overwrite",  # the run
    "trainer.max_epochs", "trainer.accelerator", "trainer.devices", "trainer.precision",  # where and how long
    "model.net", "model.loss", "model.optimizer", "model.lr_scheduler", "model.metric",  # what is trained
    "data.root", "data.train_dataset", "data.val_dataset", "data.test_dataset", "data.batch_sampler",  # on what
    "data.crop_size", "data.eval_batch_size", "data.num_workers",
})
"""The keys ``--help`` shows: those a new run sets (its config's own, and the usual overrides)."""

EXAMPLES = (
    "--model.optimizer.init_args.lr 1e-4",
    "--data.train_dataset.init_args.split train",
    "--data.batch_sampler.init_args.p 8 --data.batch_sampler.init_args.k 4",
)
"""Keys inside a configured class (its ``init_args``), set as any other (``tests/cli/test_newcomer.py`` parses them)."""


def full_help_asked(argv: Sequence[str]) -> bool:
    """Whether the command line asks for every option: ``--help all`` (or ``-h all``)."""
    return any(arg in ("-h", "--help") and following == FULL for arg, following in itertools.pairwise(argv))


def is_run_parser(parser: argparse.ArgumentParser) -> bool:
    """Whether ``parser`` is a run command's (it has the model's and the trainer's keys), not the root parser nor
    the parser jsonargparse builds for ``--KEY.help CLASS`` (whose listing is a class's own, always whole)."""
    keys = {action.dest for action in parser._actions}
    return {"model.net", "trainer.max_epochs"} <= keys


def brief_help(parser: argparse.ArgumentParser, format_help: Callable[[], str]) -> str:
    """``parser``'s help (``format_help``: its own formatter, so entries read as in the full listing) restricted to
    the :data:`COMMON` keys, with the ways to the rest at the end."""
    command = parser.prog.replace(" [options]", "")
    total = sum(1 for action in parser._actions if action.option_strings and action.help != argparse.SUPPRESS)
    groups, usage, description = parser._action_groups, parser.usage, parser.description
    kept = []
    for group in groups:
        shown = [action for action in group._group_actions if action.dest in COMMON]
        if shown:
            brief = copy.copy(group)
            brief._group_actions = shown
            kept.append(brief)
    shown_count = sum(len(group._group_actions) for group in kept)
    parser._action_groups = kept
    parser.usage = f"{command} --config CONFIG [--KEY VALUE ...]"
    parser.description = (
        f"{description or ''} These are the {shown_count} options a new run usually sets, of {total}: "
        f"`{command} --help {FULL}` lists every one (Lightning's trainer settings, the evaluation, the checkpoints, "
        "...)."
    ).strip()
    try:
        text = format_help()
    finally:
        parser._action_groups, parser.usage, parser.description = groups, usage, description
    examples = "\n".join(f"  {command} --config CONFIG {example}" for example in EXAMPLES)
    return (
        f"{text.rstrip()}\n\nA key inside a configured class (its init_args) is set the same way:\n{examples}\n"
        f"A class's own options: `{command} --KEY.help CLASS` (e.g. `--model.loss.help SupAPLoss`).\n"
        f"Every option: `{command} --help {FULL}`.\n"
    )

"""Quiet by default: the warnings and tips of Lightning and torch that a ranklit user did not cause, each filtered by
its exact message and the module that emits it (never a blanket filter), with the versions it was checked against.

Installed by the ``ranklit`` command line (:func:`install`) for its own process only; a library user importing
ranklit keeps every warning. What is filtered, and why it does not concern the user:

- torch 2.9 (checked 2.9-2.10) deprecates ``LeafSpec``, which Lightning 2.5-2.6's ``utilities/_pytree.py`` still
  uses: a ``FutureWarning`` for Lightning's maintainers.
- Lightning 2.6's "💡 Tip" log lines advertising ``litlogger``/``litmodels``.
- Lightning's "Previous log files in this directory will be deleted" of ``CSVLogger``: ranklit writes each run into
  a new ``version_<n>`` and, on ``--resume``, keeps and continues ``metrics.csv`` (``ranklit.cli._runs``).
- On ``fit --resume``/``--ckpt_path``: ModelCheckpoint's "Checkpoint directory ... exists and is not empty" (the
  resumed run continues its own ``checkpoints/``).
- For ``test``/``validate``/``predict`` from a training checkpoint: "Please add the following callbacks:
  ['ResumableTraining', 'FaultTolerance']" (ranklit's training-state callbacks, which evaluation does not need; with
  the training config's ``ModelCheckpoint``/``EarlyStopping`` too, absent from an evaluation config such as
  ``revisited_eval.yaml``; any other callback is still named) and
  ModelCheckpoint's "The dirpath has changed" (nothing is trained, so nothing is checkpointed).
"""

from __future__ import annotations

import logging
import warnings

__all__ = ["install"]

# the training-only callbacks whose state a training checkpoint holds: ranklit's, and Lightning's checkpoint and
# early-stopping callbacks (their state key is repr'd with either quote, as it holds quotes of its own)
_RANKLIT_CALLBACKS = (
    r"(?:'(?:ResumableTraining|FaultTolerance)'|\"(?:ModelCheckpoint|EarlyStopping)\{[^\"]*\}\""
    r"|'(?:ModelCheckpoint|EarlyStopping)\{[^']*\}')"
)
_ALWAYS = [
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated", FutureWarning, r"lightning\.pytorch\.utilities\._pytree"),
    (r"Experiment logs directory .* exists and is not empty\. Previous log files", UserWarning, r"lightning\."),
]
_EVALUATION = [
    (
        rf"Be aware that when using `ckpt_path`, callbacks .*: \[{_RANKLIT_CALLBACKS}(, {_RANKLIT_CALLBACKS})*\]\.$",
        UserWarning,
        r"lightning\.pytorch\.trainer\.call",
    ),
    (r"The dirpath has changed from ", UserWarning, r"lightning\.pytorch\.callbacks\.model_checkpoint"),
]
_RESUME = [(r"Checkpoint directory .* exists and is not empty\.$", UserWarning, r"lightning\.pytorch\.callbacks\.")]


class _NoAdvertisement(logging.Filter):
    """Drops Lightning's "💡 Tip: ... try installing [litlogger|litmodels]" records."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        return not (message.startswith("💡 Tip:") and ("litlogger" in message or "litmodels" in message))


def install(args: list[str]) -> None:
    """Filter, in this process, the warnings listed in the module docstring (those of evaluation for ``test``,
    ``validate`` and ``predict`` only, that of resuming for ``fit`` with ``--resume``/``--ckpt_path``), for the
    command line ``args``.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     install(["fit", "--config", "quickstart.yaml"])
        ...     warnings.warn_explicit("`isinstance(treespec, LeafSpec)` is deprecated, use ...", FutureWarning,
        ...                            "_pytree.py", 21, module="lightning.pytorch.utilities._pytree")
        ...     warnings.warn("`isinstance(treespec, LeafSpec)` is deprecated (from elsewhere)", FutureWarning)
        >>> [str(w.message) for w in caught]
        ['`isinstance(treespec, LeafSpec)` is deprecated (from elsewhere)']
    """
    subcommand = args[0] if args else None
    resumed = subcommand == "fit" and any(a.startswith(("--resume", "--ckpt_path")) for a in args)
    rules = _ALWAYS + (_EVALUATION if subcommand in ("test", "validate", "predict") else []) + (_RESUME * resumed)
    for message, category, module in rules:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _NoAdvertisement) for f in logger.filters):
            logger.addFilter(_NoAdvertisement())

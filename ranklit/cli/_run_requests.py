"""Run options that only make sense together, and the saved config of a run as a fresh-run config.

``ranklit fit`` refuses, before anything is built (one line, exit code 2):

- ``--resume true`` with ``--ckpt_path FILE``: ``--resume`` picks the newest checkpoint of the newest run, which is
  not ``FILE``; give one of them (``--ckpt_path FILE`` alone continues the run whose ``checkpoints/`` holds
  ``FILE``, from that file; ``--ckpt_path last`` is ``--resume true``);
- ``--resume_new_rates`` without ``--resume true`` or ``--ckpt_path``: there is no checkpoint whose rates it would
  replace, and a fresh run takes the config's rates anyway.

``ranklit test``, ``validate`` and ``predict`` refuse ``--resume`` and ``--resume_new_rates`` (they continue a
``fit``; these commands read the checkpoint named by ``--ckpt_path``), instead of ignoring them silently.

Each ``fit`` saves its resolved config as ``config.yaml`` in its run folder (:class:`ranklit.cli._runs.RunConfigSaver`)
through :func:`fresh_run_config`: ``resume``, ``ckpt_path`` and ``resume_new_rates`` back to their defaults and,
for a resumed run, the logger's ``version`` unset, so ``ranklit fit --config <run>/config.yaml`` starts a new run
with the same settings instead of appending to the old one (continue that one with ``--resume true``).

Example:
    >>> from jsonargparse import Namespace
    >>> saved = fresh_run_config(Namespace(resume=True, ckpt_path="runs/q/version_0/checkpoints/last.ckpt",
    ...     resume_new_rates=["model.head_lr"], trainer=Namespace(logger=Namespace(init_args=Namespace(version=0)))))
    >>> saved.resume, saved.ckpt_path, saved.resume_new_rates, saved.trainer.logger.init_args.version
    (False, None, [], None)
"""

from __future__ import annotations

from typing import Any

from ranklit.errors import UserError

__all__ = ["check_run_options", "fresh_run_config"]


def check_run_options(config: Any, subcommand: str = "fit") -> None:
    """Refuse the combinations of ``--resume``, ``--ckpt_path`` and ``--resume_new_rates`` that would do other than
    asked by ``ranklit <subcommand>`` (module docstring)."""
    resume, ckpt_path, new_rates = config.get("resume"), config.get("ckpt_path"), config.get("resume_new_rates")
    if subcommand != "fit" and (resume or new_rates):
        option = f"--resume {str(resume).lower()}" if resume else "--resume_new_rates"
        raise UserError(
            f"`{option}` continues an interrupted `ranklit fit`; `ranklit {subcommand}` reads the checkpoint named by "
            "`--ckpt_path FILE` (e.g. runs/NAME/version_N/checkpoints/last.ckpt): drop it and name the file."
        )
    if resume and ckpt_path not in (None, "last"):
        raise UserError(
            f"`--resume true` continues from the newest checkpoint of the newest run, not from `--ckpt_path "
            f"{ckpt_path}`: give `--ckpt_path {ckpt_path}` alone to continue from that file, or `--resume true` alone."
        )
    if new_rates and not (resume or ckpt_path):
        raise UserError(
            f"`--resume_new_rates {list(new_rates)}` changes the rates of a resumed run, and this run starts fresh "
            "(no `--resume true` or `--ckpt_path`): add `--resume true`, or drop `--resume_new_rates` (a fresh run "
            "takes the config's rates)."
        )


def fresh_run_config(config: Any) -> Any:
    """A copy of a run's config that starts a new run when given to ``ranklit fit --config`` (module docstring)."""
    fresh = config.clone()
    resumed = bool(config.get("resume") or config.get("ckpt_path"))
    for key, default in (("resume", False), ("ckpt_path", None), ("resume_new_rates", [])):
        if key in fresh:
            fresh[key] = default
    logger = fresh.get("trainer", {}).get("logger") if "trainer" in fresh else None
    for one in logger if isinstance(logger, list) else [logger]:
        init_args = getattr(one, "init_args", None)
        if resumed and init_args is not None and "version" in init_args:
            init_args.version = None
    return fresh

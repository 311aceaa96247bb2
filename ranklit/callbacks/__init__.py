"""Every Lightning callback of ranklit, one file each (the ``ranklit`` command line adds most of them to a run).

- :class:`ResumableTraining` (``resume.py``): the training state Lightning does not checkpoint; :class:`ResumeRefused`.
- :class:`RunCheckpoint` (``checkpoints.py``): ``last.ckpt`` on a schedule, rotated, written atomically.
- :class:`FaultTolerance` (``faults.py``): non-finite stops and ``interrupted.ckpt`` on a signal or an exception.
- :class:`RunLock` (``locks.py``): one writer per run folder (:func:`acquire_run_lock`, :func:`release_run_locks`,
  :class:`RunLocked`, the file :data:`LOCK_FILE`).
- :class:`EvaluationStops` (``evaluation_stops.py``): a signal during validation or test stops at the next batch.
- :class:`NewLearningRates` (``new_rates.py``): other learning rates on ``--resume`` (the settings:
  :data:`RATE_SETTINGS`).
- :class:`RankingGridLogger` (``ranking_images.py``): a grid of validation queries and their top-k, logged.
- :class:`EmbeddingWriter` (``predictions.py``): ``ranklit predict``'s shards on disk; :func:`load_predictions`,
  :func:`count_rows`.
"""

from ranklit.callbacks._checkpoints import RunCheckpoint
from ranklit.callbacks._evaluation_stops import EvaluationStops
from ranklit.callbacks._faults import FaultTolerance
from ranklit.callbacks._locks import LOCK_FILE, RunLock, RunLocked, lock_output
from ranklit.callbacks._locks import acquire as acquire_run_lock
from ranklit.callbacks._locks import put_back as put_back_run_lock
from ranklit.callbacks._locks import release_all as release_run_locks
from ranklit.callbacks._new_rates import RATE_SETTINGS, NewLearningRates
from ranklit.callbacks._predictions import EmbeddingWriter, count_rows, load_predictions
from ranklit.callbacks._ranking_images import RankingGridLogger
from ranklit.callbacks._resume import ResumableTraining, ResumeRefused
from ranklit.callbacks._training_stops import TrainingStops

__all__ = [
    "LOCK_FILE",
    "RATE_SETTINGS",
    "EmbeddingWriter",
    "EvaluationStops",
    "FaultTolerance",
    "NewLearningRates",
    "RankingGridLogger",
    "ResumableTraining",
    "ResumeRefused",
    "RunCheckpoint",
    "RunLock",
    "RunLocked",
    "TrainingStops",
    "acquire_run_lock",
    "count_rows",
    "load_predictions",
    "lock_output",
    "put_back_run_lock",
    "release_run_locks",
]

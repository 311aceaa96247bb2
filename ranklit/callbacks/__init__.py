"""Every Lightning callback of ranklit, one file each (the ``ranklit`` command line adds most of them to a run).

- :class:`ResumableTraining` (``resume.py``): the training state Lightning does not checkpoint; :class:`ResumeRefused`.
- :class:`RunCheckpoint` (``checkpoints.py``): ``last.ckpt`` on a schedule, rotated, written atomically.
- :class:`FaultTolerance` (``faults.py``): non-finite stops and ``interrupted.ckpt`` on a signal or an exception.
- :class:`RunLock` (``locks.py``): one writer per run folder.
- :class:`NewLearningRates` (``new_rates.py``): other learning rates on ``--resume``.
- :class:`RankingGridLogger` (``ranking_images.py``): a grid of validation queries and their top-k, logged.
- :class:`EmbeddingWriter` (``predictions.py``): ``ranklit predict``'s shards on disk; :func:`load_predictions`.
"""

from ranklit.callbacks._checkpoints import RunCheckpoint
from ranklit.callbacks._faults import FaultTolerance
from ranklit.callbacks._locks import RunLock
from ranklit.callbacks._new_rates import NewLearningRates
from ranklit.callbacks._predictions import EmbeddingWriter, load_predictions
from ranklit.callbacks._ranking_images import RankingGridLogger
from ranklit.callbacks._resume import ResumableTraining, ResumeRefused

__all__ = [
    "EmbeddingWriter",
    "FaultTolerance",
    "NewLearningRates",
    "RankingGridLogger",
    "ResumableTraining",
    "ResumeRefused",
    "RunCheckpoint",
    "RunLock",
    "load_predictions",
]

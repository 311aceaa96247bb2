"""Training mechanics: DDP gather, cross-batch memory, multistage backprop, manual optimisation, stop signals.

The Lightning callbacks (resume, faults, checkpoints, ...) are in :mod:`ranklit.callbacks`.
"""

from ranklit._moved import moved_getattr
from ranklit.training._checkpoint_io import SafeCheckpointIO, use_safe_checkpoint_io
from ranklit.training._distributed import average_gradients, gather_retrieval_set, gather_with_grad, is_distributed
from ranklit.training._manual import manual_optimization_step, prepare_ddp, step_lr_schedulers
from ranklit.training._memory import CrossBatchMemory
from ranklit.training._multistage import MultistageBackprop, multistage_backward
from ranklit.training._objective import RankingObjective, ranking_objective
from ranklit.training._parent_watch import watch_parent
from ranklit.training._slurm import requeue_job, slurm_plugins, unrequested_hpc_checkpoints

__all__ = [
    "CrossBatchMemory",
    "MultistageBackprop",
    "RankingObjective",
    "SafeCheckpointIO",
    "average_gradients",
    "gather_retrieval_set",
    "gather_with_grad",
    "is_distributed",
    "manual_optimization_step",
    "multistage_backward",
    "prepare_ddp",
    "ranking_objective",
    "requeue_job",
    "slurm_plugins",
    "step_lr_schedulers",
    "unrequested_hpc_checkpoints",
    "use_safe_checkpoint_io",
    "watch_parent",
]

__getattr__ = moved_getattr(__name__)  # a name that moved says where (ranklit/_moved.py)

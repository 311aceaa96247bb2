"""Training mechanics: DDP gather, cross-batch memory, multistage backprop, manual optimisation, stop signals.

The Lightning callbacks (resume, faults, checkpoints, ...) are in :mod:`ranklit.callbacks`.
"""

from ranklit.training._distributed import average_gradients, gather_retrieval_set, gather_with_grad, is_distributed
from ranklit.training._memory import CrossBatchMemory
from ranklit.training._multistage import MultistageBackprop, multistage_backward
from ranklit.training._objective import RankingObjective, ranking_objective

__all__ = [
    "CrossBatchMemory",
    "MultistageBackprop",
    "RankingObjective",
    "average_gradients",
    "gather_retrieval_set",
    "gather_with_grad",
    "is_distributed",
    "multistage_backward",
    "ranking_objective",
]

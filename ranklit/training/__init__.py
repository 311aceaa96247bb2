"""Training at scale: DDP gather, cross-batch memory, multistage backprop, resumable and fault-tolerant runs."""

from ranklit.training.checkpoints import RunCheckpoint
from ranklit.training.distributed import average_gradients, gather_retrieval_set, gather_with_grad, is_distributed
from ranklit.training.faults import FaultTolerance
from ranklit.training.memory import CrossBatchMemory
from ranklit.training.multistage import MultistageBackprop, multistage_backward
from ranklit.training.objective import RankingObjective, ranking_objective
from ranklit.training.resume import ResumableTraining, ResumeRefused

__all__ = [
    "CrossBatchMemory",
    "FaultTolerance",
    "MultistageBackprop",
    "RankingObjective",
    "ResumableTraining",
    "ResumeRefused",
    "RunCheckpoint",
    "average_gradients",
    "gather_retrieval_set",
    "gather_with_grad",
    "is_distributed",
    "multistage_backward",
    "ranking_objective",
]

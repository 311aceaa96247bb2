"""Backbones, pooling, embedding head and the ``RetrievalModule``."""

from ranklit.models.backbones import EmbeddingNet, create_backbone
from ranklit.models.module import RetrievalModule
from ranklit.models.pooling import GeM, GlobalPool
from ranklit.models.predictions import EmbeddingWriter, load_predictions
from ranklit.models.ranking_images import RankingGridLogger
from ranklit.models.schedules import WarmupCosineLR

__all__ = [
    "EmbeddingNet",
    "EmbeddingWriter",
    "GeM",
    "GlobalPool",
    "RankingGridLogger",
    "RetrievalModule",
    "WarmupCosineLR",
    "create_backbone",
    "load_predictions",
]

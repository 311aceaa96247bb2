"""Backbones, pooling, embedding head, the learning-rate schedule and the ``RetrievalModule``."""

from ranklit.models.backbones import EmbeddingNet, create_backbone
from ranklit.models.module import RetrievalModule
from ranklit.models.pooling import GeM, GlobalPool
from ranklit.models.schedules import WarmupCosineLR

__all__ = [
    "EmbeddingNet",
    "GeM",
    "GlobalPool",
    "RetrievalModule",
    "WarmupCosineLR",
    "create_backbone",
]

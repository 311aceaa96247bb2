"""Backbones, pooling, embedding head, the learning-rate schedule and the ``RetrievalModule``."""

from ranklit._moved import moved_getattr
from ranklit.models._backbones import EmbeddingNet, create_backbone
from ranklit.models._module import RetrievalModule
from ranklit.models._pooling import GeM, GlobalPool
from ranklit.models._schedules import WarmupCosineLR

__all__ = [
    "EmbeddingNet",
    "GeM",
    "GlobalPool",
    "RetrievalModule",
    "WarmupCosineLR",
    "create_backbone",
]

__getattr__ = moved_getattr(__name__)  # a name that moved says where (ranklit/_moved.py)

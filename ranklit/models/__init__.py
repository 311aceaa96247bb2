"""Backbones, pooling, embedding head and the ``RetrievalModule``."""

from ranklit.models.backbones import EmbeddingNet, create_backbone
from ranklit.models.module import RetrievalModule
from ranklit.models.pooling import GeM, GlobalPool

__all__ = ["EmbeddingNet", "GeM", "GlobalPool", "RetrievalModule", "create_backbone"]

"""Backbones, pooling, embedding head and the ``RetrievalModule``."""

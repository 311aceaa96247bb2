"""Datasets, samplers, transforms and the ``RetrievalDataModule``."""

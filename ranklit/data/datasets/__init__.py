"""Readers of the benchmark datasets in their official on-disk layouts."""

"""Ranking losses as ``nn.Module`` (no Lightning import)."""

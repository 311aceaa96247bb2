"""Pure-torch ranking machinery, losses and metrics (no Lightning)."""

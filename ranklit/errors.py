"""The exception of a user's mistake, shared by the library and its command line (no dependency).

Library code raises :class:`UserError` (a ``ValueError``) where the fix is the user's to make in a config or in the
data files, with a message that says what is wrong, where (file and line, config key) and what to do. The ``ranklit``
command line prints such errors in a few lines and exits with code 2 (`ranklit.cli`); everything else
keeps its traceback.
"""

from __future__ import annotations

__all__ = ["UserError"]


class UserError(ValueError):
    """A mistake in the configuration or the data, explained by the message (what, where, the fix).

    Example:
        >>> isinstance(UserError("`data.batch_sampler`: `p` must be a positive integer, got 0."), ValueError)
        True
    """

"""Moved to :mod:`ranklit.functional.losses.contract` in ranklit 0.2.0.

This path works until 0.3.0, with a ``FutureWarning``.
"""

from ranklit._deprecation import moved_module

moved_module(__name__, "ranklit.functional.losses.contract", "0.3.0")

"""Moved to :mod:`ranklit.data.images.decoding` in ranklit 0.2.0.

This path works until 0.3.0, with a ``FutureWarning``.
"""

from ranklit._deprecation import moved_module

moved_module(__name__, "ranklit.data.images.decoding", "0.3.0")

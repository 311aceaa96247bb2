"""The easy / medium / hard evaluation protocols of Revisited Oxford and Paris (Radenović et al., CVPR 2018).

Each query of the ground truth comes with three lists of gallery indices, ``easy``, ``hard`` and ``junk``; a protocol
says which lists are counted as positives and which are removed from the query's ranking (revisitop's evaluation)::

    easy:    positives = easy          removed = junk + hard
    medium:  positives = easy + hard   removed = junk
    hard:    positives = hard          removed = junk + easy

Why a module of its own, at the top of the package: both the metric (:func:`ranklit.functional.revisited_map`) and the
dataset (``RevisitedLandmarks.ground_truth``) apply the protocols, and the dependency arrows forbid either importing
the other (``ranklit.functional`` imports torch only, ``ranklit.data`` torch and torchvision only). This module
imports nothing, so both may import it and the protocols are defined once.

>>> PROTOCOLS["medium"]
(('easy', 'hard'), ('junk',))
"""

from __future__ import annotations

__all__ = ["PROTOCOLS"]

# name: (lists counted as positives, lists removed from the ranking as junk)
PROTOCOLS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "easy": (("easy",), ("junk", "hard")),
    "medium": (("easy", "hard"), ("junk",)),
    "hard": (("hard",), ("junk", "easy")),
}

"""The easy / medium / hard evaluation protocols of Revisited Oxford and Paris (Radenović et al., CVPR 2018).

Each query of the ground truth comes with three lists of gallery indices, ``easy``, ``hard`` and ``junk``; a protocol
says which lists are counted as positives and which are removed from the query's ranking (revisitop's evaluation)::

    easy:    positives = easy          removed = junk + hard
    medium:  positives = easy + hard   removed = junk
    hard:    positives = hard          removed = junk + easy

Both the metric (:func:`ranklit.landmarks.revisited_map`) and the dataset (``RevisitedLandmarks.ground_truth``)
apply the protocols: they are defined here once.

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

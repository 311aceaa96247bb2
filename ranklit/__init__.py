"""ranklit: train image-retrieval models by directly optimising ranking metrics.

Sub-packages (import what you need; ``ranklit.losses``, ``ranklit.metrics`` and ``ranklit.landmarks`` need the core
install only: torch, torchmetrics, numpy):

- :mod:`ranklit.functional` — pure torch losses, metrics and ranking machinery.
- :mod:`ranklit.losses` — ``nn.Module`` losses (ROADMAP, Smooth-AP, FastAP, listwise AP, BlackBox AP, HAPPIER, ...).
- :mod:`ranklit.metrics` — torchmetrics ``Metric`` classes (mAP, mAP@R, Recall@k, H-AP, ASI, NDCG, ...).
- :mod:`ranklit.landmarks` — the landmark test-time pipeline: descriptors on disk, whitening, α-QE / DBA, Revisited.
- :mod:`ranklit.data` — datasets, P×K and hierarchical samplers, transforms, the ``RetrievalDataModule``.
- :mod:`ranklit.models` — timm backbone + pooling + embedding head, and the ``RetrievalModule``.
- :mod:`ranklit.training` — DDP gather, cross-batch memory, multistage backprop.
- :mod:`ranklit.callbacks` — the Lightning callbacks: resumption, fault tolerance, checkpoints, ranking grids, writers.
- :mod:`ranklit.viz` — matplotlib figures.
- :mod:`ranklit.cli` — the ``ranklit`` command line (nothing else imports it).
"""

from importlib.metadata import PackageNotFoundError, version

from ranklit import _agent, _moved  # noqa: F401  (_agent: a torchrun worker's agent, read first)

_moved.install()  # an import of a moved module or name says where it went

try:
    __version__ = version("ranklit")  # the one version string lives in pyproject.toml
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]

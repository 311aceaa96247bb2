"""The embedding store and exact search: what ``ranklit predict`` writes, ``ranklit index`` builds and ``ranklit
search`` and the Revisited evaluation read. It sits on the ground floor (torch and numpy only), below
:mod:`ranklit.callbacks` (the embedding writer), :mod:`ranklit.deploy` (index and search) and
:mod:`ranklit.landmarks` (the Revisited pipeline), which all point down to it.

- :mod:`ranklit.index.descriptors` — descriptor sets as tensors or ``.npy`` shards on disk, streamed in chunks.
- :mod:`ranklit.index.neighbours` — scores and top-k of queries against a descriptor set, chunk by chunk.
- ``ranklit.index._manifests`` — the shards' manifests: written, read and checked (a half-written or mixed folder
  is refused).

Example:
    >>> import torch
    >>> from ranklit.index import as_descriptors, top_k
    >>> gallery = as_descriptors(torch.eye(3))
    >>> top_k(torch.tensor([[0.0, 1.0, 0.0]]), gallery, k=1)[1].tolist()
    [[1]]
"""

from ranklit.index._manifests import owned_files
from ranklit.index.descriptors import (
    DEFAULT_CHUNK_ROWS,
    ConcatenatedDescriptors,
    Descriptors,
    DescriptorShards,
    DescriptorWriter,
    MappedDescriptors,
    TensorDescriptors,
    as_descriptors,
    open_descriptors,
)
from ranklit.index.neighbours import query_scores, top_k

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "ConcatenatedDescriptors",
    "DescriptorShards",
    "DescriptorWriter",
    "Descriptors",
    "MappedDescriptors",
    "TensorDescriptors",
    "as_descriptors",
    "open_descriptors",
    "owned_files",
    "query_scores",
    "top_k",
]

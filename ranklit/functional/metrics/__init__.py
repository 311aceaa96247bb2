"""The exact retrieval metrics ([spec §1][spec-metrics]); their public function is
:func:`ranklit.functional.retrieval_metrics`.

- ``_retrieval`` — :func:`retrieval_metrics`, in memory-bounded pieces; ``_options`` — its options' checks;
- ``_counting``, ``_binned_counts`` — how many items score at least each threshold, exactly, without sorting;
- ``_positive_ranks``, ``_symmetric_ranks``, ``_row_metrics`` — the ranks of the positives (a gallery, or the items
  ranking each other); ``_hierarchical`` — H-AP, ASI, NDCG and the per-level metrics;
- ``_kernel_counts`` — the same counts on CUDA by the Triton kernel of :mod:`ranklit.functional._kernels`;
- ``_query_values``, ``_sharding``, ``_tie_share`` — per-query values and their means, the split across processes,
  the tied-scores warning.

Public extension points: :mod:`~ranklit.functional.metrics.binary` (the one table where a binary metric is declared)
and :mod:`~ranklit.functional.metrics.engine` (the entry points :mod:`ranklit.metrics` and :mod:`ranklit.landmarks`
build on).

"""

"""The batch samplers ([spec §3][spec-training]); their public names are :mod:`ranklit.data`'s.

- ``base`` — :class:`EpochBatchSampler`, the base every sampler subclasses (public: a new sampler builds on it);
- ``_pk`` — :class:`PKSampler` and :class:`HierarchicalSampler`; ``_category`` — FastAP's :class:`CategorySampler`;
  ``_uniform`` — :class:`UniformBatchSampler`; ``_class_draws`` — the per-class draws the P×K samplers share.

"""

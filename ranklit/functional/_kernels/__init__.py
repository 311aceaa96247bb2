"""The Triton kernels and their launchers, imported only where they run (Triton ships with PyTorch's Linux CUDA
wheels; ``import ranklit.functional`` works without it).

- ``_rank_engine`` — which engine computes the smooth-rank sums (:func:`ranklit.functional.smooth_rank_engine`);
- ``_rank_sum_kernels`` — the smooth-rank sums' kernels, forward and backward; ``_rank_sums`` — their autograd
  function, the ``"triton"`` engine of the losses;
- ``_triton_counts`` — the exact metrics' counting kernel (its launcher is
  :mod:`ranklit.functional.metrics._kernel_counts`).
"""

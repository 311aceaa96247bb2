"""DDP helpers: gather the retrieval set of every rank with gradients, and average gradients by hand.

Ranking each query against the embeddings of every rank makes the ranking list ``world_size`` times longer, which is
what a non-decomposable metric like AP needs (ROADMAP §3.2, FastAP §5.3, Revaud et al. §4.2). The gradient is exact:

* every rank ``r`` computes its loss ``L_r`` (a mean over its own queries) against the gathered set
  ``E = [e_1; ...; e_W]``; the backward of the gather *sums* ``∂L_r'/∂e_r`` over all ranks ``r'`` and hands it to
  the owner ``r`` of ``e_r``;
* DDP then averages the parameter gradients, giving ``(1/W) Σ_r' ∂L_r'/∂θ``: the gradient of the mean loss of one
  process holding the global batch (when every rank has as many queries with a positive). No extra ``world_size``
  factor is needed ([spec §3][spec-training]).

Ranks may hold batches of different sizes: they are padded to the largest for the collective and trimmed after.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist
from torch import Tensor, nn

__all__ = ["is_distributed", "gather_with_grad", "gather_retrieval_set", "average_gradients"]


def is_distributed() -> bool:
    """Whether a process group with more than one process is running.

    >>> is_distributed()
    False
    """
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _sizes(length: int, device: torch.device) -> list[int]:
    size = torch.tensor([length], device=device)
    sizes = [torch.zeros_like(size) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, size)
    return [int(s) for s in sizes]


def _pad(tensor: Tensor, length: int) -> Tensor:
    if tensor.shape[0] == length:
        return tensor.contiguous()
    padding = tensor.new_zeros((length - tensor.shape[0], *tensor.shape[1:]))
    return torch.cat([tensor, padding])


class _AllGather(torch.autograd.Function):
    """All-gather whose backward sums every rank's gradient and returns the owner's slice (a reduce-scatter)."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, tensor: Tensor) -> Tensor:
        parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, tensor.contiguous())
        return torch.stack(parts)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: Tensor) -> Tensor:
        grad = grad.clone(memory_format=torch.contiguous_format)  # never reduce autograd's buffer in place
        dist.all_reduce(grad)  # every backend has it; NCCL runs it as reduce-scatter + all-gather
        return grad[dist.get_rank()]


def gather_with_grad(tensor: Tensor, sizes: list[int] | None = None) -> Tensor:
    """Concatenate ``tensor`` ``[B_r, ...]`` of every rank along dim 0, in rank order, keeping the autograd graph.

    The backward sums the gradients that every rank's loss sends to a slice and returns the sum to the slice's owner
    (an all-reduce of the gathered gradient, so every rank must run the backward, as in DDP training). Without a
    process group (or with one process) ``tensor`` is returned as is.

    Args:
        tensor: the local rows; integer tensors are gathered too (without gradient).
        sizes: the number of rows on each rank, if already known (saves one small collective).

    Cost: one all-gather of ``max_r B_r`` rows per rank (plus one of the sizes when ``sizes`` is None); the backward
    all-reduces ``W max_r B_r`` rows.

    Example:
        >>> x = torch.ones(3, 2, requires_grad=True)
        >>> gather_with_grad(x) is x
        True
    """
    if not is_distributed():
        return tensor
    sizes = _sizes(tensor.shape[0], tensor.device) if sizes is None else sizes
    padded = _pad(tensor, max(sizes))
    if tensor.requires_grad:
        parts = _AllGather.apply(padded)
    else:
        parts = [torch.empty_like(padded) for _ in sizes]
        dist.all_gather(parts, padded)
    return torch.cat([part[:size] for part, size in zip(parts, sizes, strict=True)])


def gather_retrieval_set(embeddings: Tensor, labels: Tensor, ids: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The retrieval set of a DDP step: the embeddings (with gradients), labels and sample ids of every rank.

    Pass the result as ``ref_embeddings``, ``ref_labels``, ``ref_ids`` to a ranklit loss together with the local
    ``ids``: each query is then excluded from its own ranking by its global sample id ([spec §0][spec-conventions]).

    Args:
        embeddings: ``[B, D]`` local embeddings.
        labels: ``[B]`` or ``[B, L]`` local labels.
        ids: ``[B]`` global sample ids (the dataset index).

    Returns:
        ``(ref_embeddings [N, D], ref_labels [N(, L)], ref_ids [N])`` with ``N = Σ_r B_r``; the local tensors as they
        are when not distributed.

    Example:
        >>> e, labels, ids = torch.randn(4, 2), torch.tensor([0, 0, 1, 1]), torch.arange(4)
        >>> [t.shape[0] for t in gather_retrieval_set(e, labels, ids)]
        [4, 4, 4]
    """
    if not (embeddings.shape[0] == labels.shape[0] == ids.shape[0]):
        raise ValueError(
            f"`embeddings`, `labels` and `ids` must have the same number of rows, got {embeddings.shape[0]}, "
            f"{labels.shape[0]} and {ids.shape[0]}."
        )
    if not is_distributed():
        return embeddings, labels, ids
    sizes = _sizes(embeddings.shape[0], embeddings.device)
    return tuple(gather_with_grad(t, sizes) for t in (embeddings, labels, ids))  # type: ignore[return-value]


def average_gradients(parameters: Iterable[nn.Parameter]) -> None:
    """Average the ``.grad`` of ``parameters`` over the ranks, as DDP does after a backward pass.

    Used when DDP's own synchronisation is switched off (multistage backprop runs several backward passes per
    optimiser step). Every rank must pass the same parameters in the same order; those without a gradient on every
    rank count as zero. One all-reduce of a flat buffer per dtype.

    Example:
        >>> p = nn.Parameter(torch.ones(2)); p.grad = torch.full((2,), 3.0)
        >>> average_gradients([p]); p.grad.tolist()
        [3.0, 3.0]
    """
    params = [p for p in parameters if p.requires_grad]
    if not is_distributed() or not params:
        return
    world_size = dist.get_world_size()
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    all_grads = [p.grad for p in params if p.grad is not None]  # every one, after the line above
    for dtype in sorted({g.dtype for g in all_grads}, key=str):  # same order on every rank
        grads = [g for g in all_grads if g.dtype == dtype]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= world_size
        for grad, chunk in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
            grad.copy_(chunk.view_as(grad))

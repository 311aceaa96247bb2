"""Multistage backpropagation: exact gradients of batches larger than the device can hold (Revaud et al. §3.3).

A listwise AP loss wants thousands of images per batch (4096 on landmarks), but the activations of one chunk of
``chunk_size`` images are all that fit. Since the loss depends on the network only through the embeddings,

    ∂L/∂θ = Σ_chunks (∂L/∂E_chunk) · (∂E_chunk/∂θ),

so :func:`multistage_backward` computes it in three stages ([spec §3][spec-training]; FastAP §4.1 does the same):

1. embed every chunk without storing activations (``torch.no_grad``), recording the random state before each chunk;
2. compute the loss on the ``[B, D]`` embeddings and ``∂L/∂E`` by one backward pass (this also gives the gradients
   of the loss's own parameters, e.g. proxies);
3. for each chunk, restore its random state (dropout, drop-path draw the same masks), re-embed it with activations
   and backpropagate ``∂L/∂E_chunk``; parameter gradients accumulate over the chunks.

The result equals backprop through ``cat([net(chunk) for chunk in chunks])``, i.e. through the full batch for a
network whose output for an image does not depend on the other images of its chunk. Batch-norm in training mode
breaks this (its statistics are per chunk): freeze it (``EmbeddingNet(freeze_batchnorm=True)``) or accept per-chunk
statistics; its running statistics are updated once per chunk, in stage 1 only.

Cost: two forward passes and one backward pass per image (about 1.5× plain backprop); peak memory: the activations
of one chunk plus ``O(B D)`` for the embeddings, plus the loss's own memory over the whole batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ranklit._checks import check_positive_int

__all__ = ["MultistageBackprop", "multistage_backward"]


@dataclass(frozen=True)
class _RandomState:
    """The CPU generator state, and the CUDA one of ``device`` when it is a CUDA device."""

    cpu: Tensor
    cuda: Tensor | None
    device: torch.device

    @classmethod
    def capture(cls, device: torch.device) -> _RandomState:
        cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        return cls(torch.get_rng_state(), cuda, device)

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda, self.device)


@contextmanager
def _batchnorm_statistics_kept(net: nn.Module) -> Iterator[None]:
    """Restore the running statistics of batch-norm layers on exit, so stage 3 does not update them twice."""
    layers = [m for m in net.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training]
    saved = [{name: b.clone() for name, b in m.named_buffers(recurse=False) if b is not None} for m in layers]
    try:
        yield
    finally:
        for module, buffers in zip(layers, saved, strict=True):
            for name, value in buffers.items():
                getattr(module, name).copy_(value)


def _check_chunk_size(chunk_size: int) -> None:
    check_positive_int("chunk_size", chunk_size, " (images per forward pass with activations)")


def multistage_backward(
    net: nn.Module,
    images: Tensor,
    loss_fn: Callable[[Tensor], Tensor],
    chunk_size: int,
    backward: Callable[[Tensor], None] | None = None,
) -> tuple[Tensor, Tensor]:
    """Accumulate into ``.grad`` the exact gradient of ``loss_fn(net(images))`` chunk by chunk (see module docstring).

    Args:
        net: the embedding network; its gradients accumulate into ``.grad`` like one backward.
        images: ``[B, ...]`` the whole batch, already augmented (reused in stages 1 and 3).
        loss_fn: maps the ``[B, D]`` embeddings to the scalar loss (it may gather over DDP ranks, use a memory, ...).
        chunk_size: images per forward pass in stages 1 and 3.
        backward: runs the stage-2 backward of the loss (default ``loss.backward()``; Lightning passes
            ``manual_backward`` so that fp16 loss scaling applies: the scaled ``∂L/∂E`` flows on into stage 3).

    Returns:
        ``(loss, embeddings)``, both detached.

    Raises:
        ValueError: ``chunk_size`` is not a positive integer, or the loss does not depend on the embeddings.

    Example:
        >>> net = nn.Linear(3, 2)
        >>> images = torch.randn(10, 3)
        >>> loss, emb = multistage_backward(net, images, lambda e: e.square().sum(), chunk_size=4)
        >>> expected = torch.autograd.grad(net(images).square().sum(), net.weight)[0]
        >>> torch.allclose(net.weight.grad, expected, atol=1e-6), emb.shape
        (True, torch.Size([10, 2]))
    """
    _check_chunk_size(chunk_size)
    chunks = images.split(chunk_size)
    states: list[_RandomState] = []
    with torch.no_grad():
        outputs = []
        for chunk in chunks:
            states.append(_RandomState.capture(chunk.device))
            outputs.append(net(chunk))
    after_stage_one = _RandomState.capture(images.device)
    embeddings = torch.cat(outputs).requires_grad_(True)
    loss = loss_fn(embeddings)
    (backward or Tensor.backward)(loss)
    if embeddings.grad is None:
        raise ValueError("The loss does not depend on the embeddings: multistage backprop has nothing to propagate.")
    with _batchnorm_statistics_kept(net):
        for chunk, state, grad in zip(chunks, states, embeddings.grad.split(chunk_size), strict=True):
            state.restore()
            torch.autograd.backward(net(chunk), grad)
    after_stage_one.restore()
    return loss.detach(), embeddings.detach()


class MultistageBackprop:
    """Train each batch by multistage backprop (:func:`multistage_backward`), ``chunk_size`` images at a time.

    Given to :class:`ranklit.models.RetrievalModule` as ``multistage`` (CLI: ``--model.multistage
    ranklit.training.MultistageBackprop --model.multistage.chunk_size 64``), it switches the module to one optimiser
    step per batch under manual optimisation (:mod:`ranklit.training._manual`); Lightning then rejects
    ``trainer.gradient_clip_val``, so clipping is set here.

    Args:
        chunk_size: images per forward pass with activations; the batch size is the sampler's.
        gradient_clip_val: maximum global gradient norm (``None``: no clipping).

    Example:
        >>> MultistageBackprop(chunk_size=16, gradient_clip_val=1.0)
        MultistageBackprop(chunk_size=16, gradient_clip_val=1.0)
    """

    def __init__(self, chunk_size: int, gradient_clip_val: float | None = None) -> None:
        _check_chunk_size(chunk_size)
        if gradient_clip_val is not None and not gradient_clip_val > 0:
            raise ValueError(f"`gradient_clip_val` must be positive or None (no clipping), got {gradient_clip_val!r}.")
        self.chunk_size = chunk_size
        self.gradient_clip_val = gradient_clip_val

    def __repr__(self) -> str:
        return f"MultistageBackprop(chunk_size={self.chunk_size}, gradient_clip_val={self.gradient_clip_val})"

"""Step functions and the memory-bounded machinery that ranks selected items of each query's retrieval set.

Every smooth-rank loss needs, for each query ``q`` and each item ``k`` it ranks (the positives for binary AP, every
relevant item for H-AP), the differences ``s_j - s_k`` to every item ``j`` of the retrieval set. The authors' code
builds them for *all* ``k`` (a ``B x B x B`` tensor). Here only the selected items get a row:
:func:`select_columns` packs their indices into a padded ``[Q, P]`` matrix, :func:`selected_differences` builds the
``[Q, P, N]`` differences, and :func:`map_query_chunks` evaluates a per-query function on chunks of queries. With
autograd, each chunk is checkpointed, so only the ``[Q, N]`` scores are kept for the backward pass: peak memory is
``O(chunk * P * N + Q * N)`` for any batch size.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

__all__ = [
    "heaviside",
    "sigmoid_step",
    "supap_upper_step",
    "linear_lower_step",
    "select_columns",
    "selected_differences",
    "map_query_chunks",
    "default_chunk_size",
]

_EXPONENT_CLAMP = 50.0


def heaviside(x: Tensor) -> Tensor:
    """Exact step ``H(x) = 1 if x >= 0 else 0`` (ties count against the ranked item). Carries no gradient.

    >>> heaviside(torch.tensor([-1.0, 0.0, 2.0])).tolist()
    [0.0, 1.0, 1.0]
    """
    return (x >= 0).to(x.dtype)


def sigmoid_step(x: Tensor, tau: float) -> Tensor:
    """Smooth step ``sigma(x / tau)`` with the exponent clamped to ``+-50`` (Smooth-AP, Brown et al. 2020).

    >>> round(float(sigmoid_step(torch.tensor(0.0), 0.01)), 3)
    0.5
    """
    return torch.sigmoid((x / tau).clamp(-_EXPONENT_CLAMP, _EXPONENT_CLAMP))


def supap_upper_step(
    x: Tensor, tau: float, rho: float, delta: float, offset: float | None = None, start: float = 0.5
) -> Tensor:
    """ROADMAP's upper bound ``H^-`` of the Heaviside step (Ramzi et al. 2021, Eq. 5)::

        H^-(t) = sigma(t / tau)                   t <= 0
                 sigma(t / tau) + start           0 < t <= delta
                 rho (t - delta) + offset         t > delta

    with the paper's ``start = 0.5`` and ``offset = sigma(delta / tau) + start`` (continuous at ``delta``) by default.
    Then ``H^-(t) >= H(t)`` everywhere, so a rank built with it upper-bounds the true rank. The authors' released
    configs pass ``offset = 1.44`` (and ``start = 0, offset = 1`` on iNaturalist), which the two arguments reproduce
    ([spec §6][spec-released-code]).

    >>> [round(v, 3) for v in supap_upper_step(torch.tensor([-1.0, 0.01, 0.06]), 0.01, 100.0, 0.05).tolist()]
    [0.0, 1.231, 2.493]
    >>> [round(v, 3) for v in supap_upper_step(torch.tensor([0.01, 0.06]), 0.01, 100.0, 0.05, 1.44).tolist()]
    [1.231, 2.44]
    """
    smooth = sigmoid_step(x, tau)
    continuous = torch.sigmoid(torch.tensor(delta / tau, dtype=x.dtype, device=x.device)) + start
    linear = rho * (x - delta) + (continuous if offset is None else offset)
    return torch.where(x <= 0, smooth, torch.where(x <= delta, smooth + start, linear))


def linear_lower_step(x: Tensor, leak: float, beta: float, gamma: float) -> Tensor:
    """HAPPIER's lower bound ``H_lb`` of the Heaviside step (Ramzi et al. 2022, §3.2)::

        H_lb(x) = leak * x                   x <= 0
                  min(beta * x + gamma, 1)   x > 0

    >>> [round(v, 4) for v in linear_lower_step(torch.tensor([-0.01, 0.01, 0.5]), 10.0, 25.0, 0.5).tolist()]
    [-0.1, 0.75, 1.0]
    """
    return torch.where(x <= 0, leak * x, (beta * x + gamma).clamp(max=1.0))


def select_columns(mask: Tensor) -> tuple[Tensor, Tensor]:
    """Pack the ``True`` columns of each row of a ``[Q, N]`` mask into a padded index matrix.

    Returns:
        ``(index, valid)``, both ``[Q, P]`` with ``P`` the largest number of ``True`` entries in a row; ``index``
        holds column indices (padding points at column 0), ``valid`` says which entries are real.

    >>> idx, ok = select_columns(torch.tensor([[True, False, True], [False, True, False]]))
    >>> idx.tolist(), ok.tolist()
    ([[0, 2], [1, 0]], [[True, True], [True, False]])
    """
    counts = mask.sum(dim=1)
    width = int(counts.max()) if mask.numel() else 0
    order = torch.argsort(mask.to(torch.int8), dim=1, descending=True, stable=True)[:, :width]
    valid = torch.arange(width, device=mask.device)[None, :] < counts[:, None]
    return torch.where(valid, order, torch.zeros_like(order)), valid


def selected_differences(scores: Tensor, index: Tensor) -> Tensor:
    """``D[q, p, j] = s[q, j] - s[q, index[q, p]]``: how far item ``j`` scores above the ranked item ``p``.

    >>> selected_differences(torch.tensor([[0.5, 0.25, 1.0]]), torch.tensor([[1]])).tolist()
    [[[0.25, 0.0, 0.75]]]
    """
    return scores[:, None, :] - scores.gather(1, index)[:, :, None]


def default_chunk_size(num_queries: int, row_width: int, num_refs: int, budget: int = 2**24) -> int:
    """Queries per chunk so one chunk's ``[chunk, row_width, num_refs]`` tensors hold about ``budget`` elements.

    >>> default_chunk_size(1000, 3, 1000)
    1000
    >>> default_chunk_size(100000, 100, 100000)
    1
    """
    per_query = max(1, row_width * num_refs)
    return max(1, min(num_queries, budget // per_query))


def map_query_chunks(fn: Callable[..., Tensor], *rows: Tensor, chunk_size: int) -> Tensor:
    """Evaluate ``fn`` on row-chunks of tensors that all have the queries on dimension 0, and concatenate.

    ``fn`` must return one value per query of its chunk. When autograd is recording, each chunk is recomputed in the
    backward pass (``torch.utils.checkpoint``) instead of keeping its ``[chunk, P, N]`` intermediates alive.

    >>> map_query_chunks(lambda a: a.sum(1), torch.ones(5, 2), chunk_size=2).tolist()
    [2.0, 2.0, 2.0, 2.0, 2.0]
    """
    num = rows[0].shape[0]
    needs_grad = torch.is_grad_enabled() and any(r.requires_grad for r in rows)
    outputs = []
    for start in range(0, num, chunk_size):
        chunk = [r[start : start + chunk_size] for r in rows]
        if needs_grad and num > chunk_size:
            outputs.append(checkpoint(fn, *chunk, use_reentrant=False))
        else:
            outputs.append(fn(*chunk))
    return torch.cat(outputs) if outputs else rows[0].new_zeros(0)

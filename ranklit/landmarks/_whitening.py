"""PCA whitening of descriptors, learnt on training descriptors and applied at test time ([spec §3][spec-training];
Revaud et al. 2019 §4.2, after Jégou & Chum 2012).

With ``mu`` the mean and ``C = U diag(lambda) U^T`` the covariance of the training descriptors (eigenvalues in
decreasing order)::

    whiten(x) = normalise( (x - mu) U_K diag(lambda_K)^(-power) )

keeping the ``K`` leading components. ``power = 0.5`` is plain PCA whitening (unit variance along every component);
the default ``power = 0.25`` is the square-rooted PCA of the paper: each component keeps the square root of its
variance, which damps the dominant directions without blowing up the weak ones. Eigenvalues below ``1e-6`` times the
largest are raised to that floor, so near-empty directions are not amplified into noise.

Use: :class:`ranklit.landmarks.postprocess.LearntWhitening` learns it from the descriptors ``ranklit predict`` writes
for the training images (or from a ``whitening_dataset`` embedded with the test set) and applies it to query and
gallery descriptors, as ``configs/revisited_eval.yaml`` does before :func:`ranklit.landmarks.revisited_map`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ranklit.errors import UserError
from ranklit.index import Descriptors, as_descriptors

__all__ = ["Whitening", "learn_whitening"]

_EIGENVALUE_FLOOR = 1e-6  # relative to the largest eigenvalue


@dataclass(frozen=True)
class Whitening:
    """A learnt whitening: ``normalise((x - mean) @ projection)``.

    Attributes:
        mean: ``[D]`` mean of the training descriptors.
        projection: ``[D, K]`` leading eigenvectors scaled by ``eigenvalue^(-power)``.
    """

    mean: Tensor
    projection: Tensor

    def __call__(self, embeddings: Tensor) -> Tensor:
        """Whiten ``[N, D]`` embeddings into L2-normalised ``[N, K]`` ones (in the embeddings' dtype and device)."""
        if embeddings.ndim != 2 or embeddings.shape[1] != self.mean.shape[0]:
            raise ValueError(
                f"The whitening was learnt on {self.mean.shape[0]}-d descriptors; got embeddings of shape "
                f"{tuple(embeddings.shape)}."
            )
        mean = self.mean.to(embeddings.device, torch.float64)
        projection = self.projection.to(embeddings.device, torch.float64)
        whitened = (embeddings.to(torch.float64) - mean) @ projection
        return torch.nn.functional.normalize(whitened, dim=1).to(embeddings.dtype)


def learn_whitening(
    embeddings: Tensor | Descriptors, *, power: float = 0.25, dim: int | None = None, chunk_rows: int = 65536
) -> Whitening:
    """Learn a PCA whitening from ``[N, D]`` training descriptors (computed in float64).

    Args:
        embeddings: ``[N, D]`` descriptors, ``N >= 2``: a tensor, or a descriptor set
            (:mod:`ranklit.index.descriptors`, e.g. the shards ``ranklit predict`` writes) read in two passes
            of ``chunk_rows`` rows (mean, then covariance: memory ``O(D² + chunk_rows·D)``).
        power: exponent of the eigenvalue scaling (0.25: square-rooted PCA; 0.5: full whitening; 0: PCA only).
        dim: components kept, ``K <= D``; ``None`` keeps all ``D``.
        chunk_rows: rows read at a time.

    Returns:
        The :class:`Whitening` to apply to test descriptors (in the training descriptors' dtype).

    Example:
        >>> x = torch.tensor([[2.0, 0.0], [-2.0, 0.0], [0.0, 0.5], [0.0, -0.5]])
        >>> w = learn_whitening(x, power=0.5)
        >>> variances = torch.cov(((x - w.mean) @ w.projection).T, correction=0).diagonal()
        >>> [round(v, 6) for v in variances.tolist()]  # unit variance along both components
        [1.0, 1.0]
        >>> w(torch.tensor([[1.0, 1.0]])).shape
        torch.Size([1, 2])
    """
    if isinstance(embeddings, Tensor) and (embeddings.ndim != 2 or embeddings.shape[0] < 2):
        shape = tuple(embeddings.shape)
        raise ValueError(f"`embeddings` must be a [N, D] tensor of N >= 2 training descriptors, got {shape}.")
    if not isinstance(embeddings, (Tensor, Descriptors)):
        raise ValueError(f"`embeddings` must be a [N, D] tensor or a descriptor set, got {type(embeddings).__name__}.")
    source = as_descriptors(embeddings)
    if source.num_rows < 2:
        raise ValueError(f"`embeddings` must hold N >= 2 training descriptors, got {source.num_rows}.")
    if power < 0:
        raise ValueError(f"`power` must be >= 0, got {power}.")
    num_dims = source.dim
    if dim is not None and not (isinstance(dim, int) and 1 <= dim <= num_dims):
        raise UserError(f"`dim` must be an integer in [1, {num_dims}] (the descriptor size; `ranklit search "
                        f"--whiten_dim`) or None, got {dim!r}.")
    total = torch.zeros(num_dims, dtype=torch.float64)
    for chunk in source.chunks(chunk_rows):
        if not torch.isfinite(chunk).all():
            raise ValueError("`embeddings` hold NaN or infinite values; a whitening cannot be learnt from them.")
        total += chunk.to(torch.float64).sum(0).cpu()
    mean = total / source.num_rows
    covariance = torch.zeros(num_dims, num_dims, dtype=torch.float64)
    for chunk in source.chunks(chunk_rows):
        centred = chunk.to(torch.float64).cpu() - mean
        covariance += centred.T @ centred
    eigenvalues, eigenvectors = torch.linalg.eigh(covariance / source.num_rows)  # increasing order
    eigenvalues, eigenvectors = eigenvalues.flip(0), eigenvectors.flip(1)
    keep = dim or num_dims
    floor = _EIGENVALUE_FLOOR * eigenvalues[0].clamp(min=torch.finfo(torch.float64).tiny)
    scale = eigenvalues[:keep].clamp(min=floor) ** -power
    dtype = next(iter(source.chunks(1))).dtype
    return Whitening(mean=mean.to(dtype), projection=(eigenvectors[:, :keep] * scale).to(dtype))

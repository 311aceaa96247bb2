"""PCA whitening (docs/spec.md §3) against a float64 reference from the singular value decomposition."""

from __future__ import annotations

import pytest
import torch

from ranklit.landmarks._whitening import learn_whitening


def _descriptors(n: int, d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    mixing = torch.randn(d, d, generator=g, dtype=torch.float64) * torch.logspace(0, -2, d, dtype=torch.float64)
    samples = torch.randn(n, d, generator=g, dtype=torch.float64)
    return samples @ mixing + torch.randn(d, generator=g, dtype=torch.float64)


def _reference(train: torch.Tensor, test: torch.Tensor, power: float, dim: int) -> torch.Tensor:
    """normalise((x - mu) V_K diag(s_K^2 / n)^(-power)) from the SVD of the centred training set."""
    mean = train.mean(0)
    _, singular, vh = torch.linalg.svd(train - mean, full_matrices=False)
    eigenvalues = singular[:dim] ** 2 / train.shape[0]
    return torch.nn.functional.normalize((test - mean) @ vh[:dim].T * eigenvalues ** -power, dim=1)


@pytest.mark.parametrize("power", [0.0, 0.25, 0.5])
@pytest.mark.parametrize("dim", [None, 3])
def test_whitening_matches_the_svd_reference(power: float, dim: int | None) -> None:
    train, test = _descriptors(200, 6, 0), _descriptors(20, 6, 1)
    got = learn_whitening(train, power=power, dim=dim)(test)
    expected = _reference(train, test, power, dim or 6)
    assert got.shape == (20, dim or 6)
    # eigenvectors are defined up to sign: compare the (sign-free) scores between test descriptors
    torch.testing.assert_close(got @ got.T, expected @ expected.T, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(("power", "exponent"), [(0.5, 0.0), (0.25, 0.5)])
def test_whitened_training_variances(power: float, exponent: float) -> None:
    """Full whitening gives unit variances; the square-rooted one keeps the square root of each variance."""
    train = _descriptors(500, 5, 2)
    whitening = learn_whitening(train, power=power)
    projected = (train - whitening.mean) @ whitening.projection
    covariance = torch.cov(projected.T, correction=0)
    eigenvalues = torch.linalg.eigvalsh(torch.cov(train.T, correction=0)).flip(0)
    torch.testing.assert_close(covariance, torch.diag(eigenvalues**exponent), rtol=1e-8, atol=1e-10)


def test_float32_in_float32_out_and_degenerate_directions_stay_finite() -> None:
    train = _descriptors(50, 4, 3).float()
    train[:, 3] = 1.0  # a constant coordinate: a zero eigenvalue
    out = learn_whitening(train, power=0.5)(train[:5])
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    torch.testing.assert_close(out.norm(dim=1), torch.ones(5))


def test_bad_input_is_rejected() -> None:
    train = _descriptors(10, 4, 4)
    with pytest.raises(ValueError, match="N >= 2"):
        learn_whitening(train[:1])
    with pytest.raises(ValueError, match="NaN or infinite"):
        learn_whitening(torch.cat([train, torch.full((1, 4), float("nan"))]))
    with pytest.raises(ValueError, match=r"`dim` must be an integer in \[1, 4\]"):
        learn_whitening(train, dim=5)
    with pytest.raises(ValueError, match="`power` must be >= 0"):
        learn_whitening(train, power=-1)
    with pytest.raises(ValueError, match="learnt on 4-d descriptors"):
        learn_whitening(train)(torch.ones(2, 3, dtype=torch.float64))


def test_learnt_from_shards_on_disk_equals_learnt_in_memory(tmp_path) -> None:
    from ranklit.index import DescriptorShards, DescriptorWriter

    train = _descriptors(100, 6, 5).float()
    writer = DescriptorWriter(tmp_path, shard_rows=16)
    writer.append(train, torch.arange(100))
    writer.close()
    streamed = learn_whitening(DescriptorShards(tmp_path), power=0.25, dim=4, chunk_rows=7)
    in_memory = learn_whitening(train, power=0.25, dim=4)
    torch.testing.assert_close(streamed.mean, in_memory.mean, rtol=1e-6, atol=1e-6)
    test = train[:10]
    torch.testing.assert_close(streamed(test) @ streamed(test).T, in_memory(test) @ in_memory(test).T)

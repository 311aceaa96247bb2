"""Cross-batch memory: FIFO order, a query never ranked against itself, loss and gradients against the oracle."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from ranklit.losses import SmoothAPLoss
from ranklit.training import CrossBatchMemory, ranking_objective
from tests.oracles.losses import smooth_ap

TAU = 0.1


def _batch(ids: list[int], seed: int) -> tuple[Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids_t = torch.tensor(ids)
    embeddings = nn.functional.normalize(torch.randn(len(ids), 4, generator=g, dtype=torch.float64), dim=1)
    return embeddings, ids_t % 3, ids_t  # the label is a function of the id: a sample keeps its label


class _Spy(nn.Module):
    """Records the retrieval sets the objective hands to the loss."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[dict[str, Tensor]] = []

    def forward(self, embeddings: Tensor, labels: Tensor, **refs: Tensor) -> Tensor:
        self.calls.append(refs)
        return embeddings.sum() * 0.0


def test_fifo_evicts_the_oldest_and_refreshes_repeated_ids() -> None:
    memory = CrossBatchMemory(size=5)
    memory.enqueue(*_batch([0, 1, 2], seed=0))
    memory.enqueue(*_batch([3, 4, 5], seed=1))  # 0 is evicted
    assert sorted(memory.ids.tolist()) == [1, 2, 3, 4, 5]
    fresh = _batch([2, 6], seed=2)
    memory.enqueue(*fresh)  # 2 is refreshed, 1 and the old slot of 2 are overwritten or dropped
    assert sorted(memory.ids.tolist()) == [2, 3, 4, 5, 6]
    torch.testing.assert_close(memory.embeddings[memory.ids == 2][0], fresh[0][0])
    memory.enqueue(*_batch(list(range(10, 18)), seed=3))  # a batch larger than the memory keeps its last rows
    assert sorted(memory.ids.tolist()) == [13, 14, 15, 16, 17]


def test_a_query_is_never_ranked_against_a_stored_copy_of_itself() -> None:
    """Replay samples across steps (stale copies of the batch's samples sit in the memory) and inspect every set."""
    memory, spy = CrossBatchMemory(size=12), _Spy()
    g = torch.Generator().manual_seed(0)
    for step in range(8):
        embeddings, labels, ids = _batch(torch.randint(0, 10, (6,), generator=g).tolist(), seed=step)
        ranking_objective(spy, embeddings, labels, ids, memory=memory, step=step)
        refs = spy.calls[-1]
        ref_ids = refs["ref_ids"].tolist()
        for q, query_id in enumerate(ids.tolist()):
            copies = [j for j, r in enumerate(ref_ids) if r == query_id]
            # only live rows of the current batch carry the query's id, and the loss excludes them by id
            assert all(j < len(ids) for j in copies)
            assert q in copies and torch.equal(refs["ids"], ids)
        stored = ref_ids[len(ids) :]
        assert len(stored) == len(set(stored)) and not set(stored) & set(ids.tolist())


@pytest.mark.parametrize("step", [0, 2])
def test_loss_and_gradients_match_the_oracle(step: int) -> None:
    memory = CrossBatchMemory(size=16, start_step=1, weight=0.5)
    old = _batch([0, 1, 2, 3, 4, 5, 6, 7], seed=0)
    memory.enqueue(*old)
    embeddings, labels, ids = _batch([6, 7, 8, 9, 10, 11], seed=1)
    embeddings.requires_grad_(True)
    value = ranking_objective(SmoothAPLoss(tau=TAU), embeddings, labels, ids, memory=memory, step=step).loss

    reference = smooth_ap(embeddings, labels, tau=TAU)
    if step >= 1:  # memory ∪ batch: the live batch, then the stored samples 0..5 (6 and 7 are in the batch)
        keep = torch.arange(6)
        refs = torch.cat([embeddings, old[0][keep]]), torch.cat([labels, old[1][keep]]), torch.cat([ids, old[2][keep]])
        reference = reference + 0.5 * smooth_ap(embeddings, labels, refs[0], refs[1], ids, refs[2], tau=TAU)
    torch.testing.assert_close(value, reference)
    grad, expected = torch.autograd.grad(value, embeddings)[0], torch.autograd.grad(reference, embeddings)[0]
    torch.testing.assert_close(grad, expected)
    assert grad.abs().max() > 1e-4


def test_half_precision_batches_are_stored_in_float32() -> None:
    memory = CrossBatchMemory(size=4)
    embeddings, labels, ids = _batch([0, 1], seed=0)
    memory.enqueue(embeddings.bfloat16(), labels, ids)
    assert memory.embeddings.dtype == torch.float32
    refs = memory.retrieval_set(embeddings[:1].bfloat16(), labels[:1], ids[:1])
    assert refs[0].dtype == torch.float32 and refs[2].tolist() == [0, 1]


def test_invalid_arguments_are_rejected() -> None:
    for kwargs, name in (
        ({"size": 0}, "size"),
        ({"size": 4, "start_step": -1}, "start_step"),
        ({"size": 4, "weight": 0.0}, "weight"),
    ):
        with pytest.raises(ValueError, match=name):
            CrossBatchMemory(**kwargs)
    memory = CrossBatchMemory(size=4)
    with pytest.raises(ValueError, match="empty"):
        _ = memory.embeddings
    memory.enqueue(*_batch([0, 1], seed=0))
    with pytest.raises(ValueError, match="dimension 4"):
        memory.enqueue(torch.randn(2, 3), torch.tensor([0, 1]), torch.tensor([2, 3]))


def test_state_round_trip_into_a_fresh_memory() -> None:
    memory = CrossBatchMemory(size=5)
    for step, ids in enumerate([[0, 1, 2], [3, 4, 5], [2, 6]]):
        memory.enqueue(*_batch(ids, seed=step))
    restored = CrossBatchMemory(size=5)
    restored.load_state_dict(memory.state_dict())
    for name in ("embeddings", "labels", "ids"):
        torch.testing.assert_close(getattr(restored, name), getattr(memory, name))
    for target in (memory, restored):  # the FIFO continues identically: same pointer, same evictions
        target.enqueue(*_batch([7, 8, 9], seed=9))
    assert restored.ids.tolist() == memory.ids.tolist()
    empty = CrossBatchMemory(size=5)
    empty.load_state_dict(CrossBatchMemory(size=5).state_dict())
    assert len(empty) == 0


def test_state_of_another_size_or_dimension_is_rejected() -> None:
    memory = CrossBatchMemory(size=4)
    memory.enqueue(*_batch([0, 1], seed=0))
    with pytest.raises(ValueError, match="size 4, this one has size 6"):
        CrossBatchMemory(size=6).load_state_dict(memory.state_dict())
    other = CrossBatchMemory(size=4)
    other.enqueue(torch.randn(2, 3, dtype=torch.float64), torch.tensor([0, 1]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="dimension 3"):
        other.load_state_dict(memory.state_dict())
    with pytest.raises(ValueError, match="needs `size` and `pointer`"):
        other.load_state_dict({"size": 4})

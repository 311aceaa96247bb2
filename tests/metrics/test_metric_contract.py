"""The torchmetrics contract, for every registered metric class (in the spirit of torchmetrics' ``MetricTester``,
written here): the accumulated result equals the pure function on all batches; ``forward`` gives the batch's own value
and still accumulates; ``reset``; pickle, ``deepcopy`` and a persistent ``state_dict`` round trip; float16 / bfloat16
inputs equal float32 inputs of the same values; and a 2-process DDP run (one process pool for every metric) equals
the single process."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
import torch
import torch.multiprocessing as mp

from ranklit.metrics import list_metrics
from tests.ddp import free_port
from tests.metrics import contract_worker
from tests.metrics.metric_cases import CASES, Case, as_floats, problem

NAMES = list_metrics()


def _fed(case: Case, batches: list[torch.Tensor], dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    e, labels, _ = problem()
    metric = case.make()
    for ids in batches:
        case.update(metric, e[ids].to(dtype), labels[ids], ids)
    return metric


def _close(actual: dict[str, float], expected: dict[str, float]) -> None:
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        assert actual[key] == pytest.approx(value, rel=1e-6, abs=1e-9, nan_ok=True), key


def test_every_registered_metric_has_a_case() -> None:
    assert set(NAMES) == set(CASES), "add the new metric's case to tests/metrics/metric_cases.py"


@pytest.mark.parametrize("name", NAMES)
def test_the_accumulated_result_is_the_pure_function_of_all_batches(name: str) -> None:
    case, (e, labels, batches) = CASES[name], problem()
    _close(as_floats(_fed(case, batches).compute()), case.expected(e, labels, batches))


@pytest.mark.parametrize("name", NAMES)
def test_forward_gives_the_batch_value_and_accumulates(name: str) -> None:
    case, (e, labels, batches) = CASES[name], problem()
    metric = case.make()
    for ids in batches:
        if case.batch_value:
            value = metric(e[ids], labels[ids], ids)
            _close(as_floats(value), case.expected(e, labels, [ids]))
        else:
            case.update(metric, e[ids], labels[ids], ids)
    _close(as_floats(metric.compute()), case.expected(e, labels, batches))


@pytest.mark.parametrize("name", NAMES)
def test_reset_forgets_everything(name: str) -> None:
    case, (e, labels, batches) = CASES[name], problem()
    metric = _fed(case, batches[:2])
    metric.reset()
    for ids in batches:
        case.update(metric, e[ids], labels[ids], ids)
    _close(as_floats(metric.compute()), case.expected(e, labels, batches))


@pytest.mark.parametrize("name", NAMES)
def test_pickle_deepcopy_and_state_dict_keep_the_state(name: str) -> None:
    case, (e, labels, batches) = CASES[name], problem()
    metric = _fed(case, batches[:3])
    expected = case.expected(e, labels, batches)
    restored = pickle.loads(pickle.dumps(metric))
    twin = copy.deepcopy(metric)
    metric.persistent(True)
    loaded = case.make()
    loaded.persistent(True)
    loaded.load_state_dict(metric.state_dict())
    for other in (restored, twin, loaded, metric):
        case.update(other, e[batches[3]], labels[batches[3]], batches[3])
        _close(as_floats(other.compute()), expected)
    assert twin.compute().keys() == metric.compute().keys()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", NAMES)
def test_low_precision_inputs_equal_float32_inputs_of_the_same_values(name: str, dtype: torch.dtype) -> None:
    case, (_, _, batches) = CASES[name], problem()
    low = as_floats(_fed(case, batches, dtype).compute())
    e, labels, _ = problem()
    same = case.make()
    for ids in batches:
        case.update(same, e[ids].to(dtype).float(), labels[ids], ids)
    _close(low, as_floats(same.compute()))


@pytest.mark.slow
@pytest.mark.timeout(600)  # two interpreters: ~20 s idle, minutes on a loaded machine
def test_two_processes_give_the_single_process_result_for_every_metric(tmp_path) -> None:
    out = tmp_path / "result"
    mp.spawn(contract_worker.run, args=(2, free_port(), str(out)), nprocs=2, join=True)
    distributed = json.loads(out.read_text())
    e, labels, batches = problem()
    assert set(distributed) == set(NAMES)
    for name in NAMES:
        _close({k: float.fromhex(v) for k, v in distributed[name].items()}, CASES[name].expected(e, labels, batches))

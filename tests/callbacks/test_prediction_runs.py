"""``ranklit predict`` output that cannot be mixed: a reused folder is refused or replaced (``--overwrite true``), a
stopped or killed prediction is refused on read, a malformed manifest is refused, signals stop it with 128 + n."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ranklit.callbacks import load_predictions
from ranklit.cli import main
from ranklit.data import SyntheticHierarchy
from ranklit.errors import UserError
from ranklit.index import DescriptorShards, DescriptorWriter
from tests.cli.test_cli import TINY
from tests.ddp import default_signals, scaled_timeout
from tests.tiny import SMALL, synthetic_args

REPOSITORY = Path(__file__).resolve().parents[2]
PREDICT = ["predict", "--config", "quickstart.yaml", *TINY, "--data.eval_batch_size=4"]


def _signal_at(step: int, name: str, to: str = "self") -> str:
    args = f'"step": {step}, "signal": "{name}", "phase": "predict", "to": "{to}"'
    return f'--trainer.callbacks+={{"class_path": "tests.cli.signals.SignalAt", "init_args": {{{args}}}}}'


def _predict(folder: Path, *extra: str, devices: int = 1) -> subprocess.CompletedProcess[str]:
    """``ranklit predict`` as a user runs it (its own process group, as a scheduler's job)."""
    args = [a for a in PREDICT if not a.startswith("--trainer.devices")]
    ddp = [f"--trainer.devices={devices}", *(["--trainer.strategy=ddp"] if devices > 1 else [])]
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    command = [sys.executable, "-m", "ranklit.cli", *args, *ddp, "--trainer.enable_progress_bar=false", *extra]
    return subprocess.run(
        command, cwd=folder, capture_output=True, text=True, timeout=scaled_timeout(300), env=env,
        start_new_session=True, preexec_fn=default_signals,
    )


def _small_writer(folder: Path, rank: int = 0, ranks: int = 1, run: str = "run1") -> None:
    writer = DescriptorWriter(folder, f"rank{rank}", shard_rows=2, run=run, group="", rank=rank, ranks=ranks)
    writer.append(torch.ones(3, 4), torch.arange(3) + 3 * rank)
    writer.close()


def _rewrite(path: Path, **changes: object) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda f: (f / "rank0.json").write_text('{"format": "ranklit-desc'), "unreadable JSON"),
        (lambda f: _rewrite(f / "rank0.json", run=None), "missing or wrong run"),
        (lambda f: _rewrite(f / "rank0.json", complete=False), "half-written prediction"),
        (lambda f: _rewrite(f / "rank0.json", ranks=2), r"processes \[0\] of \[2\]"),
        (lambda f: _small_writer(f, rank=1, ranks=2, run="run2"), "several predictions"),
        (lambda f: (f / "rank0-old-00000.index.npy").write_bytes(b""), "shards no manifest names"),
        (lambda f: next(f.glob("*-00001.index.npy")).unlink(), "cannot be read"),
    ],
    ids=["bad_json", "no_run", "incomplete", "missing_rank", "two_runs", "stray_shard", "missing_shard"],
)
def test_a_damaged_or_mixed_folder_is_refused_naming_it_and_the_fix(tmp_path: Path, damage, reason: str) -> None:
    _small_writer(tmp_path)
    assert DescriptorShards(tmp_path).num_rows == 3  # intact: read
    damage(tmp_path)
    with pytest.raises(UserError, match=reason) as refused:
        DescriptorShards(tmp_path)
    assert str(tmp_path) in str(refused.value) and "--overwrite true" in str(refused.value)


def test_a_reused_folder_is_refused_before_writing_and_replaced_with_overwrite(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    main([*PREDICT, *synthetic_args(), "--predictions_path=out"])
    rows = len(SyntheticHierarchy(split="test", **SMALL))
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"Predictions written to out: {rows} rows."
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "out").iterdir()}
    logged = [arg for arg in PREDICT if arg != "--trainer.logger=false"]  # the config's logger: a run folder
    with pytest.raises(SystemExit) as refused:
        main([*logged, *synthetic_args(images_per_class=2), "--predictions_path=out"])
    assert not list(tmp_path.rglob("version_*"))  # a refused prediction leaves no empty run folder
    err = capsys.readouterr().err
    assert (
        refused.value.code == 2
        and err.startswith("error: out already holds predictions")
        and len(err.splitlines()) == 1
    )
    assert "--overwrite true" in err and {p.name: p.stat().st_mtime_ns for p in (tmp_path / "out").iterdir()} == before
    main([*PREDICT, *synthetic_args(images_per_class=2), "--predictions_path=out", "--overwrite=true"])
    small = SyntheticHierarchy(split="test", **{**SMALL, "images_per_class": 2})
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"Predictions written to out: {len(small)} rows."
    read = load_predictions(tmp_path / "out")
    assert torch.equal(read["index"], torch.arange(len(small))) and torch.equal(read["labels"], small.labels)
    assert not (set(before) - {"rank0.json"}) & {p.name for p in (tmp_path / "out").iterdir()}  # no old shard


@pytest.mark.long  # 29 s on 2 idle cores: in the long suite (RANKLIT_LONG_TESTS=1); the one-process reuse test stays
@pytest.mark.timeout(900)
def test_ddp_predict_then_smaller_one_process_predicts_never_mix(tmp_path: Path, monkeypatch, capsys) -> None:
    """A scheduler's SIGTERM to a 2-process predict, the 2-process predict to the end, then into the same folder a
    1-process predict refused, one killed (SIGKILL) and one on a smaller set: what is read back is never mixed."""
    out, full = tmp_path / "out", len(SyntheticHierarchy(split="test", **SMALL))
    stopped = _predict(tmp_path, *synthetic_args(), "--predictions_path=out", _signal_at(2, "SIGTERM", "group"),
                       devices=2)
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    manifests = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [m["complete"] for m in manifests] == [False, False] and manifests[0]["run"] == manifests[1]["run"]
    assert [sum(s["rows"] for s in m["shards"]) for m in manifests] == [8, 8]  # 2 batches of 4, then stopped
    with pytest.raises(UserError, match="half-written prediction"):
        load_predictions(out)
    finished = _predict(tmp_path, *synthetic_args(), "--predictions_path=out", "--overwrite=true", devices=2)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert finished.stdout.strip().splitlines()[-1] == f"Predictions written to out: {full} rows."
    assert torch.equal(load_predictions(out)["index"], torch.arange(full))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as refused:  # another prediction into the folder, without --overwrite
        main([*PREDICT, *synthetic_args(images_per_class=2), "--predictions_path=out"])
    assert refused.value.code == 2 and "already holds predictions" in capsys.readouterr().err
    killed = _predict(tmp_path, *synthetic_args(images_per_class=2), "--predictions_path=out", "--overwrite=true",
                      _signal_at(2, "SIGKILL"))
    assert killed.returncode == -signal.SIGKILL
    with pytest.raises(UserError, match="half-written prediction"):
        load_predictions(out)
    main([*PREDICT, *synthetic_args(images_per_class=2), "--predictions_path=out", "--overwrite=true"])
    small = SyntheticHierarchy(split="test", **{**SMALL, "images_per_class": 2})
    read = load_predictions(out)
    assert torch.equal(read["index"], torch.arange(len(small))) and torch.equal(read["labels"], small.labels)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ctrl_c_stops_predict_between_batches_with_exit_130(tmp_path: Path) -> None:
    result = _predict(tmp_path, *synthetic_args(), "--predictions_path=out", _signal_at(3, "SIGINT"))
    assert result.returncode == 130, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "marked incomplete" in result.stderr
    manifest = json.loads((tmp_path / "out" / "rank0.json").read_text())
    assert manifest["complete"] is False and sum(s["rows"] for s in manifest["shards"]) == 12  # batches 1-3 of 4
    with pytest.raises(UserError, match="half-written prediction"):
        load_predictions(tmp_path / "out")

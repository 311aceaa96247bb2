"""Issue 47, item 6: what a resume may change. Inside an epoch another sampler ``k`` used to be resumed silently (the
rest of the epoch drew other images) while another ``batches_per_epoch`` was refused; ``--seed_everything 1`` on a
resume did nothing (the random states are the checkpoint's) yet was written into ``config.yaml``. Both are refused,
naming the values and the way on, leaving the run's files byte-identical; the default seed takes the run's, and at
the end of an epoch the new ``k`` is taken.

One tiny quick start stopped at the end of its first epoch of 3 steps, ``last.ckpt`` there and ``last-1.ckpt`` after
step 2, is shared by the module; each test resumes a copy of it in-process (``ranklit.cli.main``, as ``ranklit fit ...
--resume true`` would)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from ranklit.cli import main
from tests.cli.test_resume_cli import QUICK

SHORT = [*QUICK, "--data.batch_sampler.init_args.batches_per_epoch=3", "--baseline_validation=false",
         "--trainer.limit_val_batches=1", "--checkpoint.every_n_steps=1"]  # quickstart.yaml: seed_everything 0
RUN = Path("runs/quickstart/version_0")


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder: ``last.ckpt`` at the end of epoch 0, ``last-1.ckpt`` after its batch 2 of 3 (k=4, seed 0)."""
    folder = tmp_path_factory.mktemp("stopped")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        main([*SHORT, "--trainer.max_steps=3"])
    return folder / RUN


def _copy(run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[Path, bytes]:
    shutil.copytree(run, tmp_path / RUN)
    monkeypatch.chdir(tmp_path)
    return _files()


def _files() -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(RUN.rglob("*")) if path.is_file()}


def _refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as refused:
        main(args)
    err = capsys.readouterr().err
    assert refused.value.code == 2, err[-3000:]
    return err.strip().splitlines()[-1]


def _recorded_seed(path: Path) -> int | None:
    return torch.load(path, map_location="cpu", weights_only=True)["callbacks"]["ResumableTraining"]["seed"]


def test_another_seed_is_refused_and_the_default_takes_the_runs(stopped_run, tmp_path, monkeypatch, capsys) -> None:
    before = _copy(stopped_run, tmp_path, monkeypatch)
    line = _refused([*SHORT, "--trainer.max_steps=4", "--resume=true", "--seed_everything=1"], capsys)
    assert line == (
        "error: `seed_everything: 1` (the config or `--seed_everything`) cannot take effect on a resume: the run was "
        f"seeded with 0, and a resume restores the random states of its checkpoint {RUN / 'checkpoints/last.ckpt'}. "
        "Resume with `--seed_everything 0` (the run's seed; `true`, the default, also takes it), or start a new run "
        "with seed 1: the same command without `--resume`/`--ckpt_path`."
    )
    assert _files() == before  # nothing written: config.yaml, hparams.yaml, metrics.csv, checkpoints
    main([*SHORT, "--trainer.max_steps=4", "--trainer.max_epochs=4", "--resume=true", "--seed_everything=true"])
    assert "seed_everything: 0\n" in (RUN / "config.yaml").read_text()  # unspecified: Lightning picked a random one
    assert _recorded_seed(RUN / "checkpoints/last.ckpt") == 0


def test_another_k_is_refused_inside_an_epoch_and_taken_at_its_end(stopped_run, tmp_path, monkeypatch, capsys) -> None:
    before = _copy(stopped_run, tmp_path, monkeypatch)
    inside = f"--ckpt_path={RUN / 'checkpoints/last-1.ckpt'}"  # continues the run from after its batch 2
    line = _refused([*SHORT, "--trainer.max_steps=4", inside, "--data.batch_sampler.init_args.k=2"], capsys)
    assert line == (
        "error: The checkpoint's PKSampler stopped at batch 2 of epoch 0, and this sampler differs: `k` (CLI: "
        "`--data.batch_sampler.init_args.k`): checkpoint 4, this one 2. The rest of epoch 0 was planned with the "
        "checkpoint's values, which may change only at the end of an epoch: resume with them to finish epoch 0 (e.g. "
        "with `--trainer.max_epochs 1`), then with the new ones; or start a new run."
    )
    assert _files() == before
    # from the end of the epoch (Lightning counts a stop at `max_steps` as an epoch: epochs to spare)
    main([*SHORT, "--trainer.max_steps=4", "--trainer.max_epochs=4", "--resume=true",
          "--data.batch_sampler.init_args.k=2"])
    state = torch.load(RUN / "checkpoints/last.ckpt", map_location="cpu", weights_only=True)
    assert state["global_step"] == 4
    assert state["callbacks"]["ResumableTraining"]["samplers"][0]["settings"]["k"] == 2

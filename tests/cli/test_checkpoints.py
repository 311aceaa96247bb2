"""Checkpoints of ``ranklit fit`` load back: ``load_from_checkpoint(path)`` alone, and ``ranklit test --ckpt_path``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ranklit.cli import main
from ranklit.models import RetrievalModule
from tests.cli.test_cli import TINY
from tests.tiny import synthetic_args


@pytest.mark.parametrize(("config", "loss_name"), [("quickstart.yaml", "ROADMAPLoss"),
                                                   ("quickstart_happier.yaml", "HAPPIERLoss")])
def test_checkpoint_reloads_without_arguments_and_tests(config: str, loss_name: str, tmp_path: Path,
                                                        monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    common = [*TINY, *synthetic_args(), "--data.batch_sampler.init_args.p=2", "--baseline_validation=false"]
    main(["fit", "--config", config, *common, "--trainer.max_epochs=1",
          "--data.batch_sampler.init_args.batches_per_epoch=1",
          f"--trainer.default_root_dir={tmp_path}"])
    checkpoint = next(tmp_path.rglob("last.ckpt"))
    model = RetrievalModule.load_from_checkpoint(checkpoint)  # weights_only: nothing but configs in hparams
    assert type(model.loss).__name__ == loss_name
    trained = torch.load(checkpoint, weights_only=True)["state_dict"]
    torch.testing.assert_close(model.state_dict()["net.head.weight"], trained["net.head.weight"])
    main(["test", "--config", config, *common, f"--ckpt_path={checkpoint}"])

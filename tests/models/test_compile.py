"""``model.compile``, ``model.compile_loss`` and ``model.channels_last`` of ``RetrievalModule``: options checked,
the network (and loss) really compiled, a compiled fit equal to the eager one, checkpoints unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from torch import Tensor, nn

from ranklit.errors import UserError
from ranklit.losses import ROADMAPLoss
from ranklit.models import EmbeddingNet, RetrievalModule
from ranklit.models._compile import compile_options
from tests.cli.cli_cases import drive
from tests.ddp import scaled_timeout
from tests.tiny import tiny_datamodule


def _trainer(tmp_path: Path, **kwargs) -> L.Trainer:
    options = dict(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                   enable_model_summary=False, num_sanity_val_steps=0, default_root_dir=tmp_path)
    return L.Trainer(**{**options, **kwargs})


def _net() -> EmbeddingNet:
    torch.manual_seed(0)
    return EmbeddingNet("test_resnet", embedding_dim=8)


class _RecordingBackend:
    """A ``torch.compile`` backend that records the graphs it is given and runs them as they are."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, graph: torch.fx.GraphModule, example_inputs: list[Tensor]):
        self.graphs.append(graph)
        return graph.forward


def test_compile_options_are_checked_naming_the_key() -> None:
    assert compile_options(False) is None and compile_options(True) == {}
    assert compile_options({"mode": "max-autotune", "dynamic": False}) == {"mode": "max-autotune", "dynamic": False}
    with pytest.raises(ValueError, match=r"`model.compile` has key\(s\) \['mod'\] that torch.compile does not take"):
        RetrievalModule(_net(), ROADMAPLoss(), compile={"mod": "max-autotune"})
    with pytest.raises(TypeError, match=r"`model.compile` must be true, false or a mapping"):
        RetrievalModule(_net(), ROADMAPLoss(), compile="yes")  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"Unrecognized mode=fastest"):
        RetrievalModule(_net(), ROADMAPLoss(), compile={"mode": "fastest"})
    with pytest.raises(TypeError, match="`compile_loss` must be True or False"):
        RetrievalModule(_net(), ROADMAPLoss(), compile_loss=1)  # type: ignore[arg-type]


def test_a_bad_compile_mode_on_the_command_line_is_two_lines_and_exit_2(tmp_path: Path) -> None:
    (result,) = drive([["fit", "--config", "quickstart.yaml", "--model.compile", "{mode: fastest}",
                        "--trainer.logger=false"]], tmp_path)
    assert result["returncode"] == 2, result["stderr"][-2000:]
    error = result["stderr"]
    assert "Traceback" not in error and "`model.compile`" in error and "fastest" in error


def test_compile_without_a_cpp_compiler_is_one_error_line_with_the_ways_out(tmp_path: Path) -> None:
    """Inductor on the CPU without a working C++ compiler (here: ``CXX`` naming none) failed at the first batch with
    a 131-line traceback and exit code 1; a failed compile's own code generation can print thousands of lines."""
    args = [sys.executable, "-m", "ranklit.cli", "fit", "--config", "quickstart.yaml", "--model.compile", "true",
            "--model.net.init_args.backbone=test_resnet", "--trainer.max_steps=1", "--baseline_validation=false",
            "--trainer.logger=false", "--trainer.enable_checkpointing=false", "--trainer.enable_progress_bar=false"]
    env = {**os.environ, "CXX": str(tmp_path / "no-such-g++"), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    result = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=scaled_timeout(300))
    assert result.returncode == 2, result.stderr[-2000:]
    error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "Traceback" not in result.stderr and len(error) == 1, result.stderr[-2000:]
    assert "No working C++ compiler" in error[0] and "--model.compile false" in error[0] and "aot_eager" in error[0]


def test_the_network_and_the_loss_are_compiled_and_checkpoints_keep_their_keys(tmp_path: Path) -> None:
    backend = _RecordingBackend()
    module = RetrievalModule(_net(), ROADMAPLoss(), compile={"backend": backend}, compile_loss=True)
    trainer = _trainer(tmp_path, fast_dev_run=1)
    trainer.fit(module, datamodule=tiny_datamodule())
    code = "\n".join(graph.code for graph in backend.graphs)
    assert "conv2d" in code  # the network's graph
    assert " @ " in code  # the loss's scores ``queries @ refs.T``
    trainer.save_checkpoint(tmp_path / "run.ckpt")
    keys = set(torch.load(tmp_path / "run.ckpt", weights_only=False)["state_dict"])
    assert keys == set(RetrievalModule(_net(), ROADMAPLoss()).state_dict()) and not any("_orig_mod" in k for k in keys)
    RetrievalModule.load_from_checkpoint(tmp_path / "run.ckpt", net=_net(), loss=ROADMAPLoss())  # loads uncompiled


def _fit(tmp_path: Path, **options) -> tuple[float, dict[str, Tensor]]:
    module = RetrievalModule(_net(), ROADMAPLoss(), **options)
    trainer = _trainer(tmp_path, max_steps=2, limit_val_batches=0)
    trainer.fit(module, datamodule=tiny_datamodule())
    return float(trainer.callback_metrics["train/loss"]), {k: v.clone() for k, v in module.net.state_dict().items()}


@pytest.mark.slow
def test_a_fit_compiled_by_inductor_on_the_cpu_equals_the_eager_fit(tmp_path: Path) -> None:
    """Inductor fuses and reorders float32 operations: equal up to float32 rounding after two Adam steps."""
    eager_loss, eager_weights = _fit(tmp_path)
    compiled_loss, compiled_weights = _fit(tmp_path, compile=True)
    assert compiled_loss == pytest.approx(eager_loss, rel=1e-4)
    for name, value in eager_weights.items():
        torch.testing.assert_close(compiled_weights[name], value, rtol=1e-3, atol=1e-4, msg=name)


class _LayoutProbe(nn.Module):
    """Wraps a network and records whether each batch of images reaches it in channels-last layout."""

    def __init__(self, net: EmbeddingNet) -> None:
        super().__init__()
        self.net, self.embedding_dim, self.layouts = net, net.embedding_dim, []

    def forward(self, images: Tensor) -> Tensor:
        self.layouts.append(images.is_contiguous(memory_format=torch.channels_last) and not images.is_contiguous())
        return self.net(images)


@pytest.mark.parametrize("channels_last", [False, True])
def test_channels_last_puts_the_images_and_the_convolution_weights_in_that_layout(tmp_path, channels_last) -> None:
    probe = _LayoutProbe(_net())
    module = RetrievalModule(probe, ROADMAPLoss(), channels_last=channels_last)  # type: ignore[arg-type]
    _trainer(tmp_path, fast_dev_run=1).fit(module, datamodule=tiny_datamodule())
    assert len(probe.layouts) == 2 and set(probe.layouts) == {channels_last}  # training and validation batches
    weights = [p for p in probe.parameters() if p.ndim == 4 and p.shape[1] > 1 and p.shape[-1] > 1]  # layouts differ
    assert weights and all(w.is_contiguous() != channels_last for w in weights)

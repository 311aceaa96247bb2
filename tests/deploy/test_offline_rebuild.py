"""A run trained from pretrained weights (timm's, out of a Hugging Face cache; or a weights file) is exported, indexed,
tested and loaded with no hub, no cache and no weights file: the network is rebuilt with ``pretrained: false,
weights: null``, its weights the checkpoint's (docs/offline.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import timm
import torch
from safetensors.torch import save_file

import ranklit.models._backbones as backbones
from ranklit.models import EmbeddingNet, RetrievalModule
from tests.cli.cli_cases import drive

from .conftest import Images

_FIT = ["fit", "--config", "quickstart.yaml", "--model.net.init_args.backbone=test_resnet",
        "--model.net.init_args.embedding_dim=16", "--trainer.max_epochs=1", "--baseline_validation=false",
        "--data.batch_sampler.init_args.batches_per_epoch=2", "--trainer.enable_progress_bar=false",
        "--trainer.enable_model_summary=false", "--trainer.accelerator=cpu"]
_TAG = "test_resnet.r160_in1k"  # timm's pretrained tag of test_resnet: its hub repository is timm/<tag>


def hub_cache(home: Path, tag: str, state: dict[str, torch.Tensor]) -> None:
    """``HF_HOME`` as ``hf download timm/<tag>`` leaves it (docs/offline.md): the repository's folder under ``hub/``,
    ``refs/main`` naming a snapshot, the snapshot holding ``model.safetensors``."""
    repository, commit = home / "hub" / f"models--timm--{tag}", "0" * 40  # any commit hash
    (repository / "snapshots" / commit).mkdir(parents=True)
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text(commit)
    save_file(state, str(repository / "snapshots" / commit / "model.safetensors"))


@dataclass(frozen=True)
class Trained:
    root: Path
    weights: dict[str, torch.Tensor]  # the initial backbone weights both runs started from

    def run(self, name: str) -> tuple[Path, Path]:
        folder = self.root / "runs" / name / "version_0"
        return folder / "config.yaml", folder / "checkpoints" / "last.ckpt"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    """Two runs: `pretrained: true` (weights out of a Hugging Face cache, offline) and `weights: FILE`; then the
    cache and the file are deleted."""
    root = tmp_path_factory.mktemp("offline")
    torch.manual_seed(3)
    state = timm.create_model("test_resnet").state_dict()
    hub_cache(root / "hf", _TAG, state)
    save_file(state, str(root / "initial.safetensors"))
    initial = {"hub": "--model.net.init_args.pretrained=true",
               "file": f"--model.net.init_args.weights={root / 'initial.safetensors'}"}
    cases = [[*_FIT, f"--trainer.logger.init_args.save_dir={root / 'runs'}", f"--trainer.logger.init_args.name={name}",
              option] for name, option in initial.items()]
    results = drive(cases, root, HF_HUB_OFFLINE="1", HF_HOME=str(root / "hf"), TORCH_HOME=str(root / "hf"))
    for result in results:
        assert result["returncode"] == 0, result["stderr"][-3000:]
    assert "initial.safetensors (a safetensors file): 90 of 90 tensors of backbone 'test_resnet' loaded; the " \
           "classifier left out (2 tensors)." in results[1]["stderr"] + results[1]["stdout"]
    (root / "initial.safetensors").unlink()
    for path in sorted((root / "hf").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    return Trained(root, {k: v for k, v in state.items() if not k.startswith("fc.")})


@pytest.mark.slow  # six commands in one driver, about 30 s on 2 cores
def test_export_index_and_test_need_no_hub_cache_nor_weights_file(trained: Trained, images: Images) -> None:
    empty = trained.root / "empty"
    empty.mkdir()
    cases = []
    for name in ("hub", "file"):
        config, ckpt = trained.run(name)
        common = ["--config", str(config), "--ckpt_path", str(ckpt)]
        cases += [["export", *common, "--format", "torchscript", "--output", str(trained.root / f"{name}.pt")],
                  ["index", *common, "--images", str(images.gallery), "--output", str(trained.root / f"{name}_index"),
                   "--accelerator", "cpu", "--no-progress"],
                  ["test", *common, "--trainer.accelerator=cpu", "--trainer.enable_progress_bar=false",
                   f"--trainer.logger.init_args.save_dir={trained.root / 'tests'}"]]
    results = drive(cases, trained.root, HF_HUB_OFFLINE="1", HF_HOME=str(empty), TORCH_HOME=str(empty))
    for result in results:
        assert result["returncode"] == 0, (result["args"][0], result["stderr"][-3000:])
        assert "pretrained weights could not be downloaded" not in result["stderr"]
    for name in ("hub", "file"):
        assert (trained.root / f"{name}.pt").is_file() and (trained.root / f"{name}_index" / "net.pt").is_file()
    assert list(empty.iterdir()) == []  # nothing was downloaded nor cached


def test_load_from_checkpoint_touches_neither_the_hub_nor_the_file(trained: Trained,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def no_hub(name: str, **kwargs: object) -> None:
        raise AssertionError(f"the hub was asked for {name}")

    monkeypatch.setattr(backbones, "create_pretrained", no_hub)
    for name in ("hub", "file"):
        _, ckpt = trained.run(name)
        module = RetrievalModule.load_from_checkpoint(ckpt, map_location="cpu")
        saved = torch.load(ckpt, weights_only=True)["state_dict"]
        for key, value in module.net.state_dict().items():
            assert torch.equal(value, saved[f"net.{key}"]), key


def test_a_ranklit_checkpoint_as_weights_gives_its_backbone(trained: Trained) -> None:
    _, ckpt = trained.run("file")
    saved = torch.load(ckpt, weights_only=True)["state_dict"]
    net = EmbeddingNet("test_resnet", embedding_dim=8, weights=ckpt)
    for key, value in net.backbone.state_dict().items():
        assert torch.equal(value, saved[f"net.backbone.{key}"]), key
    assert any(not torch.equal(net.backbone.state_dict()[k], v) for k, v in trained.weights.items())  # trained

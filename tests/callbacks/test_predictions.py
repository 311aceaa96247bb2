"""``ranklit predict`` writes descriptor shards that load back as plain tensors; the one-command landmark test."""

from __future__ import annotations

from pathlib import Path

import lightning
import pytest
import torch

from ranklit.callbacks import load_predictions
from ranklit.cli import main
from ranklit.data import SyntheticHierarchy
from ranklit.errors import UserError
from ranklit.index import DescriptorShards, DescriptorWriter
from ranklit.landmarks import RevisitedTestSet
from ranklit.landmarks._whitening import learn_whitening
from ranklit.models import EmbeddingNet
from tests.cli.test_cli import TINY
from tests.data import layouts
from tests.oracles.landmarks import official_revisited, oracle_alpha_qe
from tests.tiny import SMALL, synthetic_args


@pytest.mark.parametrize("gallery", [False, True], ids=["one_set", "query_gallery"])
def test_predict_writes_every_test_sample_once(tmp_path: Path, monkeypatch, gallery: bool) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "emb" / "test"
    options = [f"--data.gallery_dataset.init_args.{key}={value}" for key, value in {**SMALL, "split": "train"}.items()]
    extra = ["--data.gallery_dataset=ranklit.data.SyntheticHierarchy", *options] if gallery else []
    main(["predict", "--config", "quickstart.yaml", *TINY, *synthetic_args(), f"--predictions_path={out}", *extra])
    predictions = load_predictions(out)
    if gallery:  # query/ and gallery/ sub-folders
        gallery_set = SyntheticHierarchy(split="train", **SMALL)
        assert torch.equal(predictions["gallery"]["labels"], gallery_set.labels)
        predictions = predictions["query"]
    expected = SyntheticHierarchy(split="test", **SMALL)
    assert predictions["embeddings"].shape == (len(expected), 128)
    assert torch.equal(predictions["index"], torch.arange(len(expected)))
    assert torch.equal(predictions["labels"], expected.labels)
    torch.testing.assert_close(predictions["embeddings"].norm(dim=1), torch.ones(len(expected)))


def test_shards_of_several_ranks_merge_and_drop_padding_repeats(tmp_path: Path) -> None:
    """Two writers as two DDP ranks (DistributedSampler order, the first sample repeated as padding)."""
    x = torch.randn(7, 4)
    for rank, index in ((0, [0, 2, 4, 6]), (1, [1, 3, 5, 0])):
        writer = DescriptorWriter(tmp_path, f"rank{rank}", shard_rows=3, run="r", group="", rank=rank, ranks=2)
        writer.append(x[index], torch.tensor(index), torch.tensor(index) % 2)
        writer.close()
    loaded = load_predictions(tmp_path)
    assert torch.equal(loaded["index"], torch.arange(7)) and torch.equal(loaded["labels"], torch.arange(7) % 2)
    torch.testing.assert_close(loaded["embeddings"], x)
    shards = DescriptorShards(tmp_path)
    assert shards.num_rows == 7
    rows = torch.tensor([[6, 4], [0, 3]])  # rows: those of rank 0, then those of rank 1
    torch.testing.assert_close(shards.take(rows), x[torch.tensor([[5, 1], [0, 6]])])
    (tmp_path / "rank1.json").unlink()  # an interrupted writer: the folder is refused, not read in part
    with pytest.raises(UserError, match=r"processes \[0\] of \[2\]"):
        DescriptorShards(tmp_path)


def test_revisited_eval_config_logs_the_table_and_equals_the_oracle(tmp_path: Path, monkeypatch) -> None:
    """`ranklit test --config revisited_eval.yaml` on a tiny ROxford + RParis equals the official protocol computed
    on the descriptors `ranklit predict` writes with the same config (whitening learnt from shards, then α-QE)."""
    monkeypatch.chdir(tmp_path)
    for name in ("roxford5k", "rparis6k"):
        layouts.revisited(tmp_path / "data" / name, name)
    net = EmbeddingNet("test_resnet", pretrained=False, embedding_dim=0, pooling="gem")
    generator = torch.Generator().manual_seed(0)
    train = torch.nn.functional.normalize(torch.randn(50, net.embedding_dim, generator=generator))
    writer = DescriptorWriter(tmp_path / "train", shard_rows=16)
    writer.append(train, torch.arange(50))
    writer.close()
    steps = '[{"class_path": "ranklit.landmarks.postprocess.LearntWhitening", "init_args": {"descriptors": "train"}}]'
    _checkpoint(tmp_path / "trained.ckpt", net)  # as a fit run writes it: the network's settings in its hparams
    args = ["--config", "revisited_eval.yaml", "--ckpt_path", "trained.ckpt", "--data.root", "data",
            "--data.num_workers=0", "--trainer.accelerator=cpu",
            f"--model.landmarks.init_args.postprocess={steps}",
            "--model.landmarks.init_args.postprocess+=ranklit.landmarks.postprocess.AlphaQueryExpansion",
            "--model.landmarks.init_args.postprocess.alpha=2.0", "--model.landmarks.init_args.postprocess.k=3"]
    main(["test", *args])
    main(["predict", *args, "--predictions_path", "descriptors"])
    logged = pd_row(tmp_path / "runs" / "revisited_eval" / "version_0" / "metrics.csv")
    descriptors = load_predictions(tmp_path / "descriptors")["embeddings"].double().numpy()
    whitening = learn_whitening(train.double())
    data = RevisitedTestSet(tmp_path / "data")
    for bench in data.benchmarks:
        q = whitening(torch.from_numpy(descriptors[bench.queries.start : bench.queries.stop])).numpy()
        g = whitening(torch.from_numpy(descriptors[bench.gallery.start : bench.gallery.stop])).numpy()
        expected = official_revisited(oracle_alpha_qe(q, g, 2.0, 3), g, bench.gnd, (1, 5, 10))
        for protocol in ("easy", "medium", "hard"):
            for key in ("map", "mp_at_1", "mp_at_5", "mp_at_10"):
                got = logged[f"test/{bench.name}/{protocol}/{key}"]
                assert got == pytest.approx(expected[f"{key}_{protocol}"], abs=1e-5), (bench.name, protocol, key)


def _checkpoint(path: Path, net: EmbeddingNet) -> None:
    """A checkpoint whose hyper-parameters name its network (test_resnet), as a `ranklit fit` run saves them."""
    settings = {"backbone": "test_resnet", "pretrained": False, "embedding_dim": 0, "pooling": "gem"}
    hparams = {"net": {"class_path": "ranklit.models.EmbeddingNet", "init_args": settings},
               "loss": {"class_path": "ranklit.losses.SoftBinAPLoss"}}
    state = {f"net.{key}": value for key, value in net.state_dict().items()}
    torch.save({"state_dict": state, "hyper_parameters": hparams, "pytorch-lightning_version": lightning.__version__},
               path)


def pd_row(path: Path) -> dict[str, float]:
    header, row = path.read_text().splitlines()[:2]
    return {key: float(value) for key, value in zip(header.split(","), row.split(","), strict=True) if value}


def test_multi_scale_descriptors_average_the_scales() -> None:
    from ranklit.losses import SmoothAPLoss
    from ranklit.models import RetrievalModule

    net = EmbeddingNet("test_resnet", pretrained=False, embedding_dim=0, pooling="gem").eval()
    images = torch.randn(2, 3, 32, 24, generator=torch.Generator().manual_seed(0))
    single = RetrievalModule(net, SmoothAPLoss()).eval()
    multi = RetrievalModule(net, SmoothAPLoss(), eval_scales=(1.0, 0.5)).eval()
    with torch.no_grad():
        half = torch.nn.functional.interpolate(images, size=(16, 12), mode="bilinear", antialias=True)
        expected = torch.nn.functional.normalize(net(images) + net(half), dim=1)
        torch.testing.assert_close(multi.embed(images), expected)
        assert torch.equal(single.embed(images), net(images))
    assert "eval_scales" not in multi.hparams  # a test config's scales apply to any checkpoint
    with pytest.raises(ValueError, match="`eval_scales` must list positive image scales"):
        RetrievalModule(net, SmoothAPLoss(), eval_scales=(1.0, 0.0))


def test_a_missing_whitening_folder_is_refused_before_embedding(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(["test", "--config", "revisited_eval.yaml", "--data.root", "nowhere", "--trainer.accelerator=cpu"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: data/landmarks_descriptors: no descriptor manifest") and "ranklit predict" in err
    assert "Traceback" not in err and len(err.splitlines()) <= 6

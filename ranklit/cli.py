"""The ``ranklit`` command line: a LightningCLI over :class:`RetrievalModule` and :class:`RetrievalDataModule`.

``ranklit fit --config configs/roadmap_inat.yaml --data.root /data/inat`` trains; ``validate``, ``test`` and
``predict`` evaluate or embed; ``--print_config`` prints the full resolved configuration. A bare config name
(``--config quickstart.yaml``) that does not exist relative to the working directory is looked up in the
repository's ``configs/`` folder, so the quick start works from any directory. Unknown keys are rejected.

Before ``fit`` the untrained (or pretrained) model is validated once and its metrics are logged at step 0, the
baseline every curve starts from; ``--baseline_validation false`` switches it off. ``ranklit predict`` writes the
embeddings, labels and dataset indices of the test split to ``--predictions_path`` (default ``predictions.pt``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from lightning.pytorch.cli import LightningCLI
from typing_extensions import override

from ranklit.data.datamodule import RetrievalDataModule
from ranklit.models.module import RetrievalModule
from ranklit.models.predictions import EmbeddingWriter
from ranklit.models.ranking_images import RankingGridLogger

__all__ = ["RanklitCLI", "main", "resolve_config_paths"]

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


class RanklitCLI(LightningCLI):
    """LightningCLI with ranklit's model and data classes, a baseline validation, and config-name lookup."""

    @override
    def add_arguments_to_parser(self, parser) -> None:  # type: ignore[no-untyped-def]
        # Proxy-based losses (ClusterLoss, HAPPIERLoss, CSLLoss, NormSoftmax, ProxyNCA++) get the number of fine
        # training classes from the data and the embedding dimension from the network: never typed twice.
        parser.link_arguments("data.num_classes", "model.loss.init_args.num_classes", apply_on="instantiate")
        parser.link_arguments("model.net.init_args.embedding_dim", "model.loss.init_args.embedding_dim")
        # Always on; logs a grid of validation queries and their top-k only when the logger is wandb.
        parser.add_lightning_class_args(RankingGridLogger, "ranking_grid")
        parser.add_argument(
            "--baseline_validation",
            type=bool,
            default=True,
            help="Validate the model once before training and log its metrics at step 0.",
        )
        parser.add_argument(
            "--predictions_path",
            type=str,
            default="predictions.pt",
            help="File where `ranklit predict` writes embeddings, labels and dataset indices.",
        )

    @override
    def before_fit(self) -> None:
        if self.config[self.subcommand].get("baseline_validation", True) and self.datamodule.hparams.val_split:
            self.trainer.validate(self.model, datamodule=self.datamodule, verbose=False)

    @override
    def before_predict(self) -> None:
        if not any(isinstance(c, EmbeddingWriter) for c in self.trainer.callbacks):
            self.trainer.callbacks.append(EmbeddingWriter(self.config[self.subcommand]["predictions_path"]))


def resolve_config_paths(args: list[str]) -> list[str]:
    """Replace ``--config NAME`` by ``configs/NAME`` when ``NAME`` is not a file relative to the working directory.

    >>> resolve_config_paths(["fit", "--config", "quickstart.yaml"])[-1].endswith("configs/quickstart.yaml")
    True
    """
    resolved = list(args)
    for i, arg in enumerate(resolved):
        if arg == "--config" and i + 1 < len(resolved):
            resolved[i + 1] = _resolve(resolved[i + 1])
        elif arg.startswith("--config="):
            resolved[i] = "--config=" + _resolve(arg.split("=", 1)[1])
    return resolved


def _resolve(name: str) -> str:
    if Path(name).exists():
        return name
    for candidate in (CONFIG_DIR / name, CONFIG_DIR / Path(name).name):
        if candidate.exists():
            return str(candidate)
    return name


def main(args: list[str] | None = None) -> None:
    """Entry point of the ``ranklit`` console script."""
    RanklitCLI(
        RetrievalModule,
        RetrievalDataModule,
        args=resolve_config_paths(sys.argv[1:] if args is None else args),
        save_config_kwargs={"overwrite": True},
    )


if __name__ == "__main__":
    main()

"""``RetrievalModule.load_from_checkpoint`` through ranklit's weights-only loader (:mod:`ranklit._checkpoint`).

Lightning's own ``load_from_checkpoint`` unpickles the whole file (``weights_only=False`` up to Lightning 2.5.x;
torch's default, which ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` turns off, from 2.6) and, up to 2.5.x, imports and calls
the hyper-parameter ``_instantiator`` the file names. Here the file is read once, loaded weights-only (a checkpoint
that names code to run is refused with one line naming it, before anything of it runs), its ``_instantiator`` must
be Lightning's ``instantiate_module`` (what the ``ranklit`` command writes), its hyper-parameters (a config: the
``class_path``/``init_args`` of the parts) pass :func:`ranklit._injected.check_injected` (``model.optimizer: os.system``
would otherwise be called while the module is built), and only then are the same bytes handed to Lightning (which
then finds only what the weights-only load accepted). Checked with Lightning 2.5.5 and 2.6.6.

The network is rebuilt with ``pretrained: false, weights: null`` (:func:`ranklit._checkpoint.offline_rebuild`; given
to Lightning as the ``net`` keyword, which takes precedence over the saved one): its weights are the checkpoint's, so
loading needs neither the Hugging Face Hub nor the run's initial weights file. A ``net`` passed by the caller is used
as given.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO, Any

import lightning as L
from typing_extensions import Self

from ranklit._checkpoint import load_checkpoint, offline_rebuild
from ranklit._injected import check_injected
from ranklit.errors import UserError

__all__ = ["SafeLoading"]

_INSTANTIATORS = ("lightning.pytorch.cli.instantiate_module", "pytorch_lightning.cli.instantiate_module")


class SafeLoading(L.LightningModule):
    """A LightningModule whose :meth:`load_from_checkpoint` loads weights only (module docstring)."""

    @classmethod
    def load_from_checkpoint(  # type: ignore[override]
        cls,
        checkpoint_path: str | Path | IO[bytes],
        map_location: Any = None,
        hparams_file: str | Path | None = None,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Self:
        """Lightning's ``load_from_checkpoint``, after a weights-only load of the file (module docstring).

        Raises:
            UserError: a missing file, a file that names code to run or is not a checkpoint, or a hyper-parameter
                ``_instantiator`` other than Lightning's.
        """
        name = str(checkpoint_path) if isinstance(checkpoint_path, (str, Path)) else "the checkpoint"
        if isinstance(checkpoint_path, (str, Path)) and not Path(checkpoint_path).is_file():
            load_checkpoint(checkpoint_path)  # the error: not found
        path = checkpoint_path if isinstance(checkpoint_path, (str, Path)) else None
        data = Path(path).read_bytes() if path is not None else checkpoint_path.read()  # type: ignore[union-attr]
        checkpoint = load_checkpoint(io.BytesIO(data), name=name)
        hparams = checkpoint.get("hyper_parameters") if isinstance(checkpoint, dict) else None
        instantiator = hparams.get("_instantiator") if isinstance(hparams, dict) else None
        if instantiator is not None and instantiator not in _INSTANTIATORS:
            raise UserError(
                f"{name}: refused: its hyper-parameters name `_instantiator: {instantiator}`, code to call; a "
                f"checkpoint of ranklit names {_INSTANTIATORS[0]} or nothing."
            )
        try:
            check_injected({"model": hparams} if isinstance(hparams, dict) else {})  # they are a config
        except UserError as error:
            raise UserError(f"{name}: refused: its hyper-parameters: {error}") from None
        net = hparams.get("net") if isinstance(hparams, dict) else None
        if "net" not in kwargs and isinstance(net, dict) and isinstance(net.get("init_args"), dict):
            init_args = dict(net["init_args"])
            if offline_rebuild(init_args):  # the checkpoint holds the weights: no hub, no initial weights file
                kwargs["net"] = {**net, "init_args": init_args}
        loaded = super().load_from_checkpoint(io.BytesIO(data), map_location, hparams_file, strict, **kwargs)
        return loaded

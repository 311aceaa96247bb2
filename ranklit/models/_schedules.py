"""Learning-rate schedules of the reference experiments that ``torch.optim.lr_scheduler`` does not provide.

The configs use torch's own schedulers where they fit: ``MultiStepLR`` (ROADMAP's step decay at epochs 30 and 70,
×0.3), ``CosineAnnealingLR`` (HAPPIER on SOP and DyML), ``LinearLR`` (the listwise AP loss's linear decay to 0).
HAPPIER on iNaturalist uses a cosine decay after a 5-epoch linear warm-up: :class:`WarmupCosineLR`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

__all__ = ["WarmupCosineLR"]


@dataclass
class _WarmupCosineFactor:
    """The multiplicative factor of epoch ``e``; a callable object so ``LambdaLR.state_dict`` saves its fields."""

    warmup_epochs: int
    max_epochs: int
    min_factor: float

    def __call__(self, epoch: int) -> float:
        if epoch < self.warmup_epochs:
            return (epoch + 1) / self.warmup_epochs
        progress = min(1.0, (epoch - self.warmup_epochs) / (self.max_epochs - self.warmup_epochs))
        return self.min_factor + (1.0 - self.min_factor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def _non_negative_int(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"`{name}` must be a non-negative integer number of epochs, got {value!r}.")
    return value


class WarmupCosineLR(LambdaLR):
    """Linear warm-up for ``warmup_epochs``, then cosine decay to ``min_factor`` × the base rate at ``max_epochs``.

    The factor applied to every parameter group's initial learning rate at epoch ``e`` (0-based) is

    - ``(e + 1) / W`` for ``e < W`` (``W = warmup_epochs``; the first epoch already trains, at ``1/W`` of the rate,
      and epoch ``W - 1`` reaches the full rate);
    - ``m + (1 - m) · ½ (1 + cos(π (e − W) / (T − W)))`` for ``W ≤ e ≤ T`` (``T = max_epochs``, ``m = min_factor``),
      i.e. ``CosineAnnealingLR`` over the remaining ``T − W`` epochs;
    - ``m`` after ``T``.

    This is the schedule of HAPPIER on iNaturalist (Ramzi et al., ECCV 2022: cosine decay with a 5-epoch warm-up).
    Each parameter group (backbone, head, proxies) keeps its own base rate. The scheduler is stepped once per epoch
    by :class:`ranklit.models.RetrievalModule`; stepped per iteration it counts iterations instead. ``W = 0`` is a
    plain cosine decay. O(1) time and memory per step; resumable from a checkpoint (its state is in ``state_dict``).

    Args:
        optimizer: the wrapped optimizer.
        warmup_epochs: epochs of linear warm-up ``W >= 0``.
        max_epochs: epoch ``T > W`` at which the cosine reaches ``min_factor`` (the training length).
        min_factor: final learning rate as a fraction of the initial one, in ``[0, 1]``.
        last_epoch: index of the last epoch when resuming (``-1`` starts afresh).

    Raises:
        ValueError: ``warmup_epochs`` or ``max_epochs`` is not a non-negative integer, ``max_epochs <= warmup_epochs``,
            or ``min_factor`` is outside ``[0, 1]``.

    Example:
        >>> import torch
        >>> optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        >>> scheduler = WarmupCosineLR(optimizer, warmup_epochs=2, max_epochs=4)
        >>> rates = []
        >>> for _ in range(5):
        ...     rates.append(round(optimizer.param_groups[0]["lr"], 3))
        ...     optimizer.step()
        ...     scheduler.step()
        >>> rates
        [0.5, 1.0, 1.0, 0.5, 0.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        warmup_epochs: int,
        max_epochs: int,
        min_factor: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        warmup_epochs = _non_negative_int(warmup_epochs, "warmup_epochs")
        max_epochs = _non_negative_int(max_epochs, "max_epochs")
        if max_epochs <= warmup_epochs:
            raise ValueError(
                f"`max_epochs` ({max_epochs}) must exceed `warmup_epochs` ({warmup_epochs}): the cosine decay runs "
                "from the end of the warm-up to `max_epochs`; set it to the training length (`trainer.max_epochs`)."
            )
        if isinstance(min_factor, bool) or not isinstance(min_factor, (int, float)) or not 0.0 <= min_factor <= 1.0:
            raise ValueError(
                f"`min_factor` must be a number in [0, 1] (final rate / initial rate), got {min_factor!r}."
            )
        self.warmup_epochs, self.max_epochs, self.min_factor = warmup_epochs, max_epochs, float(min_factor)
        super().__init__(optimizer, _WarmupCosineFactor(warmup_epochs, max_epochs, float(min_factor)), last_epoch)

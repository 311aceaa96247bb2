"""The error that stops training on non-finite numbers, with the causes a user can act on.

Three causes meet in a NaN or an infinity: a learning rate too high (the weights diverge), the **precision** (bf16
autocast on the CPU: PyTorch's oneDNN convolutions are known to return NaN weight gradients for some shapes, e.g. a
stride-2 padded 3 x 3 convolution of a 1 x 1 feature map) and the **input size** (a backbone shrinks tiny images to
1 x 1 feature maps deep in the network, where those kernels and the pooling misbehave). The message names the run's
own precision, device and image size beside each way out, so that "check the learning rate" is not the only hint
when the learning rate is fine.

Example:
    >>> print(divergence("The training loss (SupAPLoss) is nan", "at global step 3 (epoch 0, batch 3)",
    ...                  "bf16-mixed", "cpu", (8, 8)))  # doctest: +ELLIPSIS
    The training loss (SupAPLoss) is nan at global step 3 (epoch 0, batch 3). Possible causes: the learning rate ...
"""

from __future__ import annotations

__all__ = ["divergence"]


def divergence(what: str, where: str, precision: str, device: str, size: tuple[int, int] | None) -> str:
    """The message for ``what`` (e.g. "The training loss (X) is nan") found ``where`` (the step), naming the run's
    ``precision`` on ``device`` and the images' ``size`` (height, width; ``None``: not known)."""
    bf16_on_cpu = "bf16" in precision and device == "cpu"
    precision_note = (
        "bf16 on the CPU: PyTorch's CPU convolutions are known to return NaN gradients under bf16 autocast for some "
        "shapes" if bf16_on_cpu else "a reduced precision can overflow"
    )
    images = f"{size[0]} x {size[1]} images" if size is not None else "the images"
    return (
        f"{what} {where}. Possible causes: the learning rate (lower `--model.optimizer.init_args.lr`); the precision "
        f"(this run: `--trainer.precision {precision}` on the {device}; {precision_note}: try `--trainer.precision "
        f"32`); the input size ({images}: a backbone shrinks small images to 1 x 1 feature maps deep in the network: "
        "raise `--data.resize_size` / `--data.crop_size`); or the data (`ranklit data check`)."
    )

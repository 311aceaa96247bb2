"""Images: from a file (or its bytes) to the tensor a network takes.

- ``decoding`` — a file decoded to 8-bit RGB whatever its mode; ``_tensor_jpeg`` — a JPEG straight to a ``uint8``
  tensor where that gives Pillow's pixels; ``_unreadable`` — why a file cannot be read, as one line;
- ``transforms`` — the training and test transforms; ``_crop_first`` — the crop drawn from the header, then decoded;
  ``_after_crop`` — the steps after the crop as direct torchvision calls;
- ``_encoded``, ``_device_decode`` — decoding on the device: the worker's bytes and crop box, the device's decode;
- ``preprocess`` — the evaluation preprocessing with numpy and Pillow only (what a server feeds an exported model).
"""

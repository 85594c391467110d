"""Image inputs and outputs, as coremltools' ``ct.ImageType`` and ``ct.colorlayout``.

    model = milkit.convert(prog, inputs=[milkit.ImageType(name="image", shape=(1, 3, 224, 224),
                                                          scale=1 / 255, bias=[-0.5, -0.5, -0.5],
                                                          color_layout=milkit.colorlayout.BGR)],
                           outputs=[milkit.ImageType(color_layout=milkit.colorlayout.RGB)])
    out = model.predict({"image": PIL.Image.open("cat.png").convert("RGB")})

Core ML hands an image input to the program as a tensor (1, C, H, W): fp32 pixel values 0..255 in
the layout's channel order (RGB, BGR, or one GRAYSCALE channel), or fp16 for GRAYSCALE_FLOAT16.
The passes ``common::image_input_preprocess`` (a channel-last program input made channel first,
with a transpose back) and ``mil_backend::insert_image_preprocessing_ops`` (``x * scale + bias``)
put the rest into the program. Pillow is needed only to predict with images (imported then).
"""

from __future__ import annotations

import enum
import numbers
from typing import Any, Sequence

__all__ = ["ColorLayout", "colorlayout", "ImageType"]


class ColorLayout(enum.Enum):
    """``ct.colorlayout``: how Core ML fills (or reads) an image's tensor."""

    RGB = "RGB"
    BGR = "BGR"
    GRAYSCALE = "G"
    GRAYSCALE_FLOAT16 = "G_FLOAT16"


colorlayout = ColorLayout

_LAYOUT_MSG = ("color_layout should be an enum of type milkit.colorlayout, i.e. one of: {milkit.colorlayout.RGB, "
               "milkit.colorlayout.BGR, milkit.colorlayout.GRAYSCALE, milkit.colorlayout.GRAYSCALE_FLOAT16}")


def _as_layout(c: Any) -> ColorLayout:
    if isinstance(c, ColorLayout):
        return c
    if isinstance(c, str):  # coremltools' older way: "G", "RGB", "BGR"
        if c not in ("G", "RGB", "BGR"):
            raise ValueError(_LAYOUT_MSG)
        return ColorLayout(c)
    if isinstance(c, enum.Enum) and c.value in ("RGB", "BGR", "G", "G_FLOAT16"):  # coremltools' own enum
        return ColorLayout(c.value)
    raise ValueError(_LAYOUT_MSG)


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


class ImageType:
    """An image input or output (``ct.ImageType``).

    Args:
        name: the program's input (or, for outputs, the new output name).
        shape: the input's shape: ints and ``RangeDim`` s, a ``Shape``, or ``EnumeratedShapes``
            (NCHW, or NHWC with ``channel_first=False``).
        scale: multiplies every pixel value (a float).
        bias: added after scaling: a float for GRAYSCALE / GRAYSCALE_FLOAT16, three floats (one per
            channel, in the layout's order) for RGB / BGR.
        color_layout: a ``milkit.colorlayout`` (or "RGB", "BGR", "G").
        channel_first: ``False`` when the program reads the input as (N, H, W, C); ``None`` means
            channel first (as coremltools does for a MIL program).
    """

    def __init__(self, name: str | None = None, shape: Any = None, scale: float = 1.0, bias: Any = None,
                 color_layout: Any = ColorLayout.RGB, channel_first: bool | None = None) -> None:
        from .input_types import Shape

        self.name = name
        self.shape_default = None
        if isinstance(shape, Shape):
            self.shape_default = shape.default
            shape = shape.shape
        self.shape = shape
        self.color_layout = _as_layout(color_layout)
        grayscale = self.color_layout in (ColorLayout.GRAYSCALE, ColorLayout.GRAYSCALE_FLOAT16)
        if not _is_number(scale):
            raise ValueError(f"ImageType: scale must be a float, got {scale!r}")
        self.scale = scale
        if bias is None:
            bias = 0.0 if grayscale else [0.0, 0.0, 0.0]
        if grayscale and not _is_number(bias):
            raise ValueError(f"ImageType: bias of a {self.color_layout.name} image must be a float, got {bias!r}")
        if not grayscale and (isinstance(bias, (str, bytes)) or not isinstance(bias, Sequence) or len(bias) != 3
                              or not all(_is_number(b) for b in bias)):
            raise ValueError(f"ImageType: bias of a {self.color_layout.name} image must be a list of 3 floats "
                             f"(one per channel), got {bias!r}")
        self.bias = bias
        if channel_first is not None and not isinstance(channel_first, bool):
            raise ValueError(f"ImageType: channel_first must be True, False or None, got {channel_first!r}")
        self.channel_first = channel_first
        from . import types

        self.dtype = types.fp16 if self.color_layout is ColorLayout.GRAYSCALE_FLOAT16 else None

    @property
    def _tensor_dtype(self) -> Any:
        """The dtype of the tensor Core ML fills or reads: fp16 for GRAYSCALE_FLOAT16, else fp32."""
        from . import types

        return types.fp16 if self.color_layout is ColorLayout.GRAYSCALE_FLOAT16 else types.fp32

    def __repr__(self) -> str:
        return (f"ImageType(name={self.name}, shape={self.shape}, scale={self.scale}, bias={self.bias}, "
                f"color_layout={self.color_layout}, channel_first={self.channel_first})")


def _image_input_record(t: ImageType, index: int, var: Any, enumerated: Any) -> dict:
    """The dict ``Function._set_image_inputs`` takes for an ImageType on input `index`."""
    from .input_types import RangeDim

    default: list = []
    if enumerated is not None:
        default = list(enumerated.default)
    elif t.shape_default is not None:
        default = [d if isinstance(d, int) else 1 for d in t.shape_default]
    elif t.shape is not None:
        default = [d.default if isinstance(d, RangeDim) else d if isinstance(d, int) else 1 for d in t.shape]
    grayscale = t.color_layout in (ColorLayout.GRAYSCALE, ColorLayout.GRAYSCALE_FLOAT16)
    return {
        "input": index,
        "color_layout": t.color_layout.value,
        "scale": float(t.scale),
        "bias": [float(t.bias)] if grayscale else [float(b) for b in t.bias],
        "channel_first": True if t.channel_first is None else t.channel_first,
        "enumerated_shapes": [list(s) for s in enumerated.shapes] if enumerated is not None else [],
        "default_shape": [int(d) for d in default],
    }


def _check_image_input(t: ImageType, name: str, var: Any) -> None:
    """The program's input must be a tensor of the dtype Core ML fills, of rank 4 (3 or more for
    a channel-last input, which image_input_preprocess transposes)."""
    from . import types

    if var._kind != "tensor":
        raise ValueError(f"For the image input, {name!r}, its type in the MIL program must be tensor. "
                         f"Instead it is {var._kind}.")
    want = t._tensor_dtype
    if var.dtype is not want:
        raise ValueError(f"image input {name!r} ({t.color_layout.name}) must be "
                         f"{types.builtin_to_string(want)} in the program, not {types.builtin_to_string(var.dtype)}: "
                         "Core ML fills it with that dtype")
    if len(var.shape) < 3:
        raise ValueError(f"image input {name!r} must have rank 4, its shape is {tuple(var.shape)}")


def _check_image_output(o: ImageType, i: int) -> None:
    """coremltools' rules for an ImageType in ``outputs``."""
    if o.shape is not None:
        raise ValueError("The 'shape' argument must not be specified for the outputs, since it is automatically "
                         "inferred from the input shapes and the ops in the model")
    if o.scale != 1.0:
        raise ValueError("'scale' must be 1.0 for a output of ImageType")
    if not (o.bias == 0.0 or o.bias == [0.0, 0.0, 0.0] or list(o.bias) == [0, 0, 0]):
        raise ValueError("'bias' must be None or 0 for an output of ImageType")
    if o.channel_first is not None:
        raise ValueError("'channel_first' must be None for an output of ImageType")


def _input_types_of(fn: Any) -> dict:
    """Input name -> ImageType for the function's image inputs (as recorded in the program)."""
    from .input_types import EnumeratedShapes

    names = list(fn.inputs)
    out = {}
    for rec in fn._image_inputs():
        layout = ColorLayout(rec["color_layout"])
        gray = layout in (ColorLayout.GRAYSCALE, ColorLayout.GRAYSCALE_FLOAT16)
        bias = rec["bias"] or ([0.0] if gray else [0.0, 0.0, 0.0])
        shape = None
        if len(rec["enumerated_shapes"]) >= 2:
            shape = EnumeratedShapes(rec["enumerated_shapes"], default=rec["default_shape"] or None)
        t = ImageType(name=names[rec["input"]], shape=shape, scale=rec["scale"], bias=bias[0] if gray else bias,
                      color_layout=layout, channel_first=rec["channel_first"])
        if rec["default_shape"] and shape is None:
            t.shape_default = tuple(rec["default_shape"])
        out[t.name] = t
    return out


# ---- PIL images <-> tensors (MLModel.predict) --------------------------------------------------
_PIL_MODE = {"RGB": "RGB", "BGR": "RGB", "GRAYSCALE": "L", "GRAYSCALE_FLOAT16": "F"}


def _pil() -> Any:
    try:
        from PIL import Image
    except ImportError as e:  # pragma: no cover - pillow is a dev requirement
        raise ImportError("image inputs and outputs need Pillow: pip install pillow") from e
    return Image


def image_to_array(img: Any, name: str, color_space: str) -> Any:
    """A PIL image as the tensor Core ML feeds an input of `color_space` (the description's
    "RGB", "BGR", "GRAYSCALE", "GRAYSCALE_FLOAT16"): (1, C, H, W), pixel values 0..255 as fp32
    (RGB / BGR channel order, or one grayscale channel), or the 'F' image's values as fp16."""
    import numpy as np

    Image = _pil()
    if not isinstance(img, Image.Image):
        raise TypeError(f"Image input, {name!r} must be of type PIL.Image.Image in the input dict")
    mode = _PIL_MODE[color_space]
    if img.mode != mode:
        kind = {"RGB": "RGB/BGR", "BGR": "RGB/BGR"}.get(color_space, color_space)
        raise TypeError(f"{kind} image input, {name!r}, must be of type PIL.Image.Image with mode=={mode!r} "
                        f"(got mode {img.mode!r})")
    a = np.asarray(img)
    if color_space in ("RGB", "BGR"):
        a = a.transpose(2, 0, 1)
        if color_space == "BGR":
            a = a[::-1]
        return np.ascontiguousarray(a[None].astype(np.float32))
    dt = np.float16 if color_space == "GRAYSCALE_FLOAT16" else np.float32
    return np.ascontiguousarray(a[None, None].astype(dt))


def array_to_image(a: Any, name: str, color_space: str) -> Any:
    """An output tensor (1, C, H, W) as the PIL image Core ML returns for `color_space`: RGB / BGR
    as an 'RGBA' image (alpha 255) of the values clipped to 0..255 and rounded, GRAYSCALE as 'L',
    GRAYSCALE_FLOAT16 as 'F' (the values as they are)."""
    import numpy as np

    Image = _pil()
    a = np.asarray(a)
    channels = 3 if color_space in ("RGB", "BGR") else 1
    if a.ndim != 4 or a.shape[0] != 1 or a.shape[1] != channels:
        raise ValueError(f"image output {name!r} ({color_space}) must have shape (1, {channels}, H, W), "
                         f"got {a.shape}")
    if color_space == "GRAYSCALE_FLOAT16":
        return Image.fromarray(np.ascontiguousarray(a[0, 0].astype(np.float32)), "F")
    px = np.clip(np.rint(a[0].astype(np.float32)), 0, 255).astype(np.uint8)
    if color_space == "GRAYSCALE":
        return Image.fromarray(np.ascontiguousarray(px[0]), "L")
    if color_space == "BGR":
        px = px[::-1]
    rgba = np.concatenate([px, np.full((1,) + px.shape[1:], 255, np.uint8)], axis=0)
    return Image.fromarray(np.ascontiguousarray(rgba.transpose(1, 2, 0)), "RGBA")


def check_image_size(a: Any, name: str, desc: dict) -> None:
    """The image's size must be the description's (or one of its enumerated sizes / inside its
    size range)."""
    h, w = int(a.shape[-2]), int(a.shape[-1])
    if "enumeratedSizes" in desc:
        sizes = [tuple(s) for s in desc["enumeratedSizes"]]
        if (h, w) not in sizes:
            raise ValueError(f"image input {name!r} is {w}x{h} (width x height), which is not one of the model's "
                             f"sizes {[f'{sw}x{sh}' for sh, sw in sizes]}")
        return
    if "sizeRange" in desc:
        for what, v in (("height", h), ("width", w)):
            lo, hi = desc["sizeRange"][what]
            if v < lo or (hi >= 0 and v > hi):
                raise ValueError(f"image input {name!r} has {what} {v}, outside the model's range "
                                 f"[{lo}, {hi if hi >= 0 else 'unbounded'}]")
        return
    if (h, w) != (desc["height"], desc["width"]):
        raise ValueError(f"image input {name!r} is {w}x{h} (width x height); the model takes "
                         f"{desc['width']}x{desc['height']}")

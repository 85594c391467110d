"""Shared by the compression tests: the same small models built with milkit and with coremltools,
and comparisons of the packages both libraries write."""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Dict, Tuple

import milkit
import numpy as np


def ct_modules() -> Tuple[Any, Any, Any]:
    """coremltools, its Builder and coremltools.optimize (imported on first use: slow)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import coremltools as ct
        import coremltools.optimize as cto
        from coremltools.converters.mil import Builder as mb
    return ct, mb, cto


def weights(seed: int = 0) -> Dict[str, np.ndarray]:
    """Weights of the models below (fp32, as a user's framework hands them over)."""
    rng = np.random.default_rng(seed)
    return {
        "lin": rng.standard_normal((64, 96)).astype(np.float32),
        "conv": (rng.standard_normal((32, 8, 3, 3)) * 0.2).astype(np.float32),
        "mm": rng.standard_normal((96, 48)).astype(np.float32),
        "small": rng.standard_normal((8, 8)).astype(np.float32),
    }


def model_fn(B: Any, W: Dict[str, np.ndarray], target: Any, transpose_y: bool = False) -> Any:
    """A program with a linear, a conv, a matmul against a const and a small linear."""
    mm = W["mm"].T.copy() if transpose_y else W["mm"]

    @B.program(input_specs=[B.TensorSpec(shape=(1, 8, 6, 12)), B.TensorSpec(shape=(2, 96))], opset_version=target)
    def prog(img, x):
        c = B.conv(x=img, weight=W["conv"], pad_type="same", name="conv")
        h = B.linear(x=x, weight=W["lin"], name="lin")
        s = B.linear(x=B.slice_by_size(x=h, begin=[0, 0], size=[2, 8]), weight=W["small"], name="small")
        m = B.matmul(x=x, y=mm, transpose_y=transpose_y, name="mm")
        return c, h, s, m

    return prog


def convert_both(target_name: str, transpose_y: bool = False, seed: int = 0) -> Tuple[Any, Any]:
    """(coremltools MLModel, milkit MLModel) of the same program."""
    ct, mb, _ = ct_modules()
    W = weights(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = ct.convert(model_fn(mb, W, getattr(ct.target, target_name), transpose_y), convert_to="mlprogram",
                       minimum_deployment_target=getattr(ct.target, target_name), skip_model_load=True)
    b = milkit.convert(model_fn(milkit.Builder, W, getattr(milkit.target, target_name), transpose_y),
                       minimum_deployment_target=getattr(milkit.target, target_name))
    return a, b


def package_files(path: str) -> Tuple[Any, bytes]:
    """(the Model proto without the tools' own build info and metadata, weight.bin's bytes)."""
    from coremltools.proto import Model_pb2

    base = os.path.join(path, "Data", "com.apple.CoreML")
    spec = Model_pb2.Model()
    with open(os.path.join(base, "model.mlmodel"), "rb") as f:
        spec.ParseFromString(f.read())
    spec.mlProgram.attributes.clear()
    spec.description.ClearField("metadata")
    wpath = os.path.join(base, "weights", "weight.bin")
    blob = open(wpath, "rb").read() if os.path.exists(wpath) else b""
    return spec, blob


def assert_same_package(ct_model: Any, mk_model: Any, tmp: str) -> None:
    """Both packages hold the same program and the same weight.bin bytes."""
    a, b = os.path.join(tmp, "ct.mlpackage"), os.path.join(tmp, "mk.mlpackage")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ct_model.save(a)
    mk_model.save(b)
    (sa, wa), (sb, wb) = package_files(a), package_files(b)
    assert wa == wb, f"weight.bin differs ({len(wa)} vs {len(wb)} bytes)"
    assert sa == sb, "model.mlmodel differs"


def both(fn: Callable[[Any, Any], Any], ct_model: Any, mk_model: Any) -> Tuple[Any, Any]:
    """Runs fn on coremltools' model with coremltools' optimize and on milkit's with milkit's:
    returns (ct result or the exception, milkit result or the exception)."""
    _, _, cto = ct_modules()
    import milkit.optimize as mto

    out = []
    for mod, m in ((cto, ct_model), (mto, mk_model)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.append(fn(mod, m))
        except Exception as e:  # compared by the caller
            out.append(e)
    return out[0], out[1]


def sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    """Signal to quantization noise ratio in dB."""
    ref = np.asarray(ref, np.float64)
    noise = np.sum((ref - np.asarray(got, np.float64)) ** 2)
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(ref ** 2) / noise))

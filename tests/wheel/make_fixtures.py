"""Makes the files the clean-root wheel check imports, with their reference outputs (run on the
host, where torch, onnx and onnxruntime are installed; the clean root has none of them).

    python tests/wheel/make_fixtures.py OUTDIR

Writes OUTDIR/model.pt2 (torch.export, dynamic sequence length) with torch eager's outputs, and
OUTDIR/model.onnx (a symbolic batch) with onnxruntime's, in OUTDIR/expected.npz.
"""

from __future__ import annotations

import os
import sys

import numpy as np

__all__ = ["main"]


def _pt2(out: str, expected: dict[str, np.ndarray]) -> None:
    import torch
    import torch.nn.functional as F

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln = torch.nn.LayerNorm(32)
            self.qkv = torch.nn.Linear(32, 96)
            self.proj = torch.nn.Linear(32, 32)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln(x)).reshape(b, s, 3, 4, 8).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, 32))
            return x + self.mlp(x)

    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(1, 7, 32)
    ep = torch.export.export(model, (x,), dynamic_shapes={"x": {1: torch.export.Dim("seq", min=2, max=64)}})
    torch.export.save(ep, os.path.join(out, "model.pt2"))
    with torch.no_grad():
        for n in (5, 11):
            xi = torch.randn(1, n, 32)
            expected[f"pt2_x_{n}"] = xi.numpy()
            expected[f"pt2_y_{n}"] = model(xi).numpy()


def _onnx(out: str, expected: dict[str, np.ndarray]) -> None:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    w1 = rng.standard_normal((16, 24)).astype(np.float32)
    b1 = rng.standard_normal(24).astype(np.float32)
    w2 = rng.standard_normal((24, 8)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["input", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("MatMul", ["h2", "w2"], ["h3"]),
        helper.make_node("Softmax", ["h3"], ["output"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 8])],
        initializer=[numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                     numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = os.path.join(out, "model.onnx")
    onnx.save(model, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for n in (1, 6):
        xi = rng.standard_normal((n, 16)).astype(np.float32)
        expected[f"onnx_x_{n}"] = xi
        expected[f"onnx_y_{n}"] = sess.run(None, {"input": xi})[0]


def main(argv: list[str]) -> int:
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    expected: dict[str, np.ndarray] = {}
    _pt2(out, expected)
    _onnx(out, expected)
    np.savez(os.path.join(out, "expected.npz"), **expected)
    print(f"fixtures: {sorted(os.listdir(out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The torch.export importer's behaviour around the ops: symbolic sizes (derived sizes, ranges,
inputs= overrides), the unsupported-op report, bad .pt2 files, states below iOS18, and converting
a .pt2 with torch absent."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile

import milkit
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.torch_util import DIALECTS, check, compare, convert, export


class Derived(torch.nn.Module):
    """Sizes derived from a dynamic one: 2*s, s - 1, (s - 1)//2 + 1, s*8."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv1d(4, 4, 3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> tuple:
        both = torch.cat([x, x], dim=2)                 # (1, 4, 2*s)
        tail = x[:, :, 1:]                              # (1, 4, s - 1)
        down = self.conv(x)                             # (1, 4, (s - 1)//2 + 1)
        flat = x.reshape(1, x.shape[2] * 4)             # (1, 4*s)
        n = x.shape[2]
        scaled = x * n + torch.arange(n).float()        # a SymInt used as a value
        return both, tail, down, flat, scaled, x.new_zeros(x.shape[2], 2)


class SymbolicResize(torch.nn.Module):
    """Resizing to sizes computed from a dynamic one, and clamping to a symbolic bound: core ATen
    writes these with SymFloat ratios (IntTrueDiv(s, 2*s)) and SymInt clamp bounds (s - 1)."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple:
        lin = F.interpolate(x, size=x.shape[-1] * 2, mode="linear")
        near = F.interpolate(y, size=(y.shape[-2] * 3, y.shape[-1] * 2), mode="nearest")
        bil = F.interpolate(y, size=(y.shape[-2] * 2, y.shape[-1] * 2), mode="bilinear", align_corners=False)
        idx = torch.arange(8).clamp(max=x.shape[-1] - 1)
        low = torch.arange(8).clamp_min(x.shape[-1] - 4) + torch.arange(8).clamp_max(x.shape[-1] - 4)
        return lin, near, bil, x[..., idx], low


@pytest.mark.parametrize("dialect", DIALECTS)
def test_resize_to_symbolic_sizes(dialect: str) -> None:
    s, h, w = (torch.export.Dim(k, min=4, max=64) for k in "shw")
    check(SymbolicResize(), (torch.randn(1, 2, 6), torch.randn(1, 2, 5, 7)), dialect,
          dynamic_shapes=({2: s}, {2: h, 3: w}),
          more_args=[(torch.randn(1, 2, 11), torch.randn(1, 2, 5, 11))])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_derived_symbolic_sizes_at_two_lengths(dialect: str) -> None:
    seq = torch.export.Dim("seq", min=4, max=64)
    mm = check(Derived(), (torch.randn(1, 4, 10),), dialect, dynamic_shapes=({2: seq},),
               more_args=[(torch.randn(1, 4, 17),), (torch.randn(1, 4, 4),)])
    text = milkit.program_to_text(mm._mil_program)
    assert "2*" in text or "* 2" in text  # the doubled size stays an expression
    rng = mm.get_spec().description.input[0].type.multiArrayType.shapeRange.sizeRanges[2]
    assert (rng.lowerBound, rng.upperBound) == (4, 64)


def test_inputs_rename_and_narrow() -> None:
    m = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
    batch = torch.export.Dim("batch", max=32)
    ep = export(m, (torch.randn(3, 8),), dynamic_shapes=({0: batch},))
    mm = convert(ep, inputs=[milkit.TensorType(name="features", shape=(milkit.RangeDim(1, 16), 8))])
    inp = mm.get_spec().description.input[0]
    assert inp.name == "features"
    rng = inp.type.multiArrayType.shapeRange.sizeRanges[0]
    assert (rng.lowerBound, rng.upperBound) == (1, 16)
    x = torch.randn(5, 8)
    with torch.no_grad():
        compare(mm.predict({"features": x.numpy()}), m(x))
    # a fixed size replaces the symbol
    mm2 = convert(ep, inputs=[milkit.TensorType(name="x", shape=(4, 8))])
    assert list(mm2.get_spec().description.input[0].type.multiArrayType.shape) == [4, 8]
    with pytest.raises(ValueError, match="outside the range"):
        convert(ep, inputs=[milkit.TensorType(name="x", shape=(40, 8))])


class Unsupported(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.lgamma(x)
        b = torch.special.bessel_j0(x)
        return a + b + x.relu()


def test_unsupported_ops_listed_with_source_lines() -> None:
    ep = export(Unsupported(), (torch.randn(3),))
    with pytest.raises(ValueError) as e:
        convert(ep)
    msg = str(e.value)
    assert "cannot convert 2 nodes" in msg
    assert "aten.lgamma" in msg and "aten.special_bessel_j0" in msg
    assert "frontends/torch/test_importer.py" in msg and "torch.lgamma(x)" in msg
    assert "relu" not in msg
    assert isinstance(e.value, milkit.UnsupportedOpsError)
    assert [("lgamma" in n, "bessel_j0" in n) for n in e.value.nodes] == [(True, False), (False, True)]


def test_data_dependent_and_training_errors() -> None:
    class BoolIndex(torch.nn.Module):
        def forward(self, x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
            return x[m.bool()]

    bn = torch.nn.BatchNorm1d(3).train()
    ep = torch.export.export(bn, (torch.randn(4, 3),))
    with pytest.raises(ValueError, match="training mode"):
        convert(ep)


def _save(tmp_path, m: torch.nn.Module, x: torch.Tensor, name: str = "m.pt2") -> str:
    path = str(tmp_path / name)
    torch.export.save(export(m, (x,)), path)
    return path


def test_bad_pt2_files(tmp_path) -> None:
    path = _save(tmp_path, torch.nn.Linear(4, 2), torch.randn(1, 4))
    data = open(path, "rb").read()
    trunc = tmp_path / "trunc.pt2"
    trunc.write_bytes(data[: len(data) // 2])
    with pytest.raises(milkit.FormatError, match="trunc.pt2"):
        convert(str(trunc))
    # a model.json that is valid JSON but not a program
    bad = tmp_path / "bad.pt2"
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(bad, "w", zipfile.ZIP_STORED) as zout:
        for item in zin.infolist():
            body = zin.read(item.filename)
            if item.filename.endswith("models/model.json"):
                body = body.replace(b'"nodes"', b'"nodez"')
            zout.writestr(item, body)
    with pytest.raises(milkit.FormatError, match="bad.pt2"):
        convert(str(bad))
    with pytest.raises(FileNotFoundError):
        convert(str(tmp_path / "missing.pt2"))


class Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(x)
        return self.count * 2


@pytest.mark.parametrize("dialect", DIALECTS)
def test_mutated_buffer_becomes_state(dialect: str) -> None:
    ep = export(Counter(), (torch.randn(2, 3),), dialect)
    with pytest.raises(ValueError, match="iOS18"):
        convert(ep)
    mm = convert(ep, target=milkit.target.iOS18)
    assert [s.name for s in mm.get_spec().description.state] == ["count"]
    state = mm.make_state()
    ref = Counter()
    for _ in range(3):
        x = torch.randn(2, 3)
        with torch.no_grad():
            want = ref(x)
        got = list(mm.predict({"x": x.numpy()}, state=state).values())[0]
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-2, atol=1e-2)  # states are fp16 in Core ML


def test_pt2_converts_without_torch(tmp_path) -> None:
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 36, 5))
    x = torch.randn(1, 3, 8, 8)
    path = _save(tmp_path, m.eval(), x)
    np.save(tmp_path / "x.npy", x.numpy())
    with torch.no_grad():
        np.save(tmp_path / "ref.npy", m(x).numpy())
    code = textwrap.dedent(f"""
        import sys
        sys.modules["torch"] = None  # any import of torch fails
        import numpy as np
        import milkit
        mm = milkit.convert({path!r}, compute_precision=milkit.precision.FLOAT32)
        out = list(mm.predict({{"input": np.load({str(tmp_path / 'x.npy')!r})}}).values())[0]
        ref = np.load({str(tmp_path / 'ref.npy')!r})
        assert np.abs(out - ref).max() <= 1e-4 * np.abs(ref).max(), np.abs(out - ref).max()
        assert sys.modules["torch"] is None
        print("ok")
    """)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "python") + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_import_milkit_does_not_import_torch() -> None:
    r = subprocess.run([sys.executable, "-c", "import milkit, milkit.frontends.torch, sys; print('torch' in sys.modules)"],
                       capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "python")})
    assert r.stdout.strip() == "False", r.stderr


def test_supported_ops_listed() -> None:
    ops = milkit.frontends.torch.supported_ops()
    assert "aten.linear" in ops and "aten.scaled_dot_product_attention" in ops and len(ops) > 150


class NoGrad(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        with torch.no_grad():  # becomes higher_order.wrap_with_set_grad_enabled (TRAINING dialect)
            z = y.sin() + 1
        return z * y


class Branchy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda a: a.cos() * 2, lambda a: a.sin() - 1, (x,))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_higher_order_ops(dialect: str) -> None:
    check(NoGrad(), (torch.randn(3, 3),), dialect)
    x = torch.randn(3, 3).abs()
    mm = check(Branchy(), (x,), dialect, more_args=[(-x,)])  # both branches taken at run time
    assert "cond(" in milkit.program_to_text(mm._mil_program)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_and_bf16_models(dtype: torch.dtype) -> None:
    torch.manual_seed(3)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()
    x = torch.randn(2, 8)
    ep = export(m.to(dtype), (x.to(dtype),))
    mm = convert(ep)  # bf16 weights become fp32, fp16 weights stay fp16
    with torch.no_grad():
        ref = m.float()(x)
    got = list(mm.predict({"input": x.numpy()}).values())[0]
    np.testing.assert_allclose(got, ref.numpy(), rtol=0, atol=2e-2 * float(ref.abs().max()))


def test_enumerated_shapes() -> None:
    m = torch.nn.Conv2d(3, 4, 3, padding=1).eval()
    h = torch.export.Dim("h", min=8, max=64)
    ep = export(m, (torch.randn(1, 3, 16, 16),), dynamic_shapes=({2: h, 3: h},))
    shapes = milkit.EnumeratedShapes(shapes=[(1, 3, 16, 16), (1, 3, 32, 32)], default=(1, 3, 16, 16))
    mm = convert(ep, inputs=[milkit.TensorType(name="image", shape=shapes)])
    desc = mm.get_spec().description.input[0]
    assert desc.name == "image"
    assert [list(s.shape) for s in desc.type.multiArrayType.enumeratedShapes.shapes] == [[1, 3, 16, 16], [1, 3, 32, 32]]
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        compare(mm.predict({"image": x.numpy()}), m(x))


class _NamedTupleOut(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple:
        return torch.topk(x, 2), torch.sort(x, descending=True)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_program_returning_return_types(dialect: str) -> None:
    """A program returning torch.return_types (topk, sort) cannot be written by torch's serializer
    (torch.export.save fails on it: no pytree serialization name); milkit leaves the module call
    graph with those specs out and converts the graph."""
    ep = export(_NamedTupleOut(), (torch.randn(3, 5),), dialect)
    with pytest.raises(NotImplementedError):
        torch.export.save(ep, os.devnull)
    check(_NamedTupleOut(), (torch.randn(3, 5),), dialect)

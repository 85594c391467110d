"""The torch.export importer's recurrent layers, upsampling and einsum, op by op against torch
eager: both dialects (TRAINING as exported, core ATen after run_decompositions), fp32 within 1e-4
of the largest reference value.

Recurrent layers: nn.LSTM / GRU / RNN export as aten.lstm / gru / rnn_tanh / rnn_relu (.input) in
the TRAINING dialect and unroll into matmuls in core ATen. LSTM converts to MIL's lstm, RNN to
rnn, GRU to gru with reset_after from iOS18 and to a while_loop cell before (MIL's older gru
applies the reset gate before the recurrent matmul, torch after). torch.export specializes
nn.LSTM's sequence length (its decomposition unbinds the sequence), so dynamic-length recurrences
are written with torch's scan, which exports as torch.ops.higher_order.scan (and while_loop as
torch.ops.higher_order.while_loop); both become MIL while_loops."""

from __future__ import annotations

import json
from typing import Any, Callable

import milkit
import pytest
import torch
import torch.nn.functional as F
from milkit import _core
from milkit.frontends import torch as mtorch
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop
from torch_util import DIALECTS, Fn, check, compare, convert, export, r

torch.manual_seed(0)



# ---- recurrent layers -----------------------------------------------------------------------------


class Rnn(torch.nn.Module):
    """A recurrent layer called with or without initial states."""

    def __init__(self, m: torch.nn.Module) -> None:
        super().__init__()
        self.m = m

    def forward(self, x: torch.Tensor, *h: torch.Tensor) -> Any:
        if not h:
            return self.m(x)
        if isinstance(self.m, torch.nn.LSTM):
            return self.m(x, (h[0], h[1]))
        return self.m(x, h[0])


LAYERS = {
    "lstm": lambda **kw: torch.nn.LSTM(4, 5, **kw),
    "gru": lambda **kw: torch.nn.GRU(4, 5, **kw),
    "rnn_tanh": lambda **kw: torch.nn.RNN(4, 5, **kw),
    "rnn_relu": lambda **kw: torch.nn.RNN(4, 5, nonlinearity="relu", **kw),
}
# (num_layers, bidirectional, batch_first, initial states, bias)
CONFIGS = {
    "1layer": (1, False, False, False, True),
    "2layer_bidir_bf_h0": (2, True, True, True, True),
    "2layer_bidir_nobias": (2, True, False, False, False),
    "1layer_bidir_bf_h0": (1, True, True, True, True),
}


def _rnn_case(kind: str, config: str, **extra: Any) -> tuple:
    layers, bidir, bf, init, bias = CONFIGS[config]
    m = LAYERS[kind](num_layers=layers, bidirectional=bidir, batch_first=bf, bias=bias, **extra)
    x = r(2, 3, 4) if bf else r(3, 2, 4)
    d = 2 if bidir else 1
    hs: tuple = ()
    if init:
        hs = (r(layers * d, 2, extra.get("proj_size") or 5),)
        if kind == "lstm":
            hs += (r(layers * d, 2, 5),)
    return Rnn(m), (x,) + hs


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_recurrent_layer(kind: str, config: str, dialect: str) -> None:
    m, args = _rnn_case(kind, config)
    check(m, args, dialect)


def _op_types(mm: Any) -> set:
    return {op.op_type for op in mm._mil_program.functions["main"].find_ops()}


@pytest.mark.parametrize("target", ["iOS17", "iOS18"])
def test_gru_before_and_from_ios18(target: str) -> None:
    # iOS18's gru (reset_after) computes torch's GRU; before it the cell is a while_loop
    m, args = _rnn_case("gru", "2layer_bidir_bf_h0")
    mm = check(m, args, "training", target=getattr(milkit.target, target))
    ops = _op_types(mm)
    if target == "iOS18":
        assert "gru" in ops and "while_loop" not in ops
    else:
        assert "while_loop" in ops and "gru" not in ops


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_gru_ios18_configs(config: str) -> None:
    m, args = _rnn_case("gru", config)
    check(m, args, "training", target=milkit.target.iOS18)


def test_lstm_uses_mil_lstm() -> None:
    m, args = _rnn_case("lstm", "2layer_bidir_bf_h0")
    ops = _op_types(check(m, args, "training"))
    assert "lstm" in ops and "while_loop" not in ops


@pytest.mark.parametrize("dialect", DIALECTS)
def test_lstm_proj_size(dialect: str) -> None:
    # MIL's lstm has no projection: a while_loop cell
    m, args = _rnn_case("lstm", "2layer_bidir_bf_h0", proj_size=3)
    check(m, args, dialect)


def test_recurrent_dynamic_batch() -> None:
    m, args = _rnn_case("lstm", "2layer_bidir_bf_h0")
    b = torch.export.Dim("b", min=1, max=8)
    check(m, args, "training", dynamic_shapes=({0: b}, ({1: b}, {1: b})),
          more_args=[(r(5, 3, 4), r(4, 5, 5), r(4, 5, 5))])


def _symbolic_seq(ep: Any, axis: int, target: Any) -> Any:
    # torch.export cannot keep nn.LSTM's sequence length symbolic (see the module docstring): the
    # exported JSON is given a symbolic length by hand, to check the recurrent ops' dynamic path
    j = json.loads(mtorch._serialize(ep))
    name = ep.graph_signature.user_inputs[0]
    j["graph_module"]["graph"]["tensor_values"][name]["sizes"][axis] = {"as_expr": {"expr_str": "s9", "hint": 3}}
    j["range_constraints"] = {"s9": {"min_val": 2, "max_val": 16}}
    weights = {k: mtorch._tensor_entry(k, v) for k, v in ep.state_dict.items()}
    consts = {k: mtorch._tensor_entry(k, v) for k, v in ep.constants.items()}
    prog, _ = _core.import_torch_export(json.dumps(j).encode(), weights, consts, int(target), {}, "<test>")
    return milkit.convert(prog, compute_precision=milkit.precision.FLOAT32, minimum_deployment_target=target)


@pytest.mark.parametrize("target", ["iOS17", "iOS18"])
@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh"])
def test_recurrent_symbolic_sequence(kind: str, target: str) -> None:
    m = LAYERS[kind](num_layers=2, bidirectional=True, batch_first=True).eval()
    ep = export(m, (r(2, 3, 4),))
    mm = _symbolic_seq(ep, 1, getattr(milkit.target, target))
    name = ep.graph_signature.user_inputs[0]
    for s in (3, 7):
        x = r(2, s, 4)
        with torch.no_grad():
            compare(mm.predict({name: x.numpy()}), m(x), what=f"{kind} seq {s}")


CELLS = {
    "lstm_cell": (torch.nn.LSTMCell(4, 5), (r(2, 4), (r(2, 5), r(2, 5)))),
    "lstm_cell_nobias": (torch.nn.LSTMCell(4, 5, bias=False), (r(2, 4), (r(2, 5), r(2, 5)))),
    "gru_cell": (torch.nn.GRUCell(4, 5), (r(2, 4), r(2, 5))),
    "rnn_tanh_cell": (torch.nn.RNNCell(4, 5), (r(2, 4), r(2, 5))),
    "rnn_relu_cell": (torch.nn.RNNCell(4, 5, nonlinearity="relu"), (r(2, 4), r(2, 5))),
}


class Cell(torch.nn.Module):
    def __init__(self, c: torch.nn.Module) -> None:
        super().__init__()
        self.c = c

    def forward(self, x: torch.Tensor, h: torch.Tensor, *c: torch.Tensor) -> Any:
        return self.c(x, (h, c[0]) if c else h)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell(name: str, dialect: str) -> None:
    cell, (x, h) = CELLS[name]
    args = (x,) + (h if isinstance(h, tuple) else (h,))
    check(Cell(cell), args, dialect)


class ScanLSTM(torch.nn.Module):
    """An LSTM over a sequence of any length: scan over nn.LSTMCell (batch first)."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = torch.nn.LSTMCell(4, 5)
        self.head = torch.nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> Any:
        h0 = x.new_zeros(x.shape[0], 5)

        def step(carry: Any, xt: torch.Tensor) -> Any:
            h, c = self.cell(xt, carry)
            return (h, c), h.clone()

        (h, c), ys = scan(step, (h0, h0.clone()), x, dim=1)
        return self.head(ys).transpose(0, 1), h, c


class ScanGRU(torch.nn.Module):
    """A reversed scan with two step outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = torch.nn.GRUCell(4, 5)

    def forward(self, x: torch.Tensor) -> Any:
        def step(h: torch.Tensor, xt: torch.Tensor) -> Any:
            h2 = self.cell(xt, h)
            return h2, (h2 * 2, xt.sum(-1))

        h, (ys, s) = scan(step, x.new_zeros(x.shape[0], 5), x, dim=1, reverse=True)
        return ys, s, h


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("model", [ScanLSTM, ScanGRU])
def test_scan_dynamic_sequence(model: type, dialect: str) -> None:
    seq = torch.export.Dim("seq", min=2, max=16)
    check(model().eval(), (r(2, 3, 4),), dialect, dynamic_shapes=({1: seq},), more_args=[(r(2, 9, 4),)])


def test_scan_static_keeps_shapes() -> None:
    mm = check(ScanLSTM().eval(), (r(2, 3, 4),), "training")
    out = mm.get_spec().description.output[0].type.multiArrayType
    assert list(out.shape) == [3, 2, 3]  # scan stacks on dim 1 again; the head output is transposed


class WhileCount(torch.nn.Module):
    """A loop run as many times as a (symbolic) input size, carrying a counter and a state."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, n: torch.Tensor) -> Any:
        def cond(i: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
            return i < n.shape[0]

        def body(i: torch.Tensor, h: torch.Tensor) -> Any:
            return i + 1, torch.tanh(self.lin(h))

        i, h = while_loop(cond, body, (torch.tensor(0), x))
        return h, i


class WhileUntil(torch.nn.Module):
    """A loop that stops on a value (data-dependent trip count)."""

    def forward(self, x: torch.Tensor) -> Any:
        def cond(h: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
            return h.sum() < 10.0

        def body(h: torch.Tensor, k: torch.Tensor) -> Any:
            return h * 1.5 + 0.1, k + 1

        return while_loop(cond, body, (x.abs(), torch.zeros((), dtype=torch.int64)))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_while_loop(dialect: str) -> None:
    n = torch.export.Dim("n", min=1, max=10)
    check(WhileCount().eval(), (r(2, 4), torch.zeros(3)), dialect, dynamic_shapes=(None, {0: n}),
          more_args=[(r(2, 4), torch.zeros(7))])
    check(WhileUntil(), (torch.rand(3),), dialect, more_args=[(torch.rand(3) * 4,)])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_compare_with_symbolic_size(dialect: str) -> None:
    b = torch.export.Dim("b", min=2, max=16)
    check(Fn(lambda x: (x < x.shape[0]).int() + (x * 3 >= x.shape[0]).int()), (r(4, 3) * 5,), dialect,
          dynamic_shapes=(({0: b},),), more_args=[(r(9, 3) * 5,)])


def test_unsupported_op_inside_scan_is_listed() -> None:
    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> Any:
            def step(h: torch.Tensor, xt: torch.Tensor) -> Any:
                h2 = torch.special.bessel_j0(h + xt)
                return h2, h2 * 2

            return scan(step, x[0], x)

    with pytest.raises(ValueError) as e:
        convert(export(M(), (r(3, 4),)))
    msg = str(e.value)
    assert "cannot convert 1 node" in msg and "aten.special_bessel_j0" in msg
    assert "test_torch_ops_misc.py" in msg


def test_recurrent_errors() -> None:
    m = torch.nn.LSTM(4, 5, num_layers=2, dropout=0.5).train()
    ep = torch.export.export(m, (r(3, 2, 4),))
    with pytest.raises(ValueError, match="dropout"):
        convert(ep)


# ---- upsampling -----------------------------------------------------------------------------------


def _interp(**kw: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: F.interpolate(x, **kw)


UPSAMPLE = {
    # nearest: integer factors -> upsample_nearest_neighbor, the rest by gathered indices
    "nearest_x2": (_interp(scale_factor=2, mode="nearest"), r(1, 2, 4, 5), "upsample_nearest_neighbor"),
    "nearest_x3x2": (_interp(scale_factor=(3, 2), mode="nearest"), r(1, 2, 4, 5), "upsample_nearest_neighbor"),
    "nearest_x1.5": (_interp(scale_factor=1.5, mode="nearest"), r(1, 2, 4, 5), "gather"),
    "nearest_x1.7": (_interp(scale_factor=1.7, mode="nearest"), r(1, 2, 5, 7), "gather"),
    "nearest_size": (_interp(size=(7, 9), mode="nearest"), r(1, 2, 4, 5), "gather"),
    "nearest_size_x2x3": (_interp(size=(8, 15), mode="nearest"), r(1, 2, 4, 5), "upsample_nearest_neighbor"),
    "nearest_down": (_interp(size=(3, 2), mode="nearest"), r(1, 2, 8, 5), "gather"),
    "nearest_module": (torch.nn.UpsamplingNearest2d(scale_factor=2), r(1, 3, 4, 4), "upsample_nearest_neighbor"),
    # nearest-exact: half-pixel centers
    "nearest_exact_size": (_interp(size=(7, 9), mode="nearest-exact"), r(1, 2, 4, 5), "resize_nearest_neighbor"),
    "nearest_exact_x2": (_interp(scale_factor=2, mode="nearest-exact"), r(1, 2, 4, 5), "upsample_nearest_neighbor"),
    "nearest_exact_x1.7": (_interp(scale_factor=1.7, mode="nearest-exact"), r(1, 2, 5, 7), "gather"),
    # bilinear: resize_bilinear when torch's scale is in / out, else gathered taps
    "bilinear_x2": (_interp(scale_factor=2, mode="bilinear"), r(1, 2, 4, 5), "resize_bilinear"),
    "bilinear_x2_ac": (_interp(scale_factor=2, mode="bilinear", align_corners=True), r(1, 2, 4, 5), "resize_bilinear"),
    "bilinear_size": (_interp(size=(7, 9), mode="bilinear"), r(1, 2, 4, 5), "resize_bilinear"),
    "bilinear_size_ac": (_interp(size=(7, 9), mode="bilinear", align_corners=True), r(1, 2, 4, 5), "resize_bilinear"),
    "bilinear_x1.7": (_interp(scale_factor=1.7, mode="bilinear"), r(1, 2, 5, 7), "gather"),
    "bilinear_x1.7_recompute": (_interp(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True),
                                r(1, 2, 5, 7), "resize_bilinear"),
    "bilinear_down": (_interp(size=(3, 4), mode="bilinear"), r(1, 2, 8, 9), "resize_bilinear"),
    "bilinear_x0.6": (_interp(scale_factor=0.6, mode="bilinear"), r(1, 2, 8, 9), "gather"),
    "bilinear_module": (torch.nn.UpsamplingBilinear2d(scale_factor=2), r(1, 3, 4, 4), "resize_bilinear"),
    # 1-d through the 2-d ops (a height of 1)
    "nearest1d_x2": (_interp(scale_factor=2, mode="nearest"), r(1, 2, 5), "upsample_nearest_neighbor"),
    "nearest1d_size": (_interp(size=7, mode="nearest"), r(1, 2, 5), "gather"),
    "nearest_exact1d": (_interp(size=7, mode="nearest-exact"), r(1, 2, 5), "resize_nearest_neighbor"),
    "linear1d_x2": (_interp(scale_factor=2, mode="linear"), r(1, 2, 5), "resize_bilinear"),
    "linear1d_ac": (_interp(size=9, mode="linear", align_corners=True), r(1, 2, 5), "resize_bilinear"),
    "linear1d_x1.3": (_interp(scale_factor=1.3, mode="linear"), r(1, 2, 5), "gather"),
    # bicubic: gathered taps (torch's cubic convolution)
    "bicubic_x2": (_interp(scale_factor=2, mode="bicubic"), r(1, 2, 4, 5), "gather"),
    "bicubic_size_ac": (_interp(size=(7, 6), mode="bicubic", align_corners=True), r(1, 2, 4, 5), "gather"),
    "bicubic_x1.7": (_interp(scale_factor=1.7, mode="bicubic"), r(1, 2, 5, 7), "gather"),
    # antialiased (torchvision's Resize): a filter matrix per axis
    "bilinear_aa_x0.5": (_interp(scale_factor=0.5, mode="bilinear", antialias=True), r(1, 2, 8, 6), "matmul"),
    "bilinear_aa_size": (_interp(size=(3, 5), mode="bilinear", antialias=True), r(1, 2, 8, 11), "matmul"),
    "bilinear_aa_up": (_interp(size=(9, 7), mode="bilinear", antialias=True), r(1, 2, 4, 5), "matmul"),
    "bilinear_aa_ac": (_interp(size=(3, 4), mode="bilinear", antialias=True, align_corners=True), r(1, 2, 8, 9),
                       "matmul"),
    "bicubic_aa_size": (_interp(size=(3, 5), mode="bicubic", antialias=True), r(1, 2, 8, 11), "matmul"),
    "bicubic_aa_x0.4": (_interp(scale_factor=0.4, mode="bicubic", antialias=True), r(1, 2, 10, 12), "matmul"),
    # 3-d: taps per axis
    "nearest3d_x2": (_interp(scale_factor=2, mode="nearest"), r(1, 2, 2, 3, 4), "gather"),
    "nearest3d_size": (_interp(size=(3, 5, 7), mode="nearest"), r(1, 2, 2, 3, 4), "gather"),
    "nearest_exact3d": (_interp(size=(3, 5, 7), mode="nearest-exact"), r(1, 2, 2, 3, 4), "gather"),
    "trilinear_x2": (_interp(scale_factor=2, mode="trilinear"), r(1, 2, 2, 3, 4), "gather"),
    "trilinear_ac": (_interp(size=(3, 5, 7), mode="trilinear", align_corners=True), r(1, 2, 2, 3, 4), "gather"),
    "trilinear_mixed": (_interp(scale_factor=(1.5, 1.7, 0.6), mode="trilinear"), r(1, 2, 2, 3, 5), "gather"),
    # the .default overloads, as other decompositions call them
    "nearest2d_default": (lambda x: torch.ops.aten.upsample_nearest2d.default(x, [8, 10], 2.0, 2.0), r(1, 2, 4, 5),
                          "upsample_nearest_neighbor"),
    "nearest2d_default_scales": (lambda x: torch.ops.aten.upsample_nearest2d.default(x, [6, 8], 1.7, 1.7),
                                 r(1, 2, 4, 5), "gather"),
    "bilinear2d_default": (lambda x: torch.ops.aten.upsample_bilinear2d.default(x, [7, 9], False), r(1, 2, 4, 5),
                           "resize_bilinear"),
    "bilinear2d_default_ac": (lambda x: torch.ops.aten.upsample_bilinear2d.default(x, [7, 9], True, 1.5, 1.5),
                              r(1, 2, 4, 5), "resize_bilinear"),
    "nearest_exact2d_default": (lambda x: torch.ops.aten._upsample_nearest_exact2d.default(x, [7, 9]), r(1, 2, 4, 5),
                                "resize_nearest_neighbor"),
    "linear1d_default": (lambda x: torch.ops.aten.upsample_linear1d.default(x, [9], False, 1.7), r(1, 2, 5), "gather"),
    "nearest1d_default": (lambda x: torch.ops.aten.upsample_nearest1d.default(x, [10]), r(1, 2, 5),
                          "upsample_nearest_neighbor"),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(UPSAMPLE))
def test_upsample(name: str, dialect: str) -> None:
    fn, x, op = UPSAMPLE[name]
    mod = fn if isinstance(fn, torch.nn.Module) else Fn(fn)
    mm = check(mod, (x,), dialect)
    if dialect == "training":  # core ATen decomposes some of them into index arithmetic
        assert op in _op_types(mm), _op_types(mm)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bilinear_ac"])
def test_upsample_symbolic_size(mode: str, dialect: str) -> None:
    kw = {"mode": mode.split("_")[0]}
    if mode == "bilinear_ac":
        kw["align_corners"] = True
    h, w = torch.export.Dim("h", min=2, max=32), torch.export.Dim("w", min=2, max=32)
    check(Fn(_interp(scale_factor=2, **kw)), (r(1, 2, 4, 5),), dialect, dynamic_shapes=(({2: h, 3: w},),),
          more_args=[(r(1, 2, 7, 3),)], target=milkit.target.iOS16)


def test_upsample_symbolic_errors() -> None:
    h = torch.export.Dim("h", min=2, max=32)
    ep = export(Fn(_interp(scale_factor=2, mode="bilinear")), (r(1, 2, 4, 5),), dynamic_shapes=(({2: h},),))
    with pytest.raises(ValueError, match="needs iOS16"):
        convert(ep, target=milkit.target.iOS15)
    ep = export(Fn(_interp(scale_factor=1.5, mode="nearest")), (r(1, 2, 4, 5),), dynamic_shapes=(({2: h},),))
    with pytest.raises(ValueError, match="integer scale factors"):
        convert(ep)


# ---- einsum ---------------------------------------------------------------------------------------

EINSUM = {
    "bij,bjk->bik": (r(2, 3, 4), r(2, 4, 5)),
    "bhqd,bhkd->bhqk": (r(2, 2, 3, 4), r(2, 2, 5, 4)),
    "ij->ji": (r(3, 4),),
    "ii->i": (r(3, 3),),
    "ii": (r(3, 3),),
    "iij->j": (r(3, 3, 2),),
    "i,j->ij": (r(3), r(4)),
    "bnd,nd->bn": (r(2, 3, 4), r(3, 4)),
    "...ij,...jk->...ik": (r(2, 3, 4), r(2, 4, 5)),
    "...ij,...jk": (r(2, 1, 3, 4), r(5, 4, 2)),
    "ij,jk,kl->il": (r(2, 3), r(3, 4), r(4, 5)),
    "i,i->": (r(5), r(5)),
    "ij->": (r(3, 4),),
    "bij->bj": (r(2, 3, 4),),
    "abc,cd->abd": (r(2, 3, 4), r(4, 5)),
    "ab,cd->abcd": (r(2, 3), r(4, 5)),
    "bxy,byz->bxz": (r(1, 3, 4), r(2, 4, 5)),
    "b i j, b j k -> b i k": (r(2, 3, 4), r(2, 4, 5)),
    "abcd,adce->abe": (r(2, 3, 4, 5), r(2, 5, 4, 6)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("eq", sorted(EINSUM))
def test_einsum(eq: str, dialect: str) -> None:
    check(Fn(lambda *x: torch.einsum(eq, *x)), EINSUM[eq], dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_einsum_dynamic_batch(dialect: str) -> None:
    b = torch.export.Dim("b", min=1, max=8)
    check(Fn(lambda x, y: torch.einsum("abc,cd->abd", x, y) + torch.einsum("abc,abc->a", x, x)[:, None, None]),
          (r(2, 3, 4), r(4, 5)), dialect, dynamic_shapes=(({0: b}, None),), more_args=[(r(6, 3, 4), r(4, 5))])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("offset,d1,d2", [(0, 0, 1), (1, 1, 2), (-1, 2, 0), (2, -1, -2)])
def test_diagonal(offset: int, d1: int, d2: int, dialect: str) -> None:
    check(Fn(lambda x: torch.diagonal(x, offset, d1, d2) * 2), (r(3, 4, 5),), dialect)


"""The torch.export importer's recurrent layers, cells, scans and while loops, op by op against torch eager: both dialects (TRAINING as
exported, core ATen after run_decompositions), fp32 within 1e-4 of the largest reference value.

nn.LSTM / GRU / RNN export as aten.lstm / gru / rnn_tanh / rnn_relu (.input) in
the TRAINING dialect and unroll into matmuls in core ATen. LSTM converts to MIL's lstm, RNN to
rnn, GRU to gru with reset_after from iOS18 and to a while_loop cell before (MIL's older gru
applies the reset gate before the recurrent matmul, torch after). torch.export specializes
nn.LSTM's sequence length (its decomposition unbinds the sequence), so dynamic-length recurrences
are written with torch's scan, which exports as torch.ops.higher_order.scan (and while_loop as
torch.ops.higher_order.while_loop); both become MIL while_loops."""

from __future__ import annotations

import json
from typing import Any

import milkit
import pytest
import torch
from milkit import _core
from milkit.frontends import torch as mtorch
from support.torch_util import DIALECTS, Fn, check, compare, convert, export, r
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

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
    assert "frontends/torch/test_ops_recurrent.py" in msg


def test_recurrent_errors() -> None:
    m = torch.nn.LSTM(4, 5, num_layers=2, dropout=0.5).train()
    ep = torch.export.export(m, (r(3, 2, 4),))
    with pytest.raises(ValueError, match="dropout"):
        convert(ep)

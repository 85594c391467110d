"""Parity of gru, lstm and rnn with coremltools (iOS15 fp32-only versions, iOS17's fp16 versions,
iOS18's gru with reset_after / input_bias): inputs, defaults, output types over symbolic sequence
length and batch, and the errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.parity import ALL_OPSETS, check, check_error

RNG = np.random.default_rng(0)
I, H = 4, 3


def W(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.random(shape).astype(dtype)


L_IH, L_HH, L_B, L_P = W(4 * H, I), W(4 * H, H), W(4 * H), W(3 * H)
L_IH2, L_HH2, L_B2, L_P2 = W(4 * H, I), W(4 * H, H), W(4 * H), W(3 * H)
G_IH, G_HH, G_B, G_IB = W(3 * H, I), W(3 * H, H), W(3 * H), W(3 * H)
R_IH, R_HH, R_B = W(H, I), W(H, H), W(H)
# shapes coremltools accepts or rejects
L_HH_14, L_HH_15, L_IH_9, L_HH_6 = W(4 * H + 2, H), W(5 * H, H), W(3 * H, I), W(2 * H, H)
G_HH_12, R_IH_5 = W(4 * H, H), W(5, I)


def _f16(*arrays: np.ndarray) -> list[np.ndarray]:
    return [a.astype(np.float16) for a in arrays]


def _specs(dtype: str, states: int, width: int = H, x_shape: tuple = ("S", "B", I)) -> list:
    return [(x_shape, dtype)] + [(("B", width), dtype)] * states


# ------------------------------------------------------------------------------------------ lstm


@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("output_sequence", [None, True, False])
def test_lstm(direction: str, output_sequence: bool | None) -> None:
    kw: dict[str, Any] = {"direction": direction}
    if output_sequence is not None:
        kw["output_sequence"] = output_sequence
    check(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=L_IH, weight_hh=L_HH, **kw),
          _specs("fp32", 2), ALL_OPSETS)
    check(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=L_IH, weight_hh=L_HH, bias=L_B,
                                      peephole=L_P, clip=np.float32(2.0), recurrent_activation="hard_sigmoid",
                                      cell_activation="RELU", activation="linear", **kw),
          _specs("fp32", 2), ALL_OPSETS)


def test_lstm_defaults_only() -> None:
    check(lambda mb, x: mb.lstm(x=x, initial_h=np.zeros((2, H), np.float32), initial_c=np.zeros((2, H), np.float32),
                                weight_ih=L_IH, weight_hh=L_HH), [((5, 2, I), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("output_sequence", [True, False])
def test_lstm_bidirectional(output_sequence: bool) -> None:
    check(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=L_IH, weight_hh=L_HH, bias=L_B,
                                      peephole=L_P, weight_ih_back=L_IH2, weight_hh_back=L_HH2, bias_back=L_B2,
                                      peephole_back=L_P2, direction="bidirectional",
                                      output_sequence=output_sequence),
          _specs("fp32", 2, 2 * H), ALL_OPSETS)


def test_lstm_fp16_from_ios17() -> None:
    ih, hh, b = _f16(L_IH, L_HH, L_B)
    # fp16 is accepted from iOS17 on; at iOS15/16 both reject it
    check(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=ih, weight_hh=hh, bias=b,
                                      clip=np.float16(1.0), output_sequence=True),
          _specs("fp16", 2), ALL_OPSETS)
    check_error(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=ih, weight_hh=hh),
                _specs("fp16", 2), "iOS16", match=r"lstm 'lstm_0'.*'x'.*fp16")
    # mixed precision is not allowed (one domain T)
    check_error(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=L_IH, weight_hh=L_HH),
                _specs("fp16", 2), "iOS17", match=r"lstm 'lstm_0'")


def test_lstm_weight_rows_as_coremltools() -> None:
    """coremltools checks rows // H == 4, so 4H + 2 rows pass type inference (the kernel rejects them)."""
    check(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=L_IH, weight_hh=L_HH_14),
          _specs("fp32", 2), ["iOS17"])


def test_lstm_errors() -> None:
    args = {"weight_ih": L_IH, "weight_hh": L_HH}
    specs = _specs("fp32", 2)
    check_error(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, **args), [(("B", I), "fp32"),
                (("B", H), "fp32"), (("B", H), "fp32")], match=r"lstm 'lstm_0'.*'x'.*rank 3")
    check_error(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, direction="bidirectional", **args),
                _specs("fp32", 2, 2 * H), match=r"lstm 'lstm_0'.*weight_ih_back.*weight_hh_back")
    check_error(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, direction="backward", **args), specs,
                match=r"lstm 'lstm_0'.*'direction'.*backward")
    for a in ["recurrent_activation", "cell_activation", "activation"]:
        check_error(lambda mb, x, h, c, a=a: mb.lstm(x=x, initial_h=h, initial_c=c, **{a: "dummy"}, **args), specs,
                    match=rf"lstm 'lstm_0'.*'{a}'.*`dummy` not supported")
    check_error(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=L_IH, weight_hh=L_HH_15),
                specs, match=r"lstm 'lstm_0'.*hidden dim size mismatch")
    check_error(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=L_IH_9, weight_hh=L_HH),
                specs, match=r"lstm 'lstm_0'.*hidden dim size mismatch")
    check_error(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=L_IH, weight_hh=L_HH,
                                            direction="bidirectional", weight_ih_back=L_IH2,
                                            weight_hh_back=L_HH_6),
                _specs("fp32", 2, 2 * H), match=r"lstm 'lstm_0'.*hidden dim size mismatch")
    check_error(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=L_IH[None], weight_hh=L_HH),
                specs, match=r"lstm 'lstm_0'.*rank 2")
    # the weights must be compile-time constants
    check_error(lambda mb, x, h, c, w: mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=w, weight_hh=L_HH),
                specs + [((4 * H, I), "fp32")], match=r"lstm 'lstm_0'.*'weight_ih'.*constant")
    check_error(lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, output_sequence=1, **args), specs,
                match=r"lstm 'lstm_0'.*'output_sequence'")


# ------------------------------------------------------------------------------------------ gru


@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("output_sequence", [True, False])
def test_gru(direction: str, output_sequence: bool) -> None:
    check(lambda mb, x, h: mb.gru(x=x, initial_h=h, weight_ih=G_IH, weight_hh=G_HH, direction=direction,
                                  output_sequence=output_sequence),
          _specs("fp32", 1), ALL_OPSETS)
    check(lambda mb, x, h: mb.gru(x=x, initial_h=h, weight_ih=G_IH, weight_hh=G_HH, bias=G_B,
                                  recurrent_activation="tanh", activation="sigmoid", direction=direction),
          _specs("fp32", 1), ALL_OPSETS)


def test_gru_ios18_inputs() -> None:
    for kw in [{"reset_after": True}, {"reset_after": False, "input_bias": G_IB}, {"input_bias": G_IB, "bias": G_B}]:
        check(lambda mb, x, h, kw=kw: mb.gru(x=x, initial_h=h, weight_ih=G_IH, weight_hh=G_HH, **kw),
              _specs("fp32", 1), ["iOS18"])
        # unknown before iOS18
        check_error(lambda mb, x, h, kw=kw: mb.gru(x=x, initial_h=h, weight_ih=G_IH, weight_hh=G_HH, **kw),
                    _specs("fp32", 1), "iOS17", match=r"gru.*Unknown input 'reset_after'|gru.*Unknown input 'input_bias'")
    ih, hh, ib = _f16(G_IH, G_HH, G_IB)
    check(lambda mb, x, h: mb.gru(x=x, initial_h=h, weight_ih=ih, weight_hh=hh, input_bias=ib, reset_after=True,
                                  output_sequence=True), _specs("fp16", 1), ALL_OPSETS)
    check_error(lambda mb, x, h: mb.gru(x=x, initial_h=h, weight_ih=G_IH, weight_hh=G_HH, input_bias=ib),
                _specs("fp32", 1), "iOS18", match=r"gru 'gru_0'.*'input_bias'")


def test_gru_unchecked_activation_as_coremltools() -> None:
    """coremltools checks no gru / rnn activation name at build time (the kernel does)."""
    check(lambda mb, x, h: mb.gru(x=x, initial_h=h, weight_ih=G_IH, weight_hh=G_HH, activation="swish"),
          _specs("fp32", 1), ["iOS15", "iOS18"])
    check(lambda mb, x, h: mb.rnn(x=x, initial_h=h, weight_ih=R_IH, weight_hh=R_HH, activation="swish"),
          _specs("fp32", 1), ["iOS15", "iOS17"])


def test_gru_errors() -> None:
    specs = _specs("fp32", 1)
    check_error(lambda mb, x, h: mb.gru(x=x, initial_h=h, weight_ih=G_IH, weight_hh=G_HH),
                [(("S", "B", 1, I), "fp32"), (("B", H), "fp32")], match=r"gru 'gru_0'.*'x'.*rank 3")
    check_error(lambda mb, x, h: mb.gru(x=x, initial_h=h, weight_ih=G_IH, weight_hh=G_HH, direction="bidirectional"),
                specs, match=r"gru 'gru_0'.*'direction'.*bidirectional")
    check_error(lambda mb, x, h: mb.gru(x=x, initial_h=h, weight_ih=G_IH, weight_hh=G_HH_12), specs,
                match=r"gru 'gru_0'.*'weight_hh'.*mismatch")
    check_error(lambda mb, x, h: mb.gru(x=x, initial_h=h, weight_ih=G_IH[0], weight_hh=G_HH), specs,
                match=r"gru 'gru_0'.*'weight_ih'.*rank 2")
    check_error(lambda mb, x, h: mb.gru(x=x, initial_h=h, weight_ih=G_IH, weight_hh=G_HH[None]), specs,
                match=r"gru 'gru_0'.*'weight_hh'.*rank 2")
    check_error(lambda mb, x, h: mb.gru(x=x, initial_h=h, weight_ih=G_IH.astype(np.int32), weight_hh=G_HH), specs,
                match=r"gru 'gru_0'.*'weight_ih'")


# ------------------------------------------------------------------------------------------ rnn


@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("output_sequence", [True, False])
def test_rnn(direction: str, output_sequence: bool) -> None:
    check(lambda mb, x, h: mb.rnn(x=x, initial_h=h, weight_ih=R_IH, weight_hh=R_HH, bias=R_B, direction=direction,
                                  output_sequence=output_sequence, activation="relu"),
          _specs("fp32", 1), ALL_OPSETS)
    check(lambda mb, x, h: mb.rnn(x=x, initial_h=h, weight_ih=R_IH, weight_hh=R_HH), _specs("fp32", 1), ALL_OPSETS)
    ih, hh = _f16(R_IH, R_HH)
    check(lambda mb, x, h: mb.rnn(x=x, initial_h=h, weight_ih=ih, weight_hh=hh, direction=direction),
          _specs("fp16", 1), ALL_OPSETS)


def test_rnn_hidden_size_from_weight_ih() -> None:
    # coremltools takes H from weight_ih's rows (it checks nothing else)
    check(lambda mb, x, h: mb.rnn(x=x, initial_h=h, weight_ih=R_IH_5, weight_hh=R_HH), _specs("fp32", 1),
          ["iOS15"])


def test_rnn_errors() -> None:
    specs = _specs("fp32", 1)
    check_error(lambda mb, x, h: mb.rnn(x=x, initial_h=h, weight_ih=R_IH, weight_hh=R_HH),
                [((4, I), "fp32"), ((4, H), "fp32")], match=r"rnn 'rnn_0'.*'x'.*rank 3")
    check_error(lambda mb, x, h: mb.rnn(x=x, initial_h=h, weight_ih=R_IH, weight_hh=R_HH[0]), specs,
                match=r"rnn 'rnn_0'.*rank 2")
    check_error(lambda mb, x, h: mb.rnn(x=x, initial_h=h, weight_ih=R_IH, weight_hh=R_HH, direction="both"), specs,
                match=r"rnn 'rnn_0'.*'direction'")
    check_error(lambda mb, x, h: mb.rnn(x=x, initial_h=h, weight_ih=R_IH, weight_hh=R_HH, activation=3), specs,
                match=r"rnn 'rnn_0'.*'activation'")

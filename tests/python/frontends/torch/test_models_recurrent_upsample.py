"""Models with recurrent layers and upsampling through the torch.export importer, against torch
eager: both dialects (TRAINING as exported, core ATen after run_decompositions), fp32 within 1e-4
and FLOAT16 within 1e-2 of the largest output.

- a 2-layer bidirectional batch-first LSTM tagger and a GRU encoder (MIL lstm / gru);
- an LSTM over a sequence of any length, checked at two lengths: torch.export specializes
  nn.LSTM's sequence length, so it is written with torch's scan over nn.LSTMCell
  (torch.ops.higher_order.scan -> a MIL while_loop);
- torchvision's fcn_resnet50 (random weights, 4 classes, 64x64 input), which upsamples its
  logits bilinearly to the input size."""

from __future__ import annotations

from typing import Any

import milkit
import pytest
import torch
import torchvision
from support.torch_util import DIALECTS, check, randomize
from torch._higher_order_ops.scan import scan


class Tagger(torch.nn.Module):
    """Embedding-free sequence tagger: 2-layer bidirectional LSTM, batch first, and a head."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)
        self.head = torch.nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> Any:
        y, (h, c) = self.lstm(x)
        return self.head(y).log_softmax(-1), h, c


class GruEncoder(torch.nn.Module):
    """A 2-layer GRU (sequence first) whose final states feed a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = torch.nn.GRU(8, 12, num_layers=2)
        self.fc = torch.nn.Linear(24, 3)

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> Any:
        y, h = self.gru(x, h0)
        return self.fc(h.permute(1, 0, 2).flatten(1)), y


class DynamicLSTM(torch.nn.Module):
    """A batch-first LSTM over any sequence length (scan over nn.LSTMCell) with a head."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = torch.nn.LSTMCell(8, 16)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> Any:
        h0 = x.new_zeros(x.shape[0], 16)

        def step(carry: Any, xt: torch.Tensor) -> Any:
            h, c = self.cell(xt, carry)
            return (h, c), h.clone()

        (h, _), ys = scan(step, (h0, h0.clone()), x, dim=1)
        return self.head(ys), self.head(h)


class Seg(torch.nn.Module):
    def __init__(self, m: torch.nn.Module) -> None:
        super().__init__()
        self.m = m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.m(x)["out"]


def _fcn() -> torch.nn.Module:
    m = torchvision.models.segmentation.fcn_resnet50(weights=None, weights_backbone=None, num_classes=4,
                                                     aux_loss=False)
    return Seg(randomize(m))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_lstm_tagger(dialect: str) -> None:
    torch.manual_seed(3)
    check(randomize(Tagger()), (torch.randn(2, 7, 8),), dialect)


def test_lstm_tagger_fp16() -> None:
    torch.manual_seed(4)
    check(randomize(Tagger()), (torch.randn(2, 7, 8),), "training", rtol=1e-2, precision="fp16")


@pytest.mark.parametrize("target", ["iOS17", "iOS18"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_gru_encoder(dialect: str, target: str) -> None:
    torch.manual_seed(5)
    check(randomize(GruEncoder()), (torch.randn(6, 2, 8), torch.randn(2, 2, 12)), dialect,
          target=getattr(milkit.target, target))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_dynamic_sequence_lstm(dialect: str) -> None:
    torch.manual_seed(6)
    seq = torch.export.Dim("seq", min=2, max=64)
    mm = check(randomize(DynamicLSTM()), (torch.randn(2, 5, 8),), dialect, dynamic_shapes=({1: seq},),
               more_args=[(torch.randn(2, 23, 8),)])
    shape = mm.get_spec().description.input[0].type.multiArrayType.shapeRange.sizeRanges
    assert (shape[1].lowerBound, shape[1].upperBound) == (2, 64)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_fcn_resnet50(dialect: str) -> None:
    torch.manual_seed(7)
    check(_fcn(), (torch.randn(1, 3, 64, 64),), dialect)


def test_fcn_resnet50_fp16() -> None:
    torch.manual_seed(8)
    check(_fcn(), (torch.randn(1, 3, 64, 64),), "core", rtol=1e-2, precision="fp16")

"""Real models exported with torch.onnx.export, converted by milkit and run by its interpreter,
against onnxruntime on the same file (fp32 within 1e-4 relative): torchvision resnet18,
mobilenet_v3_small and vit_b_16, a small BERT, and dynamic-axes variants at two sizes."""

from __future__ import annotations

import os
import warnings

import milkit
import milkit.onnx_backend as backend
import numpy as np
import pytest
import torch
import torchvision
from support.onnx_util import ort_run


def export(model, args, path, dynamic_axes=None, input_names=("x",), output_names=("y",)):
    import onnx

    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), input_names=list(input_names), output_names=list(output_names),
                          dynamic_axes=dynamic_axes, opset_version=17, dynamo=False)
    return onnx.load(str(path))


def compare(path, model_proto, feed, rtol=1e-4, atol=1e-4):
    want = ort_run(model_proto, feed)
    rep = backend.prepare(str(path))
    got = rep.run(feed)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        scale = max(float(np.abs(w).max()), 1e-6)
        err = float(np.abs(g.astype(np.float64) - w).max()) / scale
        assert err <= max(rtol, atol), f"max error {err:.2e} relative to the output's range"
    return rep


@pytest.fixture(scope="module")
def seeded():
    torch.manual_seed(0)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small"])
def test_torchvision_cnn(tmp_path, seeded, name):
    model = getattr(torchvision.models, name)(weights=None)
    x = torch.randn(1, 3, 224, 224)
    m = export(model, (x,), tmp_path / f"{name}.onnx")
    compare(tmp_path / f"{name}.onnx", m, {"x": x.numpy()})


def test_resnet18_dynamic_batch(tmp_path, seeded):
    model = torchvision.models.resnet18(weights=None)
    path = tmp_path / "r18dyn.onnx"
    m = export(model, (torch.randn(1, 3, 96, 96),), path, dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    rep = None
    for b in (1, 3):
        feed = {"x": np.random.default_rng(b).standard_normal((b, 3, 96, 96)).astype(np.float32)}
        rep = compare(path, m, feed)
    (x,) = rep.program.functions["main"].inputs.values()
    assert str(x.shape[0]) == "batch"


def test_vit_b_16(tmp_path, seeded):
    model = torchvision.models.vit_b_16(weights=None)
    x = torch.randn(1, 3, 224, 224)
    m = export(model, (x,), tmp_path / "vit.onnx")
    compare(tmp_path / "vit.onnx", m, {"x": x.numpy()})


def test_small_bert_dynamic_sequence(tmp_path, seeded):
    import transformers

    cfg = transformers.BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, max_position_embeddings=128)
    bert = transformers.BertModel(cfg).eval()

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask)
            return out.last_hidden_state, out.pooler_output

    model = Wrap()
    ids = torch.randint(0, 512, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.int64)
    path = tmp_path / "bert.onnx"
    m = export(model, (ids, mask), path, input_names=("input_ids", "attention_mask"),
               output_names=("last_hidden_state", "pooler_output"),
               dynamic_axes={"input_ids": {1: "seq"}, "attention_mask": {1: "seq"}, "last_hidden_state": {1: "seq"}})
    rng = np.random.default_rng(0)
    for s in (16, 37):
        feed = {"input_ids": rng.integers(0, 512, (1, s)).astype(np.int64),
                "attention_mask": np.concatenate([np.ones((1, s - 3)), np.zeros((1, 3))], 1).astype(np.int64)}
        compare(path, m, feed)


def test_convert_file_and_save(tmp_path, seeded):
    import coremltools as ct

    model = torchvision.models.mobilenet_v3_small(weights=None)
    x = torch.randn(1, 3, 128, 128)
    export(model, (x,), tmp_path / "mb.onnx")
    mlmodel = milkit.convert(str(tmp_path / "mb.onnx"), minimum_deployment_target=milkit.target.iOS17)
    out = mlmodel.predict({"x": x.numpy()})["y"]
    with torch.no_grad():
        want = model.eval()(x).numpy()
    # FLOAT16 (convert's default precision) within 1e-2 of torch
    assert float(np.abs(out - want).max()) <= 1e-2 * max(1.0, float(np.abs(want).max())) * 5
    mlmodel.save(str(tmp_path / "mb.mlpackage"))
    assert os.path.isdir(tmp_path / "mb.mlpackage")
    ct.models.MLModel(str(tmp_path / "mb.mlpackage"), skip_model_load=True)

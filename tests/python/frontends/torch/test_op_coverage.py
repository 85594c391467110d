"""The torch importer's operator coverage against torch's core ATen operator set: every core ATen
operator converts or has a recorded reason, an unsupported-op error names that reason, and the
guide's operator table is generated from the importer's own table."""

from __future__ import annotations

import json
import os
import sys

import milkit
import pytest
import torch
from milkit.frontends import torch as mtorch

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS = os.path.join(HERE, "..", "..", "..", "..", "docs")


def core_aten() -> set:
    sys.path.insert(0, os.path.join(DOCS, "_ext"))
    try:
        import torch_ops
    finally:
        sys.path.pop(0)
    return torch_ops.core_aten_ops()


def test_every_core_aten_op_converts_or_has_a_reason() -> None:
    core = core_aten()
    assert len(core) > 150, "torch's core ATen tag lists the operator set"
    names = {".".join(k.split(".")[:2]) for k in mtorch.supported_ops()}
    missing = sorted(n for n in core - names if not mtorch.unsupported_reason(n))
    assert missing == [], f"core ATen operators with neither a converter nor a reason: {missing}"


def test_reasons() -> None:
    assert "gradient" in mtorch.unsupported_reason("torch.ops.aten.convolution_backward.default")
    assert "gradient" in mtorch.unsupported_reason("aten.native_layer_norm_backward")
    assert "sparse" in mtorch.unsupported_reason("aten._to_sparse.default")
    assert "layout" in mtorch.unsupported_reason("aten.set_.source_Tensor")
    assert mtorch.unsupported_reason("aten.lgamma.default") == ""
    table = mtorch.unsupported_ops()
    assert "aten.*_backward" in table and all(table.values())
    assert not set(table) & set(mtorch.supported_ops())


def _relu_program_as(target: str) -> bytes:
    ep = torch.export.export(torch.nn.ReLU().eval(), (torch.randn(3),))
    j = json.loads(mtorch._serialize(ep))
    for n in j["graph_module"]["graph"]["nodes"]:
        if "relu" in n["target"]:
            n["target"] = target
    return json.dumps(j).encode()


@pytest.mark.parametrize("target,why", [
    ("torch.ops.aten.convolution_backward.default", "gradient (backward) operator"),
    ("torch.ops.aten._linalg_svd.default", "singular values"),
    ("torch.ops.aten.lgamma.default", None),
])
def test_unsupported_error_names_the_reason(target: str, why: str | None) -> None:
    from milkit import _core

    with pytest.raises(milkit.UnsupportedOpsError) as e:
        _core.import_torch_export(_relu_program_as(target), {}, {}, milkit.target.iOS17.value, {}, "<test>")
    msg = str(e.value)
    assert "cannot convert 1 node" in msg and target[len("torch.ops."):] in msg
    if why is None:
        assert msg.rstrip().endswith(")"), "no reason on record: the label ends the line"
    else:
        assert why in msg
    assert e.value.nodes == [msg.splitlines()[1].strip().split(": ")[0]] or e.value.nodes[0] in msg


def test_guide_table_is_generated_from_the_importer() -> None:
    sys.path.insert(0, os.path.join(DOCS, "_ext"))
    try:
        import torch_ops
    finally:
        sys.path.pop(0)
    text = torch_ops.render()
    for key in ("aten.linear", "aten.convolution", "aten.scaled_dot_product_attention"):
        assert f"| `{key}` |" in text
    assert "| `aten.convolution_backward` | a gradient (backward) operator" in text
    assert "no converter yet" not in text, "every core ATen operator converts or has a reason"
    with open(os.path.join(DOCS, "guides", "importing_pytorch.md"), encoding="utf-8") as f:
        assert "_generated/torch_ops.md" in f.read()

"""torchvision models through the torch.export importer, checked against torch eager: both
dialects (TRAINING as exported, core ATen after run_decompositions), fp32 within 1e-4 and FLOAT16
within 1e-2 of the largest output; dynamic batch at two sizes; the .pt2 path gives the same
program as the in-memory one. Small inputs and random weights keep the suite fast."""

from __future__ import annotations

import milkit
import numpy as np
import pytest
import torch
import torchvision
from support.torch_util import DIALECTS, check, compare, convert, export, randomize

MODELS = {
    "resnet18": (lambda: torchvision.models.resnet18(num_classes=10), (1, 3, 64, 64)),
    "mobilenet_v3_small": (lambda: torchvision.models.mobilenet_v3_small(num_classes=10), (1, 3, 64, 64)),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(num_classes=10), (1, 3, 64, 64)),
    "convnext_tiny": (lambda: torchvision.models.convnext_tiny(num_classes=10), (1, 3, 64, 64)),
    "vit_b_16": (lambda: torchvision.models.vit_b_16(image_size=64, num_classes=10), (1, 3, 64, 64)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_torchvision_fp32(name: str, dialect: str) -> None:
    make, shape = MODELS[name]
    torch.manual_seed(1)
    check(randomize(make()), (torch.randn(*shape),), dialect)


@pytest.mark.parametrize("name", ["resnet18", "vit_b_16"])
def test_torchvision_fp16(name: str) -> None:
    make, shape = MODELS[name]
    torch.manual_seed(2)
    check(randomize(make()), (torch.randn(*shape),), "core", rtol=1e-2, precision="fp16")


def test_dynamic_batch_two_sizes() -> None:
    m = randomize(torchvision.models.resnet18(num_classes=10))
    batch = torch.export.Dim("batch", min=1, max=8)
    mm = check(m, (torch.randn(2, 3, 32, 32),), "training", dynamic_shapes=({0: batch},),
               more_args=[(torch.randn(5, 3, 32, 32),)])
    desc = mm.get_spec().description.input[0].type.multiArrayType
    rng = desc.shapeRange.sizeRanges[0]
    assert (rng.lowerBound, rng.upperBound) == (1, 8)


def test_pt2_matches_in_memory(tmp_path) -> None:
    m = randomize(torchvision.models.mobilenet_v3_small(num_classes=10))
    x = torch.randn(1, 3, 64, 64)
    ep = export(m, (x,))
    path = tmp_path / "m.pt2"
    torch.export.save(ep, str(path))
    a = convert(ep)
    b = convert(str(path))
    assert milkit.program_to_text(a._mil_program) == milkit.program_to_text(b._mil_program)
    with torch.no_grad():
        compare(b.predict({"x": x.numpy()}), m(x), 1e-4, "mobilenet .pt2")


def test_weights_are_not_copied() -> None:
    # the imported program's consts borrow the parameters' memory
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()).eval()
    ep = export(m, (torch.randn(2, 64),))
    prog, _ = milkit.frontends.torch.import_model(ep, int(milkit.target.iOS17))
    consts = [op for op in prog.functions["main"].operations if op.op_type == "const"]
    w = ep.state_dict["0.weight"]
    ptrs = {np.asarray(op.outputs[0].val).__array_interface__["data"][0] for op in consts
            if np.asarray(op.outputs[0].val).shape == (64, 64)}
    assert w.data_ptr() in ptrs

"""Models larger than the memory a process may use: weights stay mapped (page cache, not the
process's anonymous memory) through import, the fp16 cast, the default pipeline, compression,
save, load and predict.

Each case runs in a child process capped by a cgroup v1 memory group (where this machine lets the
test create one) at a third of the weights' size, and its peak anonymous memory (RssAnon, sampled)
must stay under a bound that does not depend on the weights (BUDGET_MB).
"""

from __future__ import annotations

import importlib.util
import json
import os
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
LAYERS, DIM = 24, 2048  # 24 fp32 weights of 16 MiB: 384 MiB, three times the cap
CAP_MB = 128
BUDGET_MB = 96  # the interpreter, numpy and milkit themselves take about 20

_spec = importlib.util.spec_from_file_location("memwatch", ROOT / "benchmarks" / "memwatch.py")
memwatch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(memwatch)


def weights_mb() -> float:
    return LAYERS * DIM * DIM * 4 / 2**20


def run_capped(code: str) -> dict:
    """Runs `code` (which prints one JSON line last) in a capped child; returns that JSON."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), MILKIT_PROGRESS="0")
    w = memwatch.run(textwrap.dedent(code), cap_mb=CAP_MB, env=env, timeout=600)
    assert not w.oom, f"the memory cap ({CAP_MB} MiB) killed the step: {w}"
    assert w.rc == 0, f"{w}\n{w.err[-3000:]}"
    print(f"peak RssAnon {w.peak_mb:.0f} MiB for {weights_mb():.0f} MiB of fp32 weights ({w})")
    assert w.peak_mb < BUDGET_MB, f"peak anonymous memory {w.peak_mb:.0f} MiB over {BUDGET_MB} MiB ({w})"
    return json.loads(w.out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def mlp_weights():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((DIM, DIM), dtype=np.float32) * 0.02 for _ in range(LAYERS)]


@pytest.fixture(scope="module")
def pt2(tmp_path_factory, mlp_weights):
    import torch

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ls = torch.nn.ModuleList(torch.nn.Linear(DIM, DIM, bias=False) for _ in range(LAYERS))
            with torch.no_grad():
                for lin, w in zip(self.ls, mlp_weights):
                    lin.weight.copy_(torch.from_numpy(w))

        def forward(self, x):
            for lin in self.ls:
                x = torch.tanh(lin(x))
            return x

    d = tmp_path_factory.mktemp("budget")
    path = d / "mlp.pt2"
    torch.export.save(torch.export.export(MLP().eval(), (torch.zeros(2, DIM),)), str(path))
    return path


@pytest.fixture(scope="module")
def bf16_pt2(tmp_path_factory, mlp_weights):
    """The same layers twice over in bf16 (as LLM checkpoints are): 48 weights, 384 MiB."""
    import torch

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ls = torch.nn.ModuleList(torch.nn.Linear(DIM, DIM, bias=False) for _ in range(2 * LAYERS))
            with torch.no_grad():
                for lin, w in zip(self.ls, mlp_weights + mlp_weights):
                    lin.weight.copy_(torch.from_numpy(w))
            self.to(torch.bfloat16)

        def forward(self, x):
            for lin in self.ls:
                x = torch.tanh(lin(x))
            return x

    path = tmp_path_factory.mktemp("bf16") / "mlp.pt2"
    torch.export.save(torch.export.export(MLP().eval(), (torch.zeros(2, DIM, dtype=torch.bfloat16),)), str(path))
    weights = [lin.detach().float().numpy() for lin in torch.export.load(str(path)).state_dict.values()]
    return path, weights


def reference(mlp_weights, x):
    for w in mlp_weights:
        x = np.tanh(x @ w.T)
    return x


PIPELINE = """
    import json, numpy as np, milkit
    import milkit.optimize.coreml as cto
    src, out = {src!r}, {out!r}
    m = milkit.convert(src, compute_precision=milkit.precision.FLOAT16,
                       minimum_deployment_target=milkit.target.iOS18{extra})
    m.save(out + "/fp16.mlpackage")
    del m
    cfg = cto.OptimizationConfig(global_config=cto.OpLinearQuantizerConfig(dtype="int8"))
    q = cto.linear_quantize_weights(milkit.models.MLModel(out + "/fp16.mlpackage"), cfg)
    q.save(out + "/int8.mlpackage")
    del q
    x = np.linspace(-1, 1, 2 * {dim}, dtype=np.float32).reshape(2, {dim})
    res = {{}}
    for name in ("fp16", "int8"):
        model = milkit.models.MLModel(out + "/" + name + ".mlpackage")
        res[name] = next(iter(model.predict({{{input!r}: x}}).values())).tolist()
    print(json.dumps(res))
"""


def test_bf16_pt2_within_budget(bf16_pt2, tmp_path):
    # bf16 weights widen to fp32 and round to fp16 lazily, weight by weight, as they are written
    src, weights = bf16_pt2
    assert sum(w.size for w in weights) * 2 >= 3 * CAP_MB * 2**20
    res = run_capped(PIPELINE.format(src=str(src), out=str(tmp_path), extra="", dim=DIM, input="x"))
    check_outputs(res, weights)


def check_outputs(res, mlp_weights):
    x = np.linspace(-1, 1, 2 * DIM, dtype=np.float32).reshape(2, DIM)
    want = reference(mlp_weights, x)
    for name, tol in (("fp16", 0.02), ("int8", 0.12)):
        got = np.asarray(res[name], np.float32)
        err = np.abs(got - want).max() / np.abs(want).max()
        assert err < tol, (name, err)


@pytest.mark.parametrize("deflated", [False, True], ids=["stored", "deflated"])
def test_pt2_within_budget(pt2, mlp_weights, tmp_path, deflated):
    src = pt2
    if deflated:  # zip entries compressed: inflated weights go to the page cache too
        src = tmp_path / "deflated.pt2"
        with zipfile.ZipFile(pt2) as zin, zipfile.ZipFile(src, "w", zipfile.ZIP_DEFLATED) as zout:
            for info in zin.infolist():
                zout.writestr(info.filename, zin.read(info.filename))
    res = run_capped(PIPELINE.format(src=str(src), out=str(tmp_path), extra="", dim=DIM, input="x"))
    check_outputs(res, mlp_weights)


def test_onnx_external_data_within_budget(mlp_weights, tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, cur = [], [], "x"
    for i, w in enumerate(mlp_weights):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(w.T), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [cur, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"t{i}"]))
        cur = f"t{i}"
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, DIM])],
                          [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [2, DIM])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "mlp.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="mlp.bin", size_threshold=1024)
    del model, inits
    assert path.stat().st_size < 2**20 and (tmp_path / "mlp.bin").stat().st_size >= weights_mb() * 2**20
    res = run_capped(PIPELINE.format(src=str(path), out=str(tmp_path), extra="", dim=DIM, input="x"))
    check_outputs(res, mlp_weights)


PALETTIZE = """
    import json, milkit
    import milkit.optimize.coreml as cto
    out = {out!r}
    m = milkit.convert({src!r}, compute_precision=milkit.precision.FLOAT16,
                       minimum_deployment_target=milkit.target.iOS18)
    cfg = cto.OptimizationConfig(global_config=cto.OpPalettizerConfig(
        nbits=4, mode="uniform", granularity="per_grouped_channel", group_size=16))
    p = cto.palettize_weights(m, cfg)
    p.save(out + "/lut4.mlpackage")
    print(json.dumps({{}}))
"""

PREDICT_LUT = """
    import json, numpy as np, milkit
    x = np.linspace(-1, 1, 2 * {dim}, dtype=np.float32).reshape(2, {dim})
    lut = milkit.models.MLModel({out!r} + "/lut4.mlpackage")
    print(json.dumps(next(iter(lut.predict({{"x": x}}).values())).tolist()))
"""


@pytest.fixture(scope="module")
def palettized(pt2, tmp_path_factory):
    out = tmp_path_factory.mktemp("lut4")
    run_capped(PALETTIZE.format(src=str(pt2), out=str(out)))
    return out


def test_palettize_within_budget(palettized):
    # 4-bit indices are kept packed and written to the page cache as each weight is done
    assert (palettized / "lut4.mlpackage").is_dir()


def test_palettized_predict_within_budget(palettized):
    # the plan reads the 4-bit indices in place from the mapped weight file (never unpacked)
    got = np.asarray(run_capped(PREDICT_LUT.format(out=str(palettized), dim=DIM)), np.float32)
    import milkit
    import milkit.optimize.coreml as cto

    dense = cto.decompress_weights(milkit.models.MLModel(str(palettized / "lut4.mlpackage")))
    x = np.linspace(-1, 1, 2 * DIM, dtype=np.float32).reshape(2, DIM)
    want = next(iter(dense.predict({"x": x}).values()))
    assert np.abs(got - want).max() < 0.02 * np.abs(want).max()


MEMMAP = """
    import json, numpy as np, milkit
    from milkit import Builder as mb
    w = np.load({path!r}, mmap_mode="r")
    @mb.program(input_specs=[mb.TensorSpec(shape=(2, {dim}))], opset_version=milkit.target.iOS18)
    def prog(x):
        for i in range(w.shape[0]):
            x = mb.tanh(x=mb.linear(x=x, weight=w[i]))
        return x
    m = milkit.convert(prog, compute_precision=milkit.precision.FLOAT16,
                       minimum_deployment_target=milkit.target.iOS18)
    m.save({out!r})
    model = milkit.models.MLModel({out!r})
    x = np.linspace(-1, 1, 2 * {dim}, dtype=np.float32).reshape(2, {dim})
    print(json.dumps({{"fp16": next(iter(model.predict({{"x": x}}).values())).tolist()}}))
"""


def test_numpy_memmap_weights_within_budget(mlp_weights, tmp_path):
    # weights handed to the Builder as views of a memory-mapped .npy are borrowed, not copied
    path = tmp_path / "w.npy"
    w = np.lib.format.open_memmap(str(path), mode="w+", dtype=np.float32, shape=(LAYERS, DIM, DIM))
    for i, m in enumerate(mlp_weights):
        w[i] = m
    w.flush()
    del w
    res = run_capped(MEMMAP.format(path=str(path), dim=DIM, out=str(tmp_path / "mm.mlpackage")))
    x = np.linspace(-1, 1, 2 * DIM, dtype=np.float32).reshape(2, DIM)
    want = reference(mlp_weights, x)
    got = np.asarray(res["fp16"], np.float32)
    assert np.abs(got - want).max() / np.abs(want).max() < 0.02

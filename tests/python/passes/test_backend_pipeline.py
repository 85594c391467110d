"""coremltools' whole `backend_mlprogram` pass list (and the fp16 part of its default pipeline
before it) against milkit's, on transformer-like programs, op for op.

milkit skips only mil_backend::insert_image_preprocessing_ops, which does nothing for programs
without image inputs (milkit has no image input types)."""

import numpy as np
import pytest
from milkit.passes import apply_passes, pass_names
from support.parity import compare_programs
from support.pass_parity import assert_inputs_equal, assert_values_exact, build_both, ct_run, op_types

HEAD_DIM = 8
FP16_PART = [  # the part of PassPipeline.DEFAULT from dedup_op_and_var_names on that milkit has
    "common::dedup_op_and_var_names", "common::add_fp16_cast", "common::const_elimination",
    "common::dead_code_elimination", "common::cast_optimization", "common::dead_code_elimination",
    "common::const_elimination", "common::dead_code_elimination", "common::cast_optimization",
    "common::dead_code_elimination", "common::const_elimination", "common::const_elimination",
    "common::dead_code_elimination",
    # cleanup
    "common::dead_code_elimination", "common::const_elimination", "common::cast_optimization",
    "common::dead_code_elimination", "common::const_elimination", "common::const_deduplication",
    "common::dead_code_elimination", "common::const_deduplication", "common::noop_elimination",
    "common::dedup_op_and_var_names", "common::reduce_transposes", "common::topological_reorder",
    "common::dead_code_elimination",
]


def _backend_passes():
    from coremltools.converters.mil.mil.passes.pass_pipeline import PassPipeline

    return list(PassPipeline.get_pipeline("backend_mlprogram").passes)


def _program(H, seed=0):
    rng = np.random.default_rng(seed)

    def f(*s):
        return (rng.standard_normal(s) * 0.02).astype(np.float32)

    nh = H // HEAD_DIM
    wq = f(H, H)
    layers = [dict(g=np.ones(H, np.float32), b=np.zeros(H, np.float32), wq=wq, wk=wq.copy(), bq=f(H),
                   wv=f(H, H), wo=f(H, H), w1=f(4 * H, H), b1=f(4 * H), w2=f(H, 4 * H)) for _ in range(2)]

    def build(mb, x, x1, x2):
        x = mb.cast(x=mb.cast(x=x, dtype="fp32"), dtype="fp32")
        mask = mb.cast(x=x2, dtype="fp32")
        for L in layers:
            h = mb.layer_norm(x=x, axes=[-1], gamma=L["g"], beta=L["b"], epsilon=1e-5)
            q = mb.linear(x=h, weight=L["wq"], bias=L["bq"])
            k = mb.linear(x=h, weight=L["wk"], bias=L["bq"].copy())  # tied weights: deduplicated
            v = mb.linear(x=h, weight=L["wv"])
            q = mb.transpose(x=mb.reshape(x=q, shape=[1, -1, nh, HEAD_DIM]), perm=[0, 2, 1, 3])
            k = mb.transpose(x=mb.reshape(x=k, shape=[1, -1, nh, HEAD_DIM]), perm=[0, 2, 1, 3])
            v = mb.transpose(x=mb.reshape(x=v, shape=[1, -1, nh, HEAD_DIM]), perm=[0, 2, 1, 3])
            s = mb.matmul(x=q, y=k, transpose_y=True)
            s = mb.add(x=mb.mul(x=s, y=np.float32(1 / np.sqrt(HEAD_DIM))), y=mb.mul(x=mask, y=np.float32(-1e38)))
            s = mb.softmax(x=s, axis=-1)
            a = mb.reshape(x=mb.transpose(x=mb.matmul(x=s, y=v), perm=[0, 2, 1, 3]), shape=[1, -1, H])
            x = mb.add(x=x, y=mb.linear(x=a, weight=L["wo"]))
            h = mb.layer_norm(x=x, axes=[-1], gamma=L["g"], beta=L["b"], epsilon=1e-5)
            m = mb.linear(x=h, weight=L["w1"], bias=L["b1"])
            m = mb.mul(x=m, y=mb.sigmoid(x=m))  # silu
            x = mb.add(x=x, y=mb.linear(x=m, weight=L["w2"]))
        return x, mb.reduce_mean(x=x, axes=[-1], keep_dims=True, name="mean/out")

    return build


def _specs(S):
    # x1 is unused (handle_unused_inputs); x2 is an fp16 mask input (adjust_io before iOS16)
    return [((1, S, 32), "fp16"), ((2,), "fp32"), ((1, 1, 1, S), "fp16")]


def _run(cp, mp, syms, passes):
    have = set(pass_names())
    mine = [p for p in passes if p in have]
    assert set(passes) - set(mine) <= {"mil_backend::insert_image_preprocessing_ops"}, set(passes) - set(mine)
    ct_run(cp, passes)
    apply_passes(mp, mine, verify_each=True)
    try:
        compare_programs(cp, mp, syms)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- coremltools:{cp}\n--- milkit:{mp}") from None
    assert_values_exact(cp, mp)
    assert_inputs_equal(cp, mp)
    mp.validate()


@pytest.mark.parametrize("opset", ["iOS15", "iOS16", "iOS17", "iOS18"])
@pytest.mark.parametrize("S", ["S", 5])
def test_backend_mlprogram(opset, S):
    cp, mp, syms = build_both(_program(32), _specs(S), opset)
    _run(cp, mp, syms, _backend_passes())
    ops = op_types(mp)
    assert "silu" in ops and "sigmoid" not in ops and "pow" not in ops
    assert "x1_tmp" in [o.name for o in mp.functions["main"].operations]


@pytest.mark.parametrize("opset", ["iOS15", "iOS16", "iOS17", "iOS18"])
def test_fp16_then_backend(opset):
    cp, mp, syms = build_both(_program(32, seed=1), _specs("S"), opset)
    _run(cp, mp, syms, FP16_PART + _backend_passes())
    fn = mp.functions["main"]
    consts = [o.outputs[0] for o in fn.operations if o.op_type == "const" and len(o.outputs[0].shape) == 2]
    assert consts and all(v.dtype.__name__ == "fp16" for v in consts)

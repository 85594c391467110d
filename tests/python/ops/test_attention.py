"""Parity of scaled_dot_product_attention (iOS18) with coremltools: types over symbolic dims, masks,
value inference, errors; and the two deliberate differences, pinned."""

from __future__ import annotations

import milkit
import numpy as np
import pytest
from milkit import Builder as mb_mk
from support.parity import check, check_error

RNG = np.random.default_rng(0)
Q, K, V = (RNG.standard_normal(s).astype(np.float32) for s in [(2, 3, 4), (2, 5, 4), (2, 5, 6)])
M_BOOL = RNG.random((3, 5)) > 0.3
M_BOOL[:, 0] = True
M_F32 = RNG.standard_normal((2, 1, 5)).astype(np.float32)

SDPA = "scaled_dot_product_attention"


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("specs", [
    [(("B", "L", 8), None), (("B", "S", 8), None), (("B", "S", 6), None)],
    [((2, 4, "L", 16), None), ((2, 4, "S", 16), None), ((2, 4, "S", 16), None)],
    [((1, 2, 3, 4, 5), None), ((1, 2, 3, 7, 5), None), ((1, 2, 3, 7, 2), None)],
])
def test_sdpa_types(dtype, specs):
    specs = [(s, dtype) for s, _ in specs]
    check(lambda mb, q, k, v: mb.scaled_dot_product_attention(query=q, key=k, value=v), specs, ["iOS18"])


@pytest.mark.parametrize("mask", [("bool", ("L", "S")), ("fp32", ("S",)), ("fp16", ("B", 1, "S")),
                                  ("bool", (1, "L", 1)), ("fp32", ("B", "L", "S"))])
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_sdpa_mask_types(mask, dtype):
    mdt, mshape = mask
    specs = [(("B", "L", 8), dtype), (("B", "S", 8), dtype), (("B", "S", 6), dtype), (mshape, mdt)]
    check(lambda mb, q, k, v, m: mb.scaled_dot_product_attention(query=q, key=k, value=v, attn_mask=m), specs,
          ["iOS18"])


@pytest.mark.parametrize("mask", [None, M_BOOL, M_F32, M_F32.astype(np.float16)])
def test_sdpa_value_inference(mask):
    kw = {} if mask is None else {"attn_mask": mask}
    check(lambda mb, x: mb.scaled_dot_product_attention(query=Q, key=K, value=V, **kw), [((1,), "fp32")], ["iOS18"])
    q, k, v = (a.astype(np.float16) for a in (Q, K, V))
    # coremltools computes in fp16 numpy, milkit in double then rounds: a few fp16 ulps apart
    check(lambda mb, x: mb.scaled_dot_product_attention(query=q, key=k, value=v, **kw), [((1,), "fp32")], ["iOS18"],
          rtol=1e-2)


def test_sdpa_fully_masked_rows_fold_to_nan():
    m = np.zeros((3, 5), bool)
    check(lambda mb, x: mb.scaled_dot_product_attention(query=Q, key=K, value=V, attn_mask=m), [((1,), "fp32")],
          ["iOS18"])


def test_sdpa_opsets():
    specs = [((1, 2, 4), "fp32")] * 3
    for opset in ["iOS15", "iOS16", "iOS17"]:
        check_error(lambda mb, q, k, v: mb.scaled_dot_product_attention(query=q, key=k, value=v), specs, opset,
                    match="scaled_dot_product_attention")


def test_sdpa_errors():
    def err(specs, match, **kw):
        check_error(lambda mb, q, k, v, *m: mb.scaled_dot_product_attention(
            query=q, key=k, value=v, **({"attn_mask": m[0]} if m else {}), **kw), specs, "iOS18",
            match=r"scaled_dot_product_attention 'scaled_dot_product_attention_0'.*" + match)

    f = "fp32"
    err([((2, 3, 4), f), ((2, 1, 5, 4), f), ((2, 5, 4), f)], "same rank")
    err([((3, 4), f), ((5, 4), f), ((5, 4), f)], "at least rank 3")
    err([((2, 3, 4), f), ((3, 5, 4), f), ((2, 5, 4), f)], "same batch dims")
    err([((2, 2, 3, 4), f), ((2, 1, 5, 4), f), ((2, 2, 5, 4), f)], "same batch dims")
    err([((2, 3, 4), f), ((2, 5, 3), f), ((2, 5, 4), f)], "'key'.*embedding")
    err([((2, 3, 4), f), ((2, 5, 4), f), ((2, 6, 4), f)], "'value'.*sequence length")
    err([((2, 3, 4), f), ((2, 5, 4), f), ((2, 5, 4), f), ((3, 4), "bool")], "'attn_mask'.*sequence length")
    err([((2, 3, 4), f), ((2, 5, 4), f), ((2, 5, 4), f), ((2, 2, 5), f)], "[Bb]roadcast")
    err([((2, 3, 4), f), ((2, 5, 4), f), ((2, 5, 4), f), ((3, 5), "int32")], "'attn_mask'")
    err([((2, 3, 4), "int32"), ((2, 5, 4), "int32"), ((2, 5, 4), "int32")], "'query'")
    err([((2, 3, 4), "fp16"), ((2, 5, 4), f), ((2, 5, 4), f)], "'key'")
    # symbolic batch dims are not compared (coremltools skips the check if any is symbolic)
    check(lambda mb, q, k, v: mb.scaled_dot_product_attention(query=q, key=k, value=v),
          [(("B", 3, 4), f), ((3, 5, 4), f), ((2, 5, 4), f)], ["iOS18"])


def _mk(build, specs):
    in_specs = [mb_mk.TensorSpec(shape=s, dtype=getattr(milkit.types, t)) for s, t in specs]
    names = [f"x{i}" for i in range(len(specs))]
    ns = {"build": build, "mb": mb_mk}
    exec(f"def main({', '.join(names)}):\n    return build(mb, {', '.join(names)})\n", ns)
    return mb_mk.program(input_specs=in_specs, opset_version=milkit.target.iOS18)(ns["main"])


def _ct(build, specs):
    from coremltools.converters.mil import Builder as cmb
    from coremltools.converters.mil.mil import types

    in_specs = [cmb.TensorSpec(shape=s, dtype=getattr(types, t)) for s, t in specs]
    names = [f"x{i}" for i in range(len(specs))]
    ns = {"build": build, "mb": cmb}
    exec(f"def main({', '.join(names)}):\n    return build(mb, {', '.join(names)})\n", ns)
    import coremltools as ct

    return cmb.program(input_specs=in_specs, opset_version=ct.target.iOS18)(ns["main"])


def test_sdpa_mask_must_not_broadcast_the_output():
    """Difference from coremltools, pinned: the op requires the mask to broadcast *to* [B*, L, S].
    coremltools only checks that mask[:-1] and query[:-1] broadcast together, and then infers the
    query-shaped output although softmax(QK^T + mask) @ V has the larger broadcast shape (its own
    value inference returns that larger value). milkit rejects such masks."""
    def build(mb, q, k, v, m):
        return mb.scaled_dot_product_attention(query=q, key=k, value=v, attn_mask=m)

    for mshape in [(4, 2, 3, 5), (1, 2, 3, 5)]:  # more dims than query
        specs = [((2, 3, 4), "fp32"), ((2, 5, 4), "fp32"), ((2, 5, 6), "fp32"), (mshape, "bool")]
        _ct(build, specs)  # accepted
        with pytest.raises(ValueError, match=r"scaled_dot_product_attention.*'attn_mask'.*more dims than query"):
            _mk(build, specs)
    specs = [((1, 3, 4), "fp32"), ((1, 5, 4), "fp32"), ((1, 5, 6), "fp32"), ((4, 3, 5), "fp32")]
    _ct(build, specs)
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention.*'attn_mask'.*does not broadcast to query"):
        _mk(build, specs)


def test_sdpa_unknown_mask_is_not_folded():
    """Difference from coremltools, pinned: with known query / key / value and a run-time mask,
    coremltools' value inference leaves the mask out and folds a wrong value; milkit does not fold."""
    def build(mb, m):
        return mb.scaled_dot_product_attention(query=Q, key=K, value=V, attn_mask=m)

    specs = [((3, 5), "bool")]
    assert _ct(build, specs).functions["main"].outputs[0].val is not None
    assert _mk(build, specs).functions["main"].outputs[0].val is None

"""ONNX's backend conformance suite (the node cases the ``onnx`` package generates) against
``milkit.onnx_backend``, with the expected failures kept in ``onnx_backend_xfail.txt``.

Run as a script to rerun every case and rewrite that file (each failing case with the error as
its reason); ``frontends/onnx/test_backend_suite.py`` runs the suite in ``make test``.

    PYTHONPATH=python python3 tests/python/support/onnx_suite.py [--write] [--families]

--families prints the pass rate per operator family (a markdown table).
"""

from __future__ import annotations

import os
import re
import sys
import unittest
import warnings
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
XFAIL_FILE = os.path.join(HERE, "onnx_backend_xfail.txt")


def read_xfail() -> Dict[str, str]:
    """test name (without the _cpu suffix) -> reason."""
    out: Dict[str, str] = {}
    if not os.path.exists(XFAIL_FILE):
        return out
    with open(XFAIL_FILE) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition("#")
            out[name.strip()] = reason.strip()
    return out


def node_test_class(xfail: bool = True) -> type:
    """The unittest class of ONNX's node cases, run by milkit's backend (CPU only)."""
    import milkit.onnx_backend as backend
    import onnx.backend.test

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bt = onnx.backend.test.BackendTest(backend, __name__)
    if xfail:
        for name in read_xfail():
            bt.xfail("^" + re.escape(name) + "_cpu$")
    cls = bt.test_cases["OnnxBackendNodeModelTest"]
    # the runner makes a CUDA twin of every case, skipped for a CPU backend: drop them
    for name in [n for n in vars(cls) if n.startswith("test_") and n.endswith("_cuda")]:
        delattr(cls, name)
    return cls


# element types milkit claims: it computes in fp32 / fp16 / int32 / bool and narrows to them, and
# holds bf16, the float8 family, float4 e2m1, int4 / uint4 and int2 / uint2 exactly in fp32 / int32
# (conversions into them rounded in the program); strings and complex numbers are not claimed
CLAIMED_TYPES = {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26}


def _elem_types(model) -> set:
    g = model.graph
    types = {v.type.tensor_type.elem_type for v in list(g.input) + list(g.output) if v.type.HasField("tensor_type")}
    types |= {t.data_type for t in g.initializer}
    for n in g.node:
        for a in n.attribute:
            if a.HasField("t"):
                types.add(a.t.data_type)
            if a.name == "to":
                types.add(a.i)
    return types


def node_case_ops() -> Dict[str, List[str]]:
    """case name -> the operators of its graph (default domain); a case holding an element type
    milkit does not claim gets the pseudo-operator '<dtype>'."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    out = {}
    for c in cases:
        ops = {n.op_type for n in c.model.graph.node}
        if not _elem_types(c.model) <= CLAIMED_TYPES:
            ops.add("<dtype>")
        out[c.name] = sorted(ops)
    return out


# operator families for the per-family table; an operator not listed is "other"
FAMILIES: Dict[str, List[str]] = {
    "elementwise & activations": (
        "Abs Acos Acosh Add And Asin Asinh Atan Atanh Ceil Celu Clip Cos Cosh Div Elu Equal Erf Exp Floor Gelu "
        "Greater GreaterOrEqual HardSigmoid HardSwish Hardmax Identity IsInf IsNaN LeakyRelu Less LessOrEqual Log "
        "LogSoftmax Max Mean Min Mish Mod Mul Neg Not Or PRelu Pow Reciprocal Relu Round Selu Shrink Sigmoid Sign Sin "
        "Sinh Softmax Softplus Softsign Sqrt Sub Sum Swish Tan Tanh ThresholdedRelu Where Xor BitShift BitwiseAnd "
        "BitwiseNot BitwiseOr BitwiseXor SwiGLU").split(),
    "casts & element types": "Cast CastLike BitCast".split(),
    "conv, pool, matmul": (
        "Conv ConvTranspose DeformConv Gemm MatMul AveragePool MaxPool LpPool GlobalAveragePool GlobalMaxPool "
        "GlobalLpPool MaxUnpool Col2Im Dropout LRN").split(),
    "normalization": (
        "BatchNormalization InstanceNormalization LayerNormalization GroupNormalization RMSNormalization "
        "MeanVarianceNormalization LpNormalization").split(),
    "quantization": (
        "QuantizeLinear DequantizeLinear DynamicQuantizeLinear QLinearMatMul QLinearConv MatMulInteger "
        "ConvInteger").split(),
    "shape & tensor": (
        "Concat Constant ConstantOfShape DepthToSpace Einsum Expand EyeLike Flatten Gather GatherElements GatherND "
        "NonZero OneHot Pad Range Reshape Scatter ScatterElements ScatterND Shape Size Slice SpaceToDepth Split "
        "Squeeze Tile TopK Transpose Trilu Unsqueeze Compress ReverseSequence Unique TensorScatter CenterCropPad "
        "Det").split(),
    "reductions & scans": (
        "ArgMax ArgMin ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd "
        "ReduceSum ReduceSumSquare CumSum CumProd").split(),
    "control flow, sequences, optionals": (
        "If Loop Scan Optional OptionalGetElement OptionalHasElement SequenceAt SequenceConstruct SequenceEmpty "
        "SequenceErase SequenceInsert SequenceLength SequenceMap SplitToSequence ConcatFromSequence").split(),
    "recurrent": "GRU LSTM RNN".split(),
    "resize & sampling": "Resize Upsample GridSample AffineGrid RoiAlign NonMaxSuppression".split(),
    "attention": "Attention FlexAttention LinearAttention RotaryEmbedding CausalConvWithState".split(),
    "signal": "DFT STFT MelWeightMatrix HannWindow HammingWindow BlackmanWindow".split(),
    "losses & training": "NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss Adagrad Adam Momentum".split(),
    "strings & text": (
        "StringConcat StringNormalizer StringSplit RegexFullMatch TfIdfVectorizer").split(),
    "ai.onnx.ml & image decoding": "ArrayFeatureExtractor Binarizer LabelEncoder TreeEnsemble ImageDecoder".split(),
    "random": "Bernoulli RandomNormal RandomNormalLike RandomUniform RandomUniformLike Multinomial".split(),
}


def case_family(name: str, ops: List[str]) -> str:
    """The family of a node case: its operator's (the one the case is named after when the case
    holds several nodes, as the expanded ones do)."""
    family_of = {op: fam for fam, l in FAMILIES.items() for op in l}
    real = [o for o in ops if o != "<dtype>"]
    key = name[len("test_"):].replace("_", "").lower()
    named = sorted((o for o in family_of if key.startswith(o.lower())), key=len, reverse=True)
    op = named[0] if named else (real[0] if len(real) == 1 else None)
    if op is None:
        op = next((o for o in real if o in family_of), real[0] if real else "")
    return family_of.get(op, "other")


def family_table(fails: Dict[str, str]) -> List[Tuple[str, int, int]]:
    """(family, cases, passing) for every family, from the failures of a run."""
    import collections

    ops = node_case_ops()
    total: Dict[str, int] = collections.Counter()
    good: Dict[str, int] = collections.Counter()
    for name, o in ops.items():
        fam = case_family(name, o)
        total[fam] += 1
        good[fam] += name not in fails
    return sorted(((f, total[f], good[f]) for f in total), key=lambda r: -r[1])


def run_all() -> Tuple[int, Dict[str, str]]:
    """Runs every node case without expected failures; returns (count, failures name -> reason)."""
    cls = node_test_class(xfail=False)
    suite = unittest.TestLoader().loadTestsFromTestCase(cls)
    result = unittest.TestResult()
    suite.run(result)
    fails: Dict[str, str] = {}
    for test, tb in result.failures + result.errors:
        name = test.id().rsplit(".", 1)[-1]
        if name.endswith("_cpu"):
            name = name[: -len("_cpu")]
        lines = [ln for ln in tb.strip().splitlines() if ln.strip()]
        last = lines[-1] if lines else "failed"
        # keep the first line of the message, short, without addresses or temp paths
        last = re.sub(r"0x[0-9a-f]+", "0x..", last)[:180]
        fails[name] = last
    return result.testsRun, fails


def main() -> None:
    n, fails = run_all()
    print(f"{n} cases, {len(fails)} fail ({100.0 * (n - len(fails)) / max(n, 1):.1f}% pass)")
    if "--families" in sys.argv:
        print("| family | cases | pass | rate |\n|---|---:|---:|---:|")
        for fam, t, g in family_table(fails):
            print(f"| {fam} | {t} | {g} | {100.0 * g / t:.1f}% |")
    if "--write" in sys.argv:
        with open(XFAIL_FILE, "w") as f:
            f.write("# ONNX backend node cases milkit is expected to fail, one per line: name  # reason\n")
            f.write("# Rewritten by `PYTHONPATH=python python3 tests/python/onnx_suite.py --write`.\n")
            for name in sorted(fails):
                f.write(f"{name}  # {fails[name]}\n")


if __name__ == "__main__":
    main()

"""mil_backend::adjust_io_to_supported_types against coremltools."""

import numpy as np
import pytest
from support.parity import ALL_OPSETS
from support.pass_parity import check_passes, op_types

P = "mil_backend::adjust_io_to_supported_types"


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_fp16_io(opset):
    def build(mb, x, x1):
        a = mb.add(x=x, y=x)  # fp16 in, fp16 out
        return a, mb.mul(x=x1, y=np.float32(2)), mb.cast(x=x1, dtype="fp16")

    cp, mp = check_passes(build, [(("S", 2), "fp16"), ((2,), "fp32")], [P], opset)
    n_cast = op_types(mp).count("cast")
    assert n_cast == (4 if opset == "iOS15" else 1)


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_other_dtypes(opset):
    def build(mb, x, x1, x2, x3):
        a = mb.logical_not(x=x)  # bool in, bool out
        b = mb.cast(x=x1, dtype="fp32")  # int16 (iOS17+ runtime type)
        c = mb.cast(x=x2, dtype="int32")  # fp16
        return a, b, c, x3, mb.greater(x=x3, y=0.0)

    specs = [((3,), "bool"), ((3,), "int16" if opset >= "iOS17" else "int32"), ((3,), "fp16"), ((2,), "fp32")]
    check_passes(build, specs, [P], opset)
    check_passes(build, specs, [P, "common::cast_optimization", "common::dead_code_elimination"], opset)


def test_input_is_output_and_unsupported():
    def build(mb, x, x1):
        return x, mb.cast(x=x1, dtype="int32")

    def build15(mb, x, x1):  # int8 is no runtime type before iOS17: retyped, no cast
        return x, mb.add(x=x, y=x)

    cp, mp = check_passes(build15, [((2,), "fp16"), ((2,), "int8")], [P], "iOS15")
    assert mp.functions["main"].inputs["x1"].dtype.__name__ == "int32"
    check_passes(build, [((2,), "bool"), ((2,), "int8")], [P], "iOS17")

"""Programs built with milkit alone, for tests where coremltools gives up or is wrong."""

import milkit
from milkit import Builder as mkb
from milkit import types as mtypes


def mk_build(build, shapes, opset="iOS17"):
    """Builds with milkit only (for cases where coremltools is wrong or gives up)."""
    syms = {}
    specs = []
    for shape, dtype in shapes:
        dims = []
        for d in shape:
            if isinstance(d, str):
                syms.setdefault(d, milkit.get_new_symbol(d))
                d = syms[d]
            dims.append(d)
        specs.append(mkb.TensorSpec(shape=tuple(dims), dtype=getattr(mtypes, dtype)))
    names = [f"x{i}" if i else "x" for i in range(len(specs))]
    ns = {"build": build, "mb": mkb}
    exec(f"def main({', '.join(names)}):\n    return build(mb, {', '.join(names)})\n", ns)
    return mkb.program(input_specs=specs, opset_version=getattr(milkit.target, opset))(ns["main"])

"""milkit's op registry against coremltools' at every ML Program opset (iOS15-iOS18): the same op
names, and for each op the same inputs (names, order, optional, const, kind, allowed dtypes) and the
same fixed default values. Output names and counts, and defaults computed from other inputs, are
checked by the per-family parity tests, which build every op with both libraries."""

import numpy as np
import pytest

OPSETS = {"iOS15": 6, "iOS16": 7, "iOS17": 8, "iOS18": 9}

# Ops of coremltools' registry milkit does not have. The tests fail when another op is
# missing, and also when one of these arrives, so the list stays exact (empty: every op is there).
NOT_YET: set = set()


def _ct_registry():
    from support.parity import _ct

    _ct()
    from coremltools.converters.mil.mil import types
    from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry

    return SSAOpRegistry, types


def _ct_ops(opset: int) -> dict:
    reg, _ = _ct_registry()
    out = {}
    for name, versions in reg.core_ops.items():
        eligible = [v for v in versions if int(v) <= opset]
        if eligible:
            out[name] = versions[max(eligible)]
    return out


def _ct_dtypes(cls, t, types) -> set:
    dom = getattr(t, "type_domain", ())
    if isinstance(dom, str):
        dom = cls.type_domains[dom]
    if not dom and getattr(t, "type_domain_id", None) is not None:  # "T": resolved per op instance
        dom = cls.type_domains[t.type_domain_id]
    return {types.builtin_to_string(d) for d in dom}


def _ct_kind(t) -> str:
    return {"TensorInputType": "tensor", "TupleInputType": "tuple", "ListInputType": "list",
            "ListOrTensorOrDictInputType": "list_or_tensor", "StateInputType": "state",
            "PyFunctionInputType": "function", "InternalInputType": "internal"}.get(type(t).__name__, type(t).__name__)


def _ct_fixed_defaults(cls) -> dict | None:
    """The defaults when they do not depend on the op's inputs (None when they do)."""

    class _NoInputs:
        def __getattr__(self, name):
            raise AttributeError(name)

    try:
        d = cls.default_inputs(_NoInputs())
    except Exception:
        return None
    return dict(d.items()) if hasattr(d, "items") else dict(vars(d).get("_defaults", {}))


def _same_default(mk, ct) -> bool:
    if isinstance(mk, str) or isinstance(ct, str):
        return mk == ct
    try:
        m = np.asarray(mk)
        # coremltools' Python floats become fp32 consts: compare in milkit's dtype
        return np.array_equal(m, np.asarray(ct).astype(m.dtype))
    except (TypeError, ValueError):
        return mk == ct


# coremltools' InputSpec lists these inputs in dict-merge order; milkit keeps the documented order
# (only the printed argument order differs: names, values and consts are equal). random_bernoulli:
# coremltools declares prob before seed but materializes seed's default first; milkit materializes
# defaults in input order, so it declares seed first to create the same consts in the same order.
_ORDER_EXEMPT = {"avg_pool", "conv_quantized", "random_bernoulli"}


@pytest.mark.parametrize("opset", sorted(OPSETS))
def test_same_op_names(opset):
    import milkit._core as core

    ct_names = set(_ct_ops(OPSETS[opset]))
    mk_names = set(core.op_names(OPSETS[opset]))
    assert sorted(ct_names - mk_names) == sorted(NOT_YET), "ops milkit lacks"
    reg, _ = _ct_registry()
    # coreml_update_state is a dialect op in coremltools (lowered to read_state / write_state when
    # written); milkit registers it as an op of its own, written the same way. write_state is the
    # iOS18 op coremltools' writer emits without registering it at any opset; milkit registers it
    # so packages holding it load.
    extra = mk_names - ct_names - set(reg.dialect_ops) - {"write_state"}
    assert sorted(extra) == [], "ops milkit has that coremltools does not"


def _ops_at(opset):
    return sorted(_ct_ops(OPSETS[opset]))


@pytest.mark.parametrize("opset", sorted(OPSETS))
def test_same_inputs(opset):
    problems = []
    for name, cls in sorted(_ct_ops(OPSETS[opset]).items()):
        if name in ("const", "_const_symbolic"):
            continue  # created with a value, no inputs to compare
        if name in NOT_YET:
            continue
        problems += _input_problems(name, cls, OPSETS[opset])
    assert problems == [], f"{len(problems)} differences:\n" + "\n".join(problems)


def test_complex_dialect_ops():
    """The complex dialect (coremltools' namespace "complex"): the same ops, inputs and defaults.
    They are not core ops: op_names leaves them out (test_same_op_names) and dialect_op_names lists
    them; they exist at every opset."""
    import milkit._core as core

    reg, _ = _ct_registry()
    ct_ops = {n: c for n, c in reg.dialect_ops.items() if getattr(c, "_dialect_namespace", None) == "complex"}
    assert sorted(core.dialect_op_names()) == sorted(ct_ops)
    problems = []
    for opset in OPSETS.values():
        for name, cls in sorted(ct_ops.items()):
            problems += _input_problems(name, cls, opset)
    assert problems == [], f"{len(problems)} differences:\n" + "\n".join(problems)


def _input_problems(name, cls, opset) -> list:
    """Differences between milkit's inputs of op `name` at `opset` and coremltools' op class."""
    import milkit._core as core

    _, types = _ct_registry()
    problems: list = []
    try:
        mk = core.op_inputs(name, opset)
    except Exception as e:
        return [f"{name}: {e}"]
    ct_inputs = [(n, t) for n, t in cls.input_spec.input_types.items()
                 if _ct_kind(t) not in ("function", "internal")]
    ct_names, mk_names = [n for n, _ in ct_inputs], [i["name"] for i in mk]
    if ct_names != mk_names and (name not in _ORDER_EXEMPT or sorted(ct_names) != sorted(mk_names)):
        return [f"{name}: inputs {mk_names} != coremltools {ct_names}"]
    by_name = {i["name"]: i for i in mk}
    mk = [by_name[n] for n in ct_names]
    defaults = _ct_fixed_defaults(cls)
    for (n, t), i in zip(ct_inputs, mk):
        where = f"{name}.{n}"
        if bool(t.optional) != i["optional"]:
            problems.append(f"{where}: optional {i['optional']} != {t.optional}")
        if bool(getattr(t, "const", False)) != i["const"]:
            problems.append(f"{where}: const {i['const']} != {getattr(t, 'const', False)}")
        kind = _ct_kind(t)
        if kind != i["kind"]:
            problems.append(f"{where}: kind {i['kind']} != {kind}")
        if kind in ("tensor",):
            want = _ct_dtypes(cls, t, types)
            have = {d.strip() for d in i["dtypes"].split(",") if d.strip()}
            if want and have != want:
                problems.append(f"{where}: dtypes {sorted(have)} != {sorted(want)}")
        if defaults is not None and i["default"] is not None and n in defaults:
            if not _same_default(i["default"], defaults[n]):
                problems.append(f"{where}: default {i['default']!r} != {defaults[n]!r}")
        if defaults is not None and n in defaults and i["optional"] and i["default"] is None:
            pass  # milkit computes it (DefaultsFn): checked by building the op
    return problems

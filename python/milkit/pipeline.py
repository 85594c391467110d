"""Pass pipelines with coremltools' names and contents (``ct.PassPipeline``), compute precision
(``ct.precision``), and the runner ``convert`` uses: the main pipeline, then the backend's passes,
one at a time, with per-pass times and the list of passes milkit skipped."""

from __future__ import annotations

import enum
import sys
import time
from typing import Any, Dict, Iterable, List, Tuple

from . import _core
from ._apply_types import _update_output_dtypes

__all__ = [
    "ComputePrecision", "precision", "PassPipeline", "COMMON_PASSES", "CLEANUP_PASSES", "BACKEND_MLPROGRAM_PASSES",
]

# coremltools 9's pipelines, in order (passes milkit lacks are skipped and reported)
COMMON_PASSES = [
    "common::lower_complex_dialect_ops", "common::update_output_dtypes", "common::cast_optimization",
    "common::noop_elimination", "common::int_op_canonicalization",
    "common::nullify_redundant_quantization_zero_point", "common::dequantize_quantize_pair_elimination",
    "common::distributive_quantized_binary_op_scale_normalization", "common::dequantize_to_constexpr",
    "common::canonicalize_quantized_lut_pattern", "common::const_elimination",
    "common::sanitize_input_output_names", "common::divide_to_multiply", "common::select_optimization",
    "common::add_conv_transpose_output_shape", "common::const_elimination", "common::const_deduplication",
    "common::loop_invariant_elimination", "common::remove_symbolic_reshape", "common::noop_elimination",
    "common::fuse_matmul_weight_bias", "common::fuse_linear_bias", "common::fuse_gelu_tanh_approximation",
    "common::fuse_gelu_exact", "common::fuse_leaky_relu", "common::rank0_expand_dims_swap",
    "common::fuse_squeeze_expand_dims", "common::compose_conv1d", "common::use_reflection_padding",
    "common::merge_consecutive_paddings", "common::fuse_pad_conv", "common::image_input_preprocess",
    "common::replace_stack_reshape", "common::reduce_transposes", "common::fuse_dilated_conv",
    "common::fuse_conv_scale", "common::fuse_conv_bias", "common::fuse_onehot_matmul_to_gather",
    "common::fuse_layernorm_or_instancenorm", "common::fuse_elementwise_to_batchnorm",
    "common::fuse_reduce_mean", "common::fuse_conv_batchnorm", "common::fuse_conv_scale",
    "common::fuse_conv_bias", "common::fuse_conv_batchnorm", "common::detect_concat_interleave",
    "common::concat_to_pixel_shuffle", "common::fuse_prelu", "common::prelu_to_lrelu",
    "common::merge_consecutive_relus", "common::merge_consecutive_reshapes",
    "common::merge_consecutive_transposes", "common::fuse_transpose_matmul",
    "common::expand_high_rank_reshape_and_transpose", "common::fuse_stack_split", "common::reduce_transposes",
    "common::remove_redundant_ops", "common::dedup_op_and_var_names", "common::add_fp16_cast",
    "common::add_int16_cast", "common::update_output_dtypes", "common::guard_negative_gather_indices",
    "common::const_elimination", "common::dead_code_elimination", "common::cast_optimization",
    "common::dead_code_elimination", "common::add_int16_cast", "common::const_elimination",
    "common::dead_code_elimination", "common::cast_optimization", "common::dead_code_elimination",
    "common::const_elimination", "common::canonicalize_inplace_pattern", "common::prefer_state_in_downstream",
    "common::const_elimination", "common::dead_code_elimination",
]
CLEANUP_PASSES = [
    "common::dead_code_elimination", "common::const_elimination", "common::cast_optimization",
    "common::dead_code_elimination", "common::const_elimination", "common::const_deduplication",
    "common::dead_code_elimination", "common::merge_affine_dequantize_with_consecutive_ops",
    "common::expand_dynamic_linear", "common::fuse_transpose_matmul", "common::dead_code_elimination",
    "common::const_deduplication", "common::loop_invariant_elimination", "common::noop_elimination",
    "common::dedup_op_and_var_names", "common::reduce_transposes", "common::remove_redundant_ops",
    "common::topological_reorder", "common::dead_code_elimination",
]
BACKEND_MLPROGRAM_PASSES = [
    "common::const_elimination", "mil_backend::adjust_io_to_supported_types",
    "mil_backend::insert_image_preprocessing_ops", "mil_backend::fuse_activation_silu",
    "mil_backend::fuse_pow2_sqrt", "common::const_elimination", "common::const_deduplication",
    "common::cast_optimization", "common::dead_code_elimination", "mil_backend::sanitize_name_strings",
    "common::dedup_op_and_var_names", "nn_backend::handle_unused_inputs",
]


class _ClassProperty:
    def __init__(self, f: Any) -> None:
        self.f = f

    def __get__(self, obj: Any, owner: Any) -> Any:
        return self.f(owner)


class PassPipeline:
    """An ordered list of pass names with per-pass options (coremltools' ``ct.PassPipeline``)."""

    def __init__(self, pass_names: Iterable[str] | None = None, pipeline_name: str = "default") -> None:
        self._pass_names = list(COMMON_PASSES + CLEANUP_PASSES if pass_names is None else pass_names)
        self._pass_options: dict[str, dict[str, str]] = {}
        self.name = pipeline_name

    @property
    def passes(self) -> list[str]:
        return list(self._pass_names)

    def append_pass(self, pass_name: str) -> None:
        self._pass_names.append(pass_name)

    def insert_pass(self, index: int, pass_name: str) -> None:
        self._pass_names.insert(index, pass_name)

    def remove_pass(self, index: int) -> None:
        del self._pass_names[index]

    def remove_passes(self, passes_names: Iterable[str]) -> None:
        drop = set(passes_names)
        self._pass_names = [p for p in self._pass_names if p not in drop]

    def set_options(self, pass_name: str, options: dict[str, Any], override: bool = True) -> None:
        if pass_name in self._pass_options and not override:
            raise ValueError(f"options of {pass_name} are already set")
        self._pass_options[pass_name] = {k: str(v) for k, v in options.items()}

    def get_options(self, pass_name: str) -> dict[str, str] | None:
        return self._pass_options.get(pass_name)

    def get_all_options(self) -> dict[str, dict[str, str]]:
        return dict(self._pass_options)

    def __repr__(self) -> str:
        return f"PassPipeline({self.name!r}, {len(self._pass_names)} passes)"

    @_ClassProperty
    def EMPTY(cls) -> "PassPipeline":  # noqa: N802, N805
        return cls([], "empty")

    @_ClassProperty
    def DEFAULT(cls) -> "PassPipeline":  # noqa: N802, N805
        return cls(None, "default")

    @_ClassProperty
    def CLEANUP(cls) -> "PassPipeline":  # noqa: N802, N805
        return cls(CLEANUP_PASSES, "cleanup")


class ComputePrecision(enum.Enum):
    """``ct.precision``."""

    FLOAT16 = "float16"
    FLOAT32 = "float32"


precision = ComputePrecision


def _print_pass_times(times: list) -> None:
    """Per-pass wall times of one convert, slowest first (convert(debug=True) or MILKIT_PASS_TIMES=1)."""
    total = sum(t for _, t in times) or 1e-9
    agg: dict = {}
    for name, t in times:
        n, s = agg.get(name, (0, 0.0))
        agg[name] = (n + 1, s + t)
    lines = [f"milkit convert: {len(times)} pass runs, {total * 1e3:.1f} ms"]
    for name, (n, t) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"  {name:<52} {t * 1e3:9.2f} ms {100 * t / total:5.1f}%" + (f"  ({n} runs)" if n > 1 else ""))
    print("\n".join(lines), file=sys.stderr)


def _pipeline_passes(pass_pipeline: Any, compute_precision: Any) -> Tuple[List[str], Dict[str, Any]]:
    """The passes convert runs (main pipeline, then the backend's) and their options."""
    pipeline = PassPipeline.DEFAULT if pass_pipeline is None else pass_pipeline
    main_passes = pipeline.passes
    if compute_precision is ComputePrecision.FLOAT32:
        main_passes = [p for p in main_passes if p not in ("common::add_fp16_cast", "common::add_int16_cast")]
    options = pipeline.get_all_options()
    # coremltools' _construct_other_pipelines: a DEFAULT pass the main pipeline leaves out is
    # also left out of the backend pipeline (EMPTY folds nothing anywhere)
    left_out = set(PassPipeline.DEFAULT.passes) - set(pipeline.passes)
    backend = [p for p in BACKEND_MLPROGRAM_PASSES if p not in left_out]
    return list(main_passes) + backend, options


def _pipeline_length(pass_pipeline: Any, compute_precision: Any) -> int:
    return len(_pipeline_passes(pass_pipeline, compute_precision)[0])


# The passes that leave add_fp16_cast's casts as they are (they neither read nor fold a cast of a
# non-constant var)
_CAST_NEUTRAL_PASSES = {
    "common::add_int16_cast", "common::update_output_dtypes", "common::guard_negative_gather_indices",
    "common::const_elimination", "common::dead_code_elimination",
}


def _cast_optimization_follows(passes: List[str], i: int) -> bool:
    """Whether common::cast_optimization runs after pass `i` with only cast-neutral passes before it."""
    for name in passes[i + 1:]:
        if name == "common::cast_optimization":
            return True
        if name not in _CAST_NEUTRAL_PASSES:
            return False
    return False


def _run_pipeline(model: Any, pass_pipeline: Any, compute_precision: Any, outputs: Any = None,
                  bar: Any = None) -> Tuple[List[str], List[Tuple[str, float]]]:
    """Runs convert's passes on `model` in place; returns (skipped passes, per-pass seconds)."""
    all_passes, options = _pipeline_passes(pass_pipeline, compute_precision)
    skipped: list = []
    times: list = []
    for i, name in enumerate(all_passes):  # one at a time, so the bar ticks per pass
        t0 = time.perf_counter()
        if name == "common::update_output_dtypes" and outputs:
            _update_output_dtypes(model, outputs)
        opts = dict(options[name]) if name in options else None
        if name == "common::add_fp16_cast" and _cast_optimization_follows(all_passes, i):
            # its fp32 casts that cast_optimization would take back are not made
            opts = {**(opts or {}), "_cast_optimization_follows": "1"}
        skipped += _core.run_passes(model, [name], {name: opts} if opts is not None else {}, False, True)
        times.append((name, time.perf_counter() - t0))
        if bar is not None:
            bar.update(1, name.split("::")[-1])
    return skipped, times


def _run_pipeline_only(model: Any, minimum_deployment_target: Any, compute_precision: Any,
                       pass_pipeline: Any = None) -> List[str]:
    """convert's passes without writing a package (the ONNX backend runs the result in memory)."""
    if compute_precision is None:
        compute_precision = ComputePrecision.FLOAT16
    return _run_pipeline(model, pass_pipeline, compute_precision)[0]

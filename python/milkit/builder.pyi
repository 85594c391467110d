"""Type stubs for milkit.builder, generated from the op registry by milkit._stubgen."""

from typing import Any, Callable, ContextManager, Sequence

from .program import Function, Operation, Program, Var

_Value = Any  # a Var, or a Python / numpy value turned into an implicit const

class Placeholder:
    sym_shape: list
    dtype: Any
    name: str | None
    def __init__(self, sym_shape: Sequence[Any], dtype: Any = ..., name: str | None = ...,
                 allow_rank0_input: bool = ...) -> None: ...

class StateTensorPlaceholder(Placeholder): ...

def TensorSpec(shape: Sequence[Any], dtype: Any = ...) -> Placeholder: ...
def StateTensorSpec(shape: Sequence[Any], dtype: Any = ...) -> StateTensorPlaceholder: ...

class Builder:
    @staticmethod
    def TensorSpec(shape: Sequence[Any], dtype: Any = ...) -> Placeholder: ...
    @staticmethod
    def StateTensorSpec(shape: Sequence[Any], dtype: Any = ...) -> StateTensorPlaceholder: ...
    @staticmethod
    def placeholder(shape: Sequence[Any], dtype: Any = ..., allow_rank0_input: bool = ...,
                    name: str | None = ...) -> Placeholder: ...
    @staticmethod
    def program(input_specs: Sequence[Placeholder] | None = ..., opset_version: Any = ...,
                function_name: str = ...) -> Callable[[Callable[..., Any]], Program]: ...
    @staticmethod
    def function(input_specs: Sequence[Placeholder] | None = ...,
                 opset_version: Any = ...) -> Callable[[Callable[..., Any]], Function]: ...
    @staticmethod
    def set_before_op(before_op: Operation) -> ContextManager[None]: ...
    @staticmethod
    def scope(*scopes: Any) -> ContextManager[None]: ...
    @staticmethod
    def const(val: Any, name: str | None = ..., before_op: Operation | None = ...) -> Var: ...
    @staticmethod
    def _const_symbolic(*, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """"""
    @staticmethod
    def abs(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def acos(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def add(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def affine(x: _Value, transform_matrix: _Value, output_height: _Value, output_width: _Value, sampling_mode: _Value, padding_mode: _Value, padding_value: _Value, coordinates_mode: _Value, align_corners: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; transform_matrix: tensor of {fp16, fp32}; output_height: tensor of {int32} (const); output_width: tensor of {int32} (const); sampling_mode: tensor of {string} (const); padding_mode: tensor of {string} (const); padding_value: tensor of {fp16, fp32} (const); coordinates_mode: tensor of {string} (const); align_corners: tensor of {bool} (const)"""
    @staticmethod
    def argsort(x: _Value, axis: _Value = ..., ascending: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; axis: tensor of {int32} (const, optional); ascending: tensor of {bool} (const, optional)"""
    @staticmethod
    def asin(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def atan(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def atanh(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def avg_pool(x: _Value, kernel_sizes: _Value, strides: _Value = ..., *, pad_type: _Value, pad: _Value = ..., ceil_mode: _Value = ..., exclude_padding_from_average: _Value = ..., name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; kernel_sizes: tensor of {int32} (const); strides: tensor of {int32} (const, optional); pad_type: tensor of {string} (const); pad: tensor of {int32} (const, optional); ceil_mode: tensor of {bool} (const, optional); exclude_padding_from_average: tensor of {bool} (const, optional)"""
    @staticmethod
    def band_part(x: _Value, lower: _Value = ..., upper: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int32}; lower: tensor of {int32} (const, optional); upper: tensor of {int32} (const, optional)"""
    @staticmethod
    def batch_norm(x: _Value, mean: _Value, variance: _Value, gamma: _Value = ..., beta: _Value = ..., epsilon: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; mean: tensor of {fp16, fp32} (const); variance: tensor of {fp16, fp32} (const); gamma: tensor of {fp16, fp32} (const, optional); beta: tensor of {fp16, fp32} (const, optional); epsilon: tensor of {fp16, fp32} (const, optional)"""
    @staticmethod
    def batch_to_space(x: _Value, block_shape: _Value, crops: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; block_shape: tensor of {int32} (const); crops: tensor of {int32} (const)"""
    @staticmethod
    def cast(x: _Value, dtype: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}; dtype: tensor of {string} (const)"""
    @staticmethod
    def ceil(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def clamped_relu(x: _Value, alpha: _Value, beta: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; alpha: tensor of {fp16, fp32} (const); beta: tensor of {fp16, fp32} (const)"""
    @staticmethod
    def classify(probabilities: _Value, classes: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """probabilities: tensor of {fp32}; classes: list of {string, int64} (const)"""
    @staticmethod
    def clip(x: _Value, alpha: _Value, beta: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; alpha: tensor of {fp16, fp32} (const); beta: tensor of {fp16, fp32} (const)"""
    @staticmethod
    def complex(real_data: _Value, imag_data: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """real_data: tensor of {fp32}; imag_data: tensor of {fp32}"""
    @staticmethod
    def complex_abs(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {complex64}"""
    @staticmethod
    def complex_fft(data: _Value, n: _Value = ..., dim: _Value = ..., norm: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data: tensor of {fp32, complex64}; n: tensor of {int32} (const, optional); dim: tensor of {int32} (const, optional); norm: tensor of {string} (const, optional)"""
    @staticmethod
    def complex_fftn(data: _Value, shapes: _Value = ..., dims: _Value = ..., norm: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data: tensor of {fp32, complex64}; shapes: tensor of {int32} (const, optional); dims: tensor of {int32} (const, optional); norm: tensor of {string} (const, optional)"""
    @staticmethod
    def complex_ifft(data: _Value, n: _Value = ..., dim: _Value = ..., norm: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data: tensor of {complex64}; n: tensor of {int32} (const, optional); dim: tensor of {int32} (const, optional); norm: tensor of {string} (const, optional)"""
    @staticmethod
    def complex_ifftn(data: _Value, shapes: _Value = ..., dims: _Value = ..., norm: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data: tensor of {complex64}; shapes: tensor of {int32} (const, optional); dims: tensor of {int32} (const, optional); norm: tensor of {string} (const, optional)"""
    @staticmethod
    def complex_imag(data: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data: tensor of {complex64}"""
    @staticmethod
    def complex_irfft(data: _Value, n: _Value = ..., dim: _Value = ..., norm: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data: tensor of {complex64}; n: tensor of {int32} (const, optional); dim: tensor of {int32} (const, optional); norm: tensor of {string} (const, optional)"""
    @staticmethod
    def complex_irfftn(data: _Value, shapes: _Value = ..., dims: _Value = ..., norm: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data: tensor of {complex64}; shapes: tensor of {int32} (const, optional); dims: tensor of {int32} (const, optional); norm: tensor of {string} (const, optional)"""
    @staticmethod
    def complex_real(data: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data: tensor of {complex64}"""
    @staticmethod
    def complex_rfft(data: _Value, n: _Value = ..., dim: _Value = ..., norm: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data: tensor of {fp32}; n: tensor of {int32} (const, optional); dim: tensor of {int32} (const, optional); norm: tensor of {string} (const, optional)"""
    @staticmethod
    def complex_rfftn(data: _Value, shapes: _Value = ..., dims: _Value = ..., norm: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data: tensor of {fp32}; shapes: tensor of {int32} (const, optional); dims: tensor of {int32} (const, optional); norm: tensor of {string} (const, optional)"""
    @staticmethod
    def complex_shape(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {complex64}"""
    @staticmethod
    def complex_stft(input: _Value, n_fft: _Value, hop_length: _Value = ..., win_length: _Value = ..., window: _Value = ..., normalized: _Value = ..., onesided: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """input: tensor of {fp32, complex64}; n_fft: tensor of {int32} (const); hop_length: tensor of {int32} (const, optional); win_length: tensor of {int32} (const, optional); window: tensor of {fp32} (const, optional); normalized: tensor of {bool} (const, optional); onesided: tensor of {bool} (const, optional)"""
    @staticmethod
    def concat(values: Sequence[_Value], axis: _Value, interleave: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """values: tuple of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}; axis: tensor of {int32} (const); interleave: tensor of {bool} (const, optional)"""
    @staticmethod
    def cond(pred: _Value, *, _true_fn: Callable[[], Any], _false_fn: Callable[[], Any], name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """pred: tensor of {bool}"""
    @staticmethod
    def constexpr_affine_dequantize(quantized_data: _Value, zero_point: _Value, scale: _Value, axis: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """quantized_data: tensor of {int8, uint8} (const); zero_point: tensor of {fp32, int8, uint8} (const); scale: tensor of {fp16, fp32} (const); axis: tensor of {int32} (const)"""
    @staticmethod
    def constexpr_blockwise_shift_scale(data: _Value, scale: _Value, offset: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data: tensor of {fp16, fp32, int8, int4, uint8, uint4} (const); scale: tensor of {fp16, fp32} (const); offset: tensor of {fp16, fp32, int8, int4, uint8, uint4} (const, optional)"""
    @staticmethod
    def constexpr_cast(source_val: _Value, output_dtype: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """source_val: tensor of {fp16} (const); output_dtype: tensor of {string} (const)"""
    @staticmethod
    def constexpr_lut_to_dense(indices: _Value, lut: _Value, vector_axis: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """indices: tensor of {uint8, uint4, uint2, uint1, uint6, uint3} (const); lut: tensor of {fp16, fp32, int8, uint8} (const); vector_axis: tensor of {int32} (const, optional)"""
    @staticmethod
    def constexpr_lut_to_sparse(indices_mask: _Value, indices_nonzero_data: _Value, lut: _Value, vector_axis: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """indices_mask: tensor of {uint1} (const); indices_nonzero_data: tensor of {uint8, uint4, uint2, uint1, uint6, uint3} (const); lut: tensor of {fp16, fp32, int8, uint8} (const); vector_axis: tensor of {int32} (const, optional)"""
    @staticmethod
    def constexpr_sparse_blockwise_shift_scale(data_mask: _Value, nonzero_data: _Value, scale: _Value, offset: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data_mask: tensor of {uint1} (const); nonzero_data: tensor of {fp16, fp32, int8, int4, uint8, uint4} (const); scale: tensor of {fp16, fp32} (const); offset: tensor of {fp16, fp32, int8, int4, uint8, uint4} (const, optional)"""
    @staticmethod
    def constexpr_sparse_to_dense(nonzero_data: _Value, mask: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """nonzero_data: tensor of {fp16, fp32, int8, int4, uint8, uint4} (const); mask: tensor of {uint1} (const)"""
    @staticmethod
    def conv(x: _Value, weight: _Value, bias: _Value = ..., strides: _Value = ..., pad_type: _Value = ..., pad: _Value = ..., dilations: _Value = ..., groups: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; weight: tensor of {fp16, fp32}; bias: tensor of {fp16, fp32} (optional); strides: tensor of {int32} (const, optional); pad_type: tensor of {string} (const, optional); pad: tensor of {int32} (const, optional); dilations: tensor of {int32} (const, optional); groups: tensor of {int32} (const, optional)"""
    @staticmethod
    def conv_quantized(x: _Value, weight: _Value, bias: _Value = ..., *, quantization_type: _Value, quant_scale: _Value, quant_bias: _Value, strides: _Value = ..., pad_type: _Value = ..., pad: _Value = ..., dilations: _Value = ..., groups: _Value = ..., nbits: _Value = ..., name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; weight: tensor of {uint8}; bias: tensor of {uint8} (const, optional); quantization_type: tensor of {string} (const); quant_scale: tensor of {fp16, fp32} (const); quant_bias: tensor of {fp16, fp32} (const); strides: tensor of {int32} (const, optional); pad_type: tensor of {string} (const, optional); pad: tensor of {int32} (const, optional); dilations: tensor of {int32} (const, optional); groups: tensor of {int32} (const, optional); nbits: tensor of {int32} (const, optional)"""
    @staticmethod
    def conv_transpose(x: _Value, weight: _Value, bias: _Value = ..., pad: _Value = ..., output_shape: _Value = ..., pad_type: _Value = ..., strides: _Value = ..., dilations: _Value = ..., groups: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; weight: tensor of {fp16, fp32}; bias: tensor of {fp16, fp32} (optional); pad: tensor of {int32} (const, optional); output_shape: tensor of {int32} (const, optional); pad_type: tensor of {string} (const, optional); strides: tensor of {int32} (const, optional); dilations: tensor of {int32} (const, optional); groups: tensor of {int32} (const, optional)"""
    @staticmethod
    def coreml_update_state(state: _Value, value: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """state: state of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}; value: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}"""
    @staticmethod
    def cos(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def cosh(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def crop(x: _Value, crop_height: _Value, crop_width: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; crop_height: tensor of {int32} (const); crop_width: tensor of {int32} (const)"""
    @staticmethod
    def crop_resize(x: _Value, boxes: _Value, box_indices: _Value = ..., target_height: _Value = ..., target_width: _Value = ..., normalized_coordinates: _Value = ..., spatial_scale: _Value = ..., box_coordinate_mode: _Value = ..., sampling_mode: _Value = ..., pad_value: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; boxes: tensor of {fp16, fp32, uint16}; box_indices: tensor of {int32, uint16} (optional); target_height: tensor of {int32} (const, optional); target_width: tensor of {int32} (const, optional); normalized_coordinates: tensor of {bool} (const, optional); spatial_scale: tensor of {fp32} (const, optional); box_coordinate_mode: tensor of {string} (const, optional); sampling_mode: tensor of {string} (const, optional); pad_value: tensor of {fp16, fp32} (const, optional)"""
    @staticmethod
    def cumsum(x: _Value, axis: _Value = ..., exclusive: _Value = ..., reverse: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; axis: tensor of {int32} (const, optional); exclusive: tensor of {bool} (const, optional); reverse: tensor of {bool} (const, optional)"""
    @staticmethod
    def depth_to_space(x: _Value, block_size: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; block_size: tensor of {int32} (const)"""
    @staticmethod
    def dequantize(input: _Value, zero_point: _Value = ..., *, scale: _Value, axis: _Value = ..., name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """input: tensor of {int8, uint8}; zero_point: tensor of {int8, uint8} (const, optional); scale: tensor of {fp16, fp32} (const); axis: tensor of {int32} (const, optional)"""
    @staticmethod
    def einsum(values: Sequence[_Value], equation: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """values: tuple of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}; equation: tensor of {string} (const)"""
    @staticmethod
    def elu(x: _Value, alpha: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; alpha: tensor of {fp16, fp32} (const)"""
    @staticmethod
    def equal(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def erf(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def exp(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def exp2(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def expand_dims(x: _Value, axes: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}; axes: tensor of {int32} (const)"""
    @staticmethod
    def fill(shape: _Value, value: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """shape: tensor of {int32}; value: tensor of {bool, fp16, fp32, int32} (const, optional)"""
    @staticmethod
    def fill_like(ref_tensor: _Value, value: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """ref_tensor: tensor of {bool, fp16, fp32, int32}; value: tensor of {bool, fp16, fp32, int32} (const, optional)"""
    @staticmethod
    def flatten2d(x: _Value, axis: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int32}; axis: tensor of {int32} (const, optional)"""
    @staticmethod
    def floor(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def floor_div(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def gather(x: _Value, indices: _Value, axis: _Value = ..., batch_dims: _Value = ..., validate_indices: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int8, int16, int32, uint8, uint16}; indices: tensor of {int8, int16, int32, uint8, uint16}; axis: tensor of {int32} (const, optional); batch_dims: tensor of {int32} (const, optional); validate_indices: tensor of {bool} (const, optional)"""
    @staticmethod
    def gather_along_axis(x: _Value, indices: _Value, axis: _Value = ..., validate_indices: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int8, int16, int32, uint8, uint16}; indices: tensor of {int8, int16, int32, uint8, uint16}; axis: tensor of {int32} (const, optional); validate_indices: tensor of {bool} (const, optional)"""
    @staticmethod
    def gather_nd(x: _Value, indices: _Value, batch_dims: _Value = ..., validate_indices: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int8, int16, int32, uint8, uint16}; indices: tensor of {int8, int16, int32, uint8, uint16}; batch_dims: tensor of {int32} (const, optional); validate_indices: tensor of {bool} (const, optional)"""
    @staticmethod
    def gelu(x: _Value, mode: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; mode: tensor of {string} (const, optional)"""
    @staticmethod
    def greater(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def greater_equal(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def gru(x: _Value, initial_h: _Value, weight_ih: _Value, weight_hh: _Value, bias: _Value = ..., direction: _Value = ..., output_sequence: _Value = ..., recurrent_activation: _Value = ..., activation: _Value = ..., reset_after: _Value = ..., input_bias: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; initial_h: tensor of {fp16, fp32}; weight_ih: tensor of {fp16, fp32} (const); weight_hh: tensor of {fp16, fp32} (const); bias: tensor of {fp16, fp32} (const, optional); direction: tensor of {string} (const, optional); output_sequence: tensor of {bool} (const, optional); recurrent_activation: tensor of {string} (const, optional); activation: tensor of {string} (const, optional); reset_after: tensor of {bool} (const, optional); input_bias: tensor of {fp16, fp32} (const, optional)"""
    @staticmethod
    def identity(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: list_or_tensor of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}"""
    @staticmethod
    def instance_norm(x: _Value, gamma: _Value = ..., beta: _Value = ..., epsilon: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; gamma: tensor of {fp16, fp32} (const, optional); beta: tensor of {fp16, fp32} (const, optional); epsilon: tensor of {fp16, fp32} (const, optional)"""
    @staticmethod
    def inverse(x: _Value, epsilon: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; epsilon: tensor of {fp16, fp32} (const, optional)"""
    @staticmethod
    def l2_norm(x: _Value, epsilon: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; epsilon: tensor of {fp16, fp32} (const, optional)"""
    @staticmethod
    def l2_pool(x: _Value, kernel_sizes: _Value, strides: _Value = ..., *, pad_type: _Value, pad: _Value = ..., ceil_mode: _Value = ..., name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; kernel_sizes: tensor of {int32} (const); strides: tensor of {int32} (const, optional); pad_type: tensor of {string} (const); pad: tensor of {int32} (const, optional); ceil_mode: tensor of {bool} (const, optional)"""
    @staticmethod
    def layer_norm(x: _Value, axes: _Value = ..., gamma: _Value = ..., beta: _Value = ..., epsilon: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; axes: tensor of {int32} (const, optional); gamma: tensor of {fp16, fp32} (const, optional); beta: tensor of {fp16, fp32} (const, optional); epsilon: tensor of {fp16, fp32} (const, optional)"""
    @staticmethod
    def leaky_relu(x: _Value, alpha: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; alpha: tensor of {fp16, fp32} (const)"""
    @staticmethod
    def less(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def less_equal(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def linear(x: _Value, weight: _Value, bias: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; weight: tensor of {fp16, fp32, int32} (const); bias: tensor of {fp16, fp32, int32} (const, optional)"""
    @staticmethod
    def linear_activation(x: _Value, alpha: _Value, beta: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; alpha: tensor of {fp16, fp32} (const); beta: tensor of {fp16, fp32} (const)"""
    @staticmethod
    def list_gather(ls: _Value, indices: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """ls: list of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}; indices: tensor of {int32}"""
    @staticmethod
    def list_length(ls: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """ls: list of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}"""
    @staticmethod
    def list_read(ls: _Value, index: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """ls: list of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}; index: tensor of {int32}"""
    @staticmethod
    def list_scatter(ls: _Value, indices: _Value, value: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """ls: list of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}; indices: tensor of {int32}; value: tensor of {bool, fp16, fp32, int32}"""
    @staticmethod
    def list_write(ls: _Value, index: _Value, value: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """ls: list of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}; index: tensor of {int32}; value: tensor of {bool, fp16, fp32, int32}"""
    @staticmethod
    def local_response_norm(x: _Value, size: _Value, alpha: _Value = ..., beta: _Value = ..., k: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; size: tensor of {int32} (const); alpha: tensor of {fp16, fp32} (const, optional); beta: tensor of {fp16, fp32} (const, optional); k: tensor of {fp16, fp32} (const, optional)"""
    @staticmethod
    def log(x: _Value, epsilon: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; epsilon: tensor of {fp16, fp32} (const, optional)"""
    @staticmethod
    def logical_and(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool}; y: tensor of {bool}"""
    @staticmethod
    def logical_not(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool}"""
    @staticmethod
    def logical_or(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool}; y: tensor of {bool}"""
    @staticmethod
    def logical_xor(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool}; y: tensor of {bool}"""
    @staticmethod
    def lstm(x: _Value, initial_h: _Value, initial_c: _Value, weight_ih: _Value, weight_hh: _Value, bias: _Value = ..., peephole: _Value = ..., weight_ih_back: _Value = ..., weight_hh_back: _Value = ..., bias_back: _Value = ..., peephole_back: _Value = ..., direction: _Value = ..., output_sequence: _Value = ..., recurrent_activation: _Value = ..., cell_activation: _Value = ..., activation: _Value = ..., clip: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; initial_h: tensor of {fp16, fp32}; initial_c: tensor of {fp16, fp32}; weight_ih: tensor of {fp16, fp32} (const); weight_hh: tensor of {fp16, fp32} (const); bias: tensor of {fp16, fp32} (const, optional); peephole: tensor of {fp16, fp32} (const, optional); weight_ih_back: tensor of {fp16, fp32} (const, optional); weight_hh_back: tensor of {fp16, fp32} (const, optional); bias_back: tensor of {fp16, fp32} (const, optional); peephole_back: tensor of {fp16, fp32} (const, optional); direction: tensor of {string} (const, optional); output_sequence: tensor of {bool} (const, optional); recurrent_activation: tensor of {string} (const, optional); cell_activation: tensor of {string} (const, optional); activation: tensor of {string} (const, optional); clip: tensor of {fp16, fp32} (const, optional)"""
    @staticmethod
    def make_list(init_length: _Value = ..., dynamic_length: _Value = ..., *, elem_shape: Sequence[_Value], dtype: _Value = ..., name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """init_length: tensor of {int32} (optional); dynamic_length: tensor of {bool} (const, optional); elem_shape: tuple of {string, int32}; dtype: tensor of {string} (const, optional)"""
    @staticmethod
    def matmul(x: _Value, y: _Value, transpose_x: _Value = ..., transpose_y: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}; transpose_x: tensor of {bool} (const, optional); transpose_y: tensor of {bool} (const, optional)"""
    @staticmethod
    def max_pool(x: _Value, kernel_sizes: _Value, strides: _Value = ..., *, pad_type: _Value, pad: _Value = ..., ceil_mode: _Value = ..., name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; kernel_sizes: tensor of {int32} (const); strides: tensor of {int32} (const, optional); pad_type: tensor of {string} (const); pad: tensor of {int32} (const, optional); ceil_mode: tensor of {bool} (const, optional)"""
    @staticmethod
    def maximum(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def minimum(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def mod(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def mul(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def non_maximum_suppression(boxes: _Value, scores: _Value, iou_threshold: _Value, max_boxes: _Value, per_class_suppression: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """boxes: tensor of {fp16, fp32}; scores: tensor of {fp16, fp32}; iou_threshold: tensor of {fp16, fp32} (const); max_boxes: tensor of {int32} (const); per_class_suppression: tensor of {bool} (const, optional)"""
    @staticmethod
    def non_zero(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int32}"""
    @staticmethod
    def not_equal(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def one_hot(indices: _Value, one_hot_vector_size: _Value, axis: _Value = ..., on_value: _Value = ..., off_value: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """indices: tensor of {int32}; one_hot_vector_size: tensor of {int32}; axis: tensor of {int32} (const, optional); on_value: tensor of {bool, fp16, fp32, int32} (const, optional); off_value: tensor of {bool, fp16, fp32, int32} (const, optional)"""
    @staticmethod
    def pad(x: _Value, pad: _Value, mode: _Value = ..., constant_val: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; pad: tensor of {int32}; mode: tensor of {string} (const, optional); constant_val: tensor of {fp16, fp32} (const, optional)"""
    @staticmethod
    def pixel_shuffle(x: _Value, upscale_factor: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; upscale_factor: tensor of {int32} (const)"""
    @staticmethod
    def pixel_unshuffle(x: _Value, downscale_factor: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; downscale_factor: tensor of {uint32} (const)"""
    @staticmethod
    def pow(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def prelu(x: _Value, alpha: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; alpha: tensor of {fp16, fp32} (const)"""
    @staticmethod
    def quantize(input: _Value, zero_point: _Value = ..., *, scale: _Value, axis: _Value = ..., output_dtype: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """input: tensor of {fp16, fp32}; zero_point: tensor of {int8, uint8} (const, optional); scale: tensor of {fp16, fp32} (const); axis: tensor of {int32} (const, optional); output_dtype: tensor of {string} (const)"""
    @staticmethod
    def random_bernoulli(shape: _Value, seed: _Value = ..., prob: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """shape: tensor of {int32}; seed: tensor of {int32} (const, optional); prob: tensor of {fp16, fp32} (const, optional)"""
    @staticmethod
    def random_categorical(x: _Value, mode: _Value = ..., size: _Value = ..., seed: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; mode: tensor of {string} (const, optional); size: tensor of {int32} (const, optional); seed: tensor of {int32} (const, optional)"""
    @staticmethod
    def random_normal(shape: _Value, mean: _Value = ..., stddev: _Value = ..., seed: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """shape: tensor of {int32}; mean: tensor of {fp16, fp32} (const, optional); stddev: tensor of {fp16, fp32} (const, optional); seed: tensor of {int32} (const, optional)"""
    @staticmethod
    def random_uniform(shape: _Value, low: _Value = ..., high: _Value = ..., seed: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """shape: tensor of {int32}; low: tensor of {fp16, fp32} (const, optional); high: tensor of {fp16, fp32} (const, optional); seed: tensor of {int32} (const, optional)"""
    @staticmethod
    def range_1d(end: _Value, start: _Value, step: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """end: tensor of {fp16, fp32, int32}; start: tensor of {fp16, fp32, int32}; step: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def read_state(input: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """input: state of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}"""
    @staticmethod
    def real_div(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def reduce_argmax(x: _Value, axis: _Value = ..., keep_dims: _Value = ..., output_dtype: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; axis: tensor of {int32} (const, optional); keep_dims: tensor of {bool} (const, optional); output_dtype: tensor of {string} (const, optional)"""
    @staticmethod
    def reduce_argmin(x: _Value, axis: _Value = ..., keep_dims: _Value = ..., output_dtype: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; axis: tensor of {int32} (const, optional); keep_dims: tensor of {bool} (const, optional); output_dtype: tensor of {string} (const, optional)"""
    @staticmethod
    def reduce_l1_norm(x: _Value, axes: _Value = ..., keep_dims: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; axes: tensor of {int32} (const, optional); keep_dims: tensor of {bool} (const, optional)"""
    @staticmethod
    def reduce_l2_norm(x: _Value, axes: _Value = ..., keep_dims: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; axes: tensor of {int32} (const, optional); keep_dims: tensor of {bool} (const, optional)"""
    @staticmethod
    def reduce_log_sum(x: _Value, axes: _Value = ..., keep_dims: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; axes: tensor of {int32} (const, optional); keep_dims: tensor of {bool} (const, optional)"""
    @staticmethod
    def reduce_log_sum_exp(x: _Value, axes: _Value = ..., keep_dims: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; axes: tensor of {int32} (const, optional); keep_dims: tensor of {bool} (const, optional)"""
    @staticmethod
    def reduce_max(x: _Value, axes: _Value = ..., keep_dims: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; axes: tensor of {int32} (const, optional); keep_dims: tensor of {bool} (const, optional)"""
    @staticmethod
    def reduce_mean(x: _Value, axes: _Value = ..., keep_dims: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; axes: tensor of {int32} (const, optional); keep_dims: tensor of {bool} (const, optional)"""
    @staticmethod
    def reduce_min(x: _Value, axes: _Value = ..., keep_dims: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; axes: tensor of {int32} (const, optional); keep_dims: tensor of {bool} (const, optional)"""
    @staticmethod
    def reduce_prod(x: _Value, axes: _Value = ..., keep_dims: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; axes: tensor of {int32} (const, optional); keep_dims: tensor of {bool} (const, optional)"""
    @staticmethod
    def reduce_sum(x: _Value, axes: _Value = ..., keep_dims: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; axes: tensor of {int32} (const, optional); keep_dims: tensor of {bool} (const, optional)"""
    @staticmethod
    def reduce_sum_square(x: _Value, axes: _Value = ..., keep_dims: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; axes: tensor of {int32} (const, optional); keep_dims: tensor of {bool} (const, optional)"""
    @staticmethod
    def relu(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def relu6(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def resample(x: _Value, coordinates: _Value, sampling_mode: _Value, padding_mode: _Value, padding_value: _Value, coordinates_mode: _Value, align_corners: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; coordinates: tensor of {fp16, fp32, int8, int16, int32, uint8, uint16}; sampling_mode: tensor of {string} (const); padding_mode: tensor of {string} (const); padding_value: tensor of {fp16, fp32} (const); coordinates_mode: tensor of {string} (const); align_corners: tensor of {bool} (const)"""
    @staticmethod
    def reshape(x: _Value, shape: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}; shape: tensor of {int8, int16, int32}"""
    @staticmethod
    def reshape_like(x: _Value, ref_tensors: Sequence[_Value], begins: Sequence[_Value], ends: Sequence[_Value], end_masks: Sequence[_Value], *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}; ref_tensors: tuple of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}; begins: tuple of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}; ends: tuple of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}; end_masks: tuple of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}"""
    @staticmethod
    def resize(x: _Value, shape: _Value, resized_dims: _Value, interpolation_mode: _Value = ..., sampling_mode: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; shape: tensor of {int16, int32, uint16, uint32}; resized_dims: tensor of {uint32} (const); interpolation_mode: tensor of {string} (const, optional); sampling_mode: tensor of {string} (const, optional)"""
    @staticmethod
    def resize_bilinear(x: _Value, target_size_height: _Value = ..., target_size_width: _Value = ..., sampling_mode: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; target_size_height: tensor of {int32} (const, optional); target_size_width: tensor of {int32} (const, optional); sampling_mode: tensor of {string} (const, optional)"""
    @staticmethod
    def resize_nearest_neighbor(x: _Value, target_size_height: _Value, target_size_width: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; target_size_height: tensor of {int32} (const); target_size_width: tensor of {int32} (const)"""
    @staticmethod
    def reverse(x: _Value, axes: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}; axes: tensor of {int32} (const, optional)"""
    @staticmethod
    def reverse_sequence(x: _Value, lengths: _Value, seq_axis: _Value = ..., batch_axis: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}; lengths: tensor of {int8, int16, int32}; seq_axis: tensor of {int32} (const, optional); batch_axis: tensor of {int32} (const, optional)"""
    @staticmethod
    def rnn(x: _Value, initial_h: _Value, weight_ih: _Value, weight_hh: _Value, bias: _Value = ..., direction: _Value = ..., output_sequence: _Value = ..., activation: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; initial_h: tensor of {fp16, fp32}; weight_ih: tensor of {fp16, fp32} (const); weight_hh: tensor of {fp16, fp32} (const); bias: tensor of {fp16, fp32} (const, optional); direction: tensor of {string} (const, optional); output_sequence: tensor of {bool} (const, optional); activation: tensor of {string} (const, optional)"""
    @staticmethod
    def round(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def rsqrt(x: _Value, epsilon: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; epsilon: tensor of {fp16, fp32} (const, optional)"""
    @staticmethod
    def scaled_dot_product_attention(query: _Value, key: _Value, value: _Value, attn_mask: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """query: tensor of {fp16, fp32}; key: tensor of {fp16, fp32}; value: tensor of {fp16, fp32}; attn_mask: tensor of {bool, fp16, fp32} (optional)"""
    @staticmethod
    def scaled_tanh(x: _Value, alpha: _Value, beta: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; alpha: tensor of {fp16, fp32} (const); beta: tensor of {fp16, fp32} (const)"""
    @staticmethod
    def scatter(data: _Value, indices: _Value, updates: _Value, axis: _Value = ..., mode: _Value = ..., validate_indices: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data: tensor of {fp16, fp32, int32}; indices: tensor of {int32}; updates: tensor of {fp16, fp32, int32}; axis: tensor of {int32} (const, optional); mode: tensor of {string} (const, optional); validate_indices: tensor of {bool} (const, optional)"""
    @staticmethod
    def scatter_along_axis(data: _Value, indices: _Value, updates: _Value, axis: _Value = ..., mode: _Value = ..., validate_indices: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data: tensor of {fp16, fp32, int32}; indices: tensor of {int32}; updates: tensor of {fp16, fp32, int32}; axis: tensor of {int32} (const, optional); mode: tensor of {string} (const, optional); validate_indices: tensor of {bool} (const, optional)"""
    @staticmethod
    def scatter_nd(data: _Value, indices: _Value, updates: _Value, mode: _Value = ..., validate_indices: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """data: tensor of {fp16, fp32, int32}; indices: tensor of {int32}; updates: tensor of {fp16, fp32, int32}; mode: tensor of {string} (const, optional); validate_indices: tensor of {bool} (const, optional)"""
    @staticmethod
    def select(cond: _Value, a: _Value, b: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """cond: tensor of {bool}; a: tensor of {bool, fp16, fp32, int32}; b: tensor of {bool, fp16, fp32, int32}"""
    @staticmethod
    def shape(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int32}"""
    @staticmethod
    def sigmoid(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def sigmoid_hard(x: _Value, alpha: _Value, beta: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; alpha: tensor of {fp16, fp32} (const); beta: tensor of {fp16, fp32} (const)"""
    @staticmethod
    def sign(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def silu(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def sin(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def sinh(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def slice_by_index(x: _Value, begin: _Value, end: _Value, stride: _Value = ..., begin_mask: _Value = ..., end_mask: _Value = ..., squeeze_mask: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}; begin: tensor of {int8, int16, int32}; end: tensor of {int8, int16, int32}; stride: tensor of {int8, int16, int32} (const, optional); begin_mask: tensor of {bool} (const, optional); end_mask: tensor of {bool} (const, optional); squeeze_mask: tensor of {bool} (const, optional)"""
    @staticmethod
    def slice_by_size(x: _Value, begin: _Value, size: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}; begin: tensor of {int8, int16, int32}; size: tensor of {int8, int16, int32}"""
    @staticmethod
    def slice_update(x: _Value, update: _Value, begin: _Value, end: _Value, stride: _Value = ..., begin_mask: _Value = ..., end_mask: _Value = ..., squeeze_mask: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}; update: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}; begin: tensor of {int8, int16, int32}; end: tensor of {int8, int16, int32}; stride: tensor of {int8, int16, int32} (const, optional); begin_mask: tensor of {bool} (const, optional); end_mask: tensor of {bool} (const, optional); squeeze_mask: tensor of {bool} (const, optional)"""
    @staticmethod
    def sliding_windows(x: _Value, axis: _Value, size: _Value, stride: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}; axis: tensor of {int32} (const); size: tensor of {int32} (const); stride: tensor of {int32} (const, optional)"""
    @staticmethod
    def softmax(x: _Value, axis: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; axis: tensor of {int32} (const, optional)"""
    @staticmethod
    def softplus(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def softplus_parametric(x: _Value, alpha: _Value, beta: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; alpha: tensor of {fp16, fp32} (const); beta: tensor of {fp16, fp32} (const)"""
    @staticmethod
    def softsign(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def space_to_batch(x: _Value, block_shape: _Value, paddings: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; block_shape: tensor of {int32} (const); paddings: tensor of {int32} (const)"""
    @staticmethod
    def space_to_depth(x: _Value, block_size: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; block_size: tensor of {int32} (const)"""
    @staticmethod
    def split(x: _Value, num_splits: _Value = ..., split_sizes: _Value = ..., *, axis: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int32}; num_splits: tensor of {int32} (const, optional); split_sizes: tensor of {int32} (const, optional); axis: tensor of {int32} (const)"""
    @staticmethod
    def sqrt(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def square(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def squeeze(x: _Value, axes: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}; axes: tensor of {int32} (const, optional)"""
    @staticmethod
    def stack(values: Sequence[_Value], axis: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """values: tuple of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}; axis: tensor of {int32} (const)"""
    @staticmethod
    def sub(x: _Value, y: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def tan(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def tanh(x: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}"""
    @staticmethod
    def threshold(x: _Value, alpha: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; alpha: tensor of {fp16, fp32, int32} (const)"""
    @staticmethod
    def thresholded_relu(x: _Value, alpha: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; alpha: tensor of {fp16, fp32} (const)"""
    @staticmethod
    def tile(x: _Value, reps: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int32}; reps: tensor of {int32}"""
    @staticmethod
    def topk(x: _Value, k: _Value = ..., axis: _Value = ..., ascending: _Value = ..., sort: _Value = ..., return_indices: _Value = ..., output_indices_dtype: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int8, int16, int32, uint8, uint16}; k: tensor of {int8, int16, int32} (const, optional); axis: tensor of {int32} (const, optional); ascending: tensor of {bool} (const, optional); sort: tensor of {bool} (const, optional); return_indices: tensor of {bool} (const, optional); output_indices_dtype: tensor of {string} (const, optional)"""
    @staticmethod
    def transpose(x: _Value, perm: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}; perm: tensor of {int32} (const)"""
    @staticmethod
    def upsample_bilinear(x: _Value, scale_factor_height: _Value = ..., scale_factor_width: _Value = ..., align_corners: _Value = ..., half_pixel_centers: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; scale_factor_height: tensor of {fp32, int32} (const, optional); scale_factor_width: tensor of {fp32, int32} (const, optional); align_corners: tensor of {bool} (const, optional); half_pixel_centers: tensor of {bool} (const, optional)"""
    @staticmethod
    def upsample_nearest_neighbor(x: _Value, scale_factor_height: _Value = ..., scale_factor_width: _Value = ..., *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32}; scale_factor_height: tensor of {fp32, int32} (const, optional); scale_factor_width: tensor of {fp32, int32} (const, optional)"""
    @staticmethod
    def while_loop(loop_vars: Sequence[_Value], *, _cond: Callable[..., Var], _body: Callable[..., Any], name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """loop_vars: tuple of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}"""
    @staticmethod
    def write_state(input: _Value, data: _Value, *, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """input: state of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}; data: tensor of {bool, fp16, fp32, int8, int16, int32, uint8, uint16}"""

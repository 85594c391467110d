// Kernels of quantize and dequantize (iOS17), as numpy computes coremltools' reference
// (optimize/_utils.py quantize_by_scale_and_zp / dequantize_by_scale_and_zp):
// - quantize: q = round_half_even(input / scale) (the division in the input's dtype: fp16 inputs
//   are divided in fp32 and rounded to fp16, as numpy's fp16 division is), + zero_point, clipped to
//   the output type's range, cast (NaN gives 0 as numpy's cast on x86).
// - dequantize: (fp32(input) - fp32(zero_point)) * scale in fp32, rounded to scale's dtype.
// scale and zero_point are scalars or vectors along `axis`.
#include <cmath>

#include "../dispatch.h"
#include "kernels.h"
#include "milkit/exec/threads.h"

namespace milkit {

namespace {

/// For per-axis parameters: the axis's size and the element count after it (inner); a scalar
/// parameter gives n = 1.
struct AxisMap {
  int64_t n = 1, inner = 1;
  int64_t at(int64_t i) const { return n == 1 ? 0 : (i / inner) % n; }
};

AxisMap axis_map(KernelCtx& k, const Tensor& x, const Tensor& scale, const Tensor* zp) {
  AxisMap m;
  if (scale.rank() == 0) {
    if (zp && zp->rank() != 0) k.fail("zero_point must be a scalar when scale is a scalar");
    return m;
  }
  if (scale.rank() != 1) k.fail("scale must be a scalar or a vector, got shape " + shape_str(scale.shape()));
  if (!k.has("axis")) k.fail("axis is required when scale is a vector");
  int64_t a = k.axis(k.int_("axis"), x.rank());
  m.n = x.dim(static_cast<int>(a));
  for (int d = static_cast<int>(a) + 1; d < x.rank(); ++d) m.inner *= x.dim(d);
  if (scale.numel() != m.n)
    k.fail("scale has " + std::to_string(scale.numel()) + " elements, input " + shape_str(x.shape()) + " has " +
           std::to_string(m.n) + " along axis " + std::to_string(a));
  if (zp && (zp->rank() != 1 || zp->numel() != m.n))
    k.fail("zero_point of shape " + shape_str(zp->shape()) + " does not match scale " + shape_str(scale.shape()));
  // a single-element vector on an axis of size 1 reads index 0 either way
  return m;
}

void quantize(KernelCtx& k) {
  const Tensor& x = k.in("input");
  const Tensor& scale = k.in("scale");
  const Tensor* zp = k.has("zero_point") ? &k.in("zero_point") : nullptr;
  if (!is_float(x.dtype()) || scale.dtype() != x.dtype()) k.fail("input and scale must share an fp16 / fp32 dtype");
  AxisMap m = axis_map(k, x, scale, zp);
  DataType od = k.declared_dtype(0);
  if (od != DataType::Int8 && od != DataType::UInt8) k.fail("output dtype must be int8 or uint8");
  if (zp && zp->dtype() != od) k.fail("zero_point must have the output dtype");
  const bool half_in = x.dtype() == DataType::Float16;
  const float lo = static_cast<float>(int_min(od)), hi = static_cast<float>(int_max(od));
  Tensor& out = k.alloc(0, x.shape());
  auto in_at = [&](const Tensor& t, int64_t i) -> float {
    return half_in ? half_to_float(t.data<uint16_t>()[i]) : t.data<float>()[i];
  };
  auto zp_at = [&](int64_t i) -> float {
    if (!zp) return 0.0f;
    return od == DataType::Int8 ? static_cast<float>(zp->data<int8_t>()[i]) : static_cast<float>(zp->data<uint8_t>()[i]);
  };
  parallel_for(x.numel(), 16384, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      int64_t p = m.at(i);
      float d = in_at(x, i) / in_at(scale, p);
      if (half_in) d = half_to_float(float_to_half(d));
      float q = std::nearbyint(d) + zp_at(p);  // nearbyint: half to even in the default mode
      if (half_in) q = half_to_float(float_to_half(q));
      int v = std::isnan(q) ? 0 : static_cast<int>(std::min(std::max(q, lo), hi));
      if (od == DataType::Int8)
        out.mutable_data<int8_t>()[i] = static_cast<int8_t>(v);
      else
        out.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(v);
    }
  });
}

void dequantize(KernelCtx& k) {
  const Tensor& x = k.in("input");
  const Tensor& scale = k.in("scale");
  const Tensor* zp = k.has("zero_point") ? &k.in("zero_point") : nullptr;
  if (x.dtype() != DataType::Int8 && x.dtype() != DataType::UInt8) k.fail("input must be int8 or uint8");
  if (zp && zp->dtype() != x.dtype()) k.fail("zero_point must have the input's dtype");
  if (scale.dtype() != DataType::Float32) k.fail("scale must be fp16 or fp32");
  AxisMap m = axis_map(k, x, scale, zp);
  Tensor& out = k.alloc(0, x.shape());
  float* o = out.mutable_data<float>();
  const float* sc = scale.data<float>();
  const bool s8 = x.dtype() == DataType::Int8;
  auto at = [&](const Tensor& t, int64_t i) -> float {
    return s8 ? static_cast<float>(t.data<int8_t>()[i]) : static_cast<float>(t.data<uint8_t>()[i]);
  };
  parallel_for(x.numel(), 16384, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      int64_t p = m.at(i);
      o[i] = (at(x, i) - (zp ? at(*zp, p) : 0.0f)) * sc[p];
    }
  });
}

}  // namespace

void register_quantization_kernels(KernelRegistry& r) {
  // quantize reads fp16 as it is (numpy divides in fp16); dequantize computes in fp32
  r.add("quantize", {quantize, false});
  r.add("dequantize", {dequantize, true});
}

}  // namespace milkit

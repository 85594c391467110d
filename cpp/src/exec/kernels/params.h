// Elementwise kernels with broadcast parameters (alpha, beta, epsilon): shared by the unary and
// activation families.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "../dispatch.h"
#include "kernels.h"
#include "milkit/exec/threads.h"
#include "milkit/types/datatype.h"
#include "vec_math.h"

namespace milkit::exec {

/// Parameter input `name` as dtype `dt`, checked to broadcast to x's shape.
inline Tensor broadcast_param(KernelCtx& k, const char* name, const Tensor& x, DataType dt) {
  Tensor p = k.in(name);
  if (p.dtype() != dt) p = cast_tensor(p, dt);
  std::vector<int64_t> b;
  try {
    b = broadcast_shape(x.shape(), p.shape());
  } catch (const ValueError& e) {
    k.fail(std::string(name) + ": " + e.what());
  }
  if (b != x.shape())
    k.fail(std::string(name) + " of shape " + shape_str(p.shape()) + " does not broadcast to x's shape " +
           shape_str(x.shape()));
  return p;
}

/// Runs out[i] = f(x[i], p[i], q[i]) with p, q broadcast to x's shape (q may be undefined: f then
/// gets T() for it). Scalar parameters take a contiguous (vectorized for fp32) loop.
template <typename T, typename F>
void map_params(KernelCtx& k, const Tensor& x, const Tensor& p, const Tensor& q, F f, int64_t grain) {
  Tensor& out = k.alloc(0, x.shape());
  const T* a = x.data<T>();
  const T* pb = p.data<T>();
  const T* qb = q.defined() ? q.data<T>() : nullptr;
  T* o = out.mutable_data<T>();
  int64_t n = x.numel();
  if (p.numel() == 1 && (!qb || q.numel() == 1)) {
    T pv = pb[0], qv = qb ? qb[0] : T();
    const bool half = std::is_same_v<T, float> && k.rounds_output();
    parallel_for(n, grain, [&](int64_t s, int64_t e) {
      if constexpr (std::is_same_v<T, float>) {
        vmath::map(a + s, o + s, e - s, [f, pv, qv](float v) { return f(v, pv, qv); });
        if (half) round_to_half(o + s, e - s);  // fp16's values, while in cache
      } else {
        for (int64_t i = s; i < e; ++i) o[i] = f(a[i], pv, qv);
      }
    });
    if (half) k.set_rounded();
    return;
  }
  std::vector<std::vector<int64_t>> shapes = {x.shape(), p.shape()};
  if (qb) shapes.push_back(q.shape());
  BroadcastIndexer bi(x.shape(), shapes);
  parallel_for(n, grain, [&](int64_t s, int64_t e) {
    bi.run(s, e, [&](int64_t i, int64_t, int64_t ip, int64_t iq) { o[i] = f(a[i], pb[ip], qb ? qb[iq] : T()); });
  });
}

}  // namespace milkit::exec

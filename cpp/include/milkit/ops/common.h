// milkit/ops/common.h - helpers shared by op families: broadcasting, shape checks, folding.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "milkit/ops/registry.h"

namespace milkit::ops {

/// Broadcasts two shapes (right-aligned). Per dim: equal -> keep; 1 -> the other; a known
/// integer > 1 against a symbol -> the integer (as coremltools does); two different symbols ->
/// the one provably > 1, else max(a, b) (exact under broadcasting rules). Two different known
/// integers fail with a message naming the dim index and both shapes.
std::vector<Dim> broadcast_shapes(const InferCtx& ic, const std::vector<Dim>& a,
                                  const std::vector<Dim>& b, std::string_view an = "x",
                                  std::string_view bn = "y");

/// The tensor type of `t`'s shape with another dtype.
const Type* with_dtype(Context& ctx, const Type* t, DataType dt);

/// "(1, S, 64)" for messages.
std::string shape_str(const std::vector<Dim>& s);

/// Requires a tensor with known rank; returns its shape.
const std::vector<Dim>& ranked_shape(const InferCtx& ic, std::string_view input);

/// A shared value.
inline std::shared_ptr<const Value> share(Value v) {
  return std::make_shared<const Value>(std::move(v));
}

/// Broadcast shapes of two concrete values (numpy rules); throws ValueError.
std::vector<int64_t> broadcast_concrete(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

/// Element-wise binary fold over two known values with numpy broadcasting. Floats are computed
/// in double and rounded to `out`; integer dtypes use `fi` on int64.
Value fold_binary(const Value& a, const Value& b, DataType out,
                  const std::function<double(double, double)>& ff,
                  const std::function<int64_t(int64_t, int64_t)>& fi);

/// Element-wise unary fold.
Value fold_unary(const Value& a, DataType out, const std::function<double(double)>& ff,
                 const std::function<int64_t(int64_t)>& fi = nullptr);

/// Strides of a row-major shape.
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape);

/// Concrete ints of a value shape from a type (all dims known), or nullopt.
std::optional<std::vector<int64_t>> static_shape(const Type* t);

// ---- appended by the tensor_transformation / scatter_gather family ---------------------------

/// Calls `src_of` for every coordinate of `out_shape` (row-major) and collects the returned
/// flat source indices: the index map of a data-movement op (transpose, slice, gather, ...).
std::vector<int64_t> index_map(const std::vector<int64_t>& out_shape,
                               const std::function<int64_t(const std::vector<int64_t>&)>& src_of);

/// The value whose element k is element idx[k] of `v`, with shape `shape`. Works for numeric,
/// string and symbolic values (symbolic elements are moved as dims).
Value take_elements(const Value& v, const std::vector<int64_t>& idx, std::vector<int64_t> shape);

}  // namespace milkit::ops

namespace milkit::ops {

/// For each element of a tensor of shape `out` (row-major), the flat index of the element of a
/// tensor of shape `in` that numpy broadcasting maps to it (`in` must broadcast to `out`).
/// Added for select / tensor_operation value inference.
std::vector<int64_t> broadcast_index(const std::vector<int64_t>& in, const std::vector<int64_t>& out);

/// Rounds `v` to the precision of float dtype `dt` (numpy computing one step in that dtype).
double rnd(DataType dt, double v);
/// numpy's maximum: NaN propagates.
double np_max(double a, double b);
/// numpy's minimum: NaN propagates.
double np_min(double a, double b);

}  // namespace milkit::ops

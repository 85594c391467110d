// milkit/compose/emitter.h - the small op-building vocabulary shared by every composition.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/ir/value.h"

namespace milkit {
namespace compose {

/// Wraps a Builder with the helpers every composition uses: op creation, constants, the one
/// cast policy (small known values are folded into a const), shape queries and axis handling.
/// Failures throw ValueError with a plain message a caller can prefix with its node's name.
class Emitter {
 public:
  /// An emitter creating ops with `b` (at its insertion point).
  explicit Emitter(Builder& b) : b_(b) {}
  /// The builder ops go to.
  Builder& builder() const { return b_; }

  /// A single-output op.
  Var* op(std::string_view type, std::vector<Arg> args);
  /// An op with several outputs.
  std::vector<Var*> ops(std::string_view type, std::vector<Arg> args);
  /// A const var holding `v`.
  Var* c(Value v);
  /// A rank-1 int32 const.
  Var* ci(const std::vector<int64_t>& v) { return c(Value::int_list(v)); }
  /// A scalar const of dtype `dt` (floats, bool as v != 0, ints truncated).
  Var* cs(double v, DataType dt);
  /// A scalar fp32 const.
  Var* f32(double v) { return cs(v, DataType::Float32); }
  /// `x` as dtype `dt`: unchanged when it already is; a known, non-symbolic value of at most 16
  /// elements is converted at import time into a const; otherwise a cast op.
  Var* cast(Var* x, DataType dt);
  /// The binary elementwise op `type` of x and y.
  Var* bin(std::string_view type, Var* x, Var* y);
  /// The unary op `type` of x.
  Var* un(std::string_view type, Var* x);
  /// select(cond, a, b).
  Var* sel(Var* cond, Var* a, Var* b);
  /// reshape to a static shape.
  Var* reshape(Var* x, const std::vector<int64_t>& shape);
  /// transpose by `perm`.
  Var* transpose(Var* x, const std::vector<int64_t>& perm);
  /// expand_dims at `axes`.
  Var* expand_dims(Var* x, const std::vector<int64_t>& axes);
  /// squeeze `axes`.
  Var* squeeze(Var* x, const std::vector<int64_t>& axes);
  /// concat of `xs` along `axis` (a single var is returned as is).
  Var* concat(const std::vector<Var*>& xs, int64_t axis);
  /// stack of `xs` along a new `axis`.
  Var* stack(const std::vector<Var*>& xs, int64_t axis);
  /// x[begin:end] along `axis` (other axes whole).
  Var* slice_axis(Var* x, int64_t axis, int64_t begin, int64_t end);
  /// For each listed axis, `count` entries from `begin` every `step`; other axes whole.
  Var* strided(Var* x, const std::vector<int64_t>& axes, const std::vector<int64_t>& begin,
               const std::vector<int64_t>& count, const std::vector<int64_t>& step);
  /// x moved `k` places later along `axis` (known length), the first k entries `fill`: floats by
  /// a constant pad, integers (exactly) by concatenating x[:k] * 0 + fill in front.
  Var* shift(Var* x, int64_t axis, int64_t k, double fill);
  /// Pads the last lo.size() axes of x by (lo[i], hi[i]) with the constant `val` (x itself when
  /// no pad is needed).
  Var* pad_trailing(Var* x, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
                    double val);
  /// A rank-1 per-channel vector reshaped to broadcast over [N, C, spatial...] of rank `rank`.
  Var* per_channel(Var* v, int rank);

  /// A var's dtype.
  static DataType dtype(Var* v) { return v->type()->dtype(); }
  /// A var's rank; ValueError when it is not known.
  static int rank(Var* v);
  /// The shape as integers when every dim is known.
  static std::optional<std::vector<int64_t>> static_shape(Var* v);
  /// The static shape; ValueError "<what> needs ..." when some dim is not known.
  static std::vector<int64_t> need_static_shape(Var* v, const std::string& what);
  /// A possibly negative axis normalized against `rank`; ValueError when out of range.
  static int64_t axis(int64_t a, int64_t rank);

 private:
  Builder& b_;
};

/// A plain ValueError with `msg` (the caller may prefix it with a node's name).
[[noreturn]] void fail(const std::string& msg);

}  // namespace compose
}  // namespace milkit

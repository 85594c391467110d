#include "milkit/ops/common.h"

#include <cmath>

#include "milkit/types/error.h"

namespace milkit::ops {

std::string shape_str(const std::vector<Dim>& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + s[i]->str();
  if (s.size() == 1) r += ",";
  return r + ")";
}

std::vector<Dim> broadcast_shapes(const InferCtx& ic, const std::vector<Dim>& a,
                                  const std::vector<Dim>& b, std::string_view an,
                                  std::string_view bn) {
  if (b.empty()) return a;  // a rank-0 operand broadcasts to the other's shape as it is
  if (a.empty()) return b;
  Context& ctx = ic.ctx;
  size_t n = std::max(a.size(), b.size());
  std::vector<Dim> r(n);
  Dim one = ctx.constant(1);
  for (size_t i = 0; i < n; ++i) {
    Dim x = i + a.size() >= n ? a[i + a.size() - n] : one;
    Dim y = i + b.size() >= n ? b[i + b.size() - n] : one;
    if (x == y) {
      r[i] = x;
    } else if (x == one) {
      r[i] = y;
    } else if (y == one) {
      r[i] = x;
    } else if (x->is_const() && y->is_const()) {
      ic.fail("cannot broadcast " + std::string(an) + " with shape " + shape_str(a) + " and " +
              std::string(bn) + " with shape " + shape_str(b) + ": dim " + std::to_string(i) +
              " of the result is " + x->str() + " vs " + y->str() + " and neither is 1");
    } else if (y->is_const()) {
      r[i] = y;
    } else if (x->is_const()) {
      r[i] = x;
    } else {
      // two different symbolic dims: each is either 1 or equal to the other
      Interval rx = ctx.range(x), ry = ctx.range(y);
      if (rx.lo > 1) r[i] = x;
      else if (ry.lo > 1) r[i] = y;
      else r[i] = ctx.max(x, y);
    }
  }
  return r;
}

const Type* with_dtype(Context& ctx, const Type* t, DataType dt) { return ctx.with_dtype(t, dt); }

const std::vector<Dim>& ranked_shape(const InferCtx& ic, std::string_view input) {
  const Type* t = ic.type(input);
  if (!t->is_tensor() || !t->has_rank()) ic.fail_input(input, "must be a tensor of known rank");
  return t->shape();
}

std::vector<int64_t> broadcast_concrete(const std::vector<int64_t>& a,
                                        const std::vector<int64_t>& b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i + a.size() >= n ? a[i + a.size() - n] : 1;
    int64_t y = i + b.size() >= n ? b[i + b.size() - n] : 1;
    if (x != y && x != 1 && y != 1) throw ValueError("values cannot be broadcast together");
    r[i] = x == 1 ? y : x;
  }
  return r;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

namespace {
// Maps each output index to the flat index of a broadcast input.
std::vector<int64_t> bcast_index(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  int64_t n = shape_numel(out);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::vector<int64_t> ist = strides_of(in);
  size_t off = out.size() - in.size();
  std::vector<int64_t> ctr(out.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t f = 0;
    for (size_t d = 0; d < in.size(); ++d)
      if (in[d] != 1) f += ctr[d + off] * ist[d];
    idx[k] = f;
    for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
      if (++ctr[d] < out[d]) break;
      ctr[d] = 0;
    }
  }
  return idx;
}
}  // namespace

Value fold_binary(const Value& a, const Value& b, DataType out,
                  const std::function<double(double, double)>& ff,
                  const std::function<int64_t(int64_t, int64_t)>& fi) {
  std::vector<int64_t> shape = broadcast_concrete(a.shape(), b.shape());
  auto ia = bcast_index(a.shape(), shape), ib = bcast_index(b.shape(), shape);
  bool int_math = fi && !is_float(a.dtype()) && !is_float(b.dtype());
  if (int_math) {
    std::vector<int64_t> r(ia.size());
    for (size_t k = 0; k < ia.size(); ++k) r[k] = fi(a.as_int(ia[k]), b.as_int(ib[k]));
    return Value::from_ints(out, shape, r);
  }
  std::vector<double> r(ia.size());
  for (size_t k = 0; k < ia.size(); ++k) r[k] = ff(a.as_double(ia[k]), b.as_double(ib[k]));
  return Value::from_doubles(out, shape, r);
}

Value fold_unary(const Value& a, DataType out, const std::function<double(double)>& ff,
                 const std::function<int64_t(int64_t)>& fi) {
  int64_t n = a.numel();
  if (fi && !is_float(a.dtype())) {
    std::vector<int64_t> r(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) r[k] = fi(a.as_int(k));
    return Value::from_ints(out, a.shape(), r);
  }
  std::vector<double> r(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) r[k] = ff(a.as_double(k));
  return Value::from_doubles(out, a.shape(), r);
}

std::optional<std::vector<int64_t>> static_shape(const Type* t) {
  if (!t->is_static()) return std::nullopt;
  std::vector<int64_t> r;
  for (Dim d : t->shape()) r.push_back(d->value());
  return r;
}

// ---- appended by the tensor_transformation / scatter_gather family ---------------------------

std::vector<int64_t> index_map(const std::vector<int64_t>& out_shape,
                               const std::function<int64_t(const std::vector<int64_t>&)>& src_of) {
  int64_t n = shape_numel(out_shape);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::vector<int64_t> ctr(out_shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    idx[k] = src_of(ctr);
    for (int d = static_cast<int>(out_shape.size()) - 1; d >= 0; --d) {
      if (++ctr[d] < out_shape[d]) break;
      ctr[d] = 0;
    }
  }
  return idx;
}

Value take_elements(const Value& v, const std::vector<int64_t>& idx, std::vector<int64_t> shape) {
  if (v.dtype() == DataType::String) {
    std::vector<std::string> s;
    s.reserve(idx.size());
    for (int64_t i : idx) s.push_back(v.string_values()[i]);
    return Value::strings(std::move(shape), std::move(s));
  }
  if (v.is_symbolic()) {
    std::vector<Dim> d;
    d.reserve(idx.size());
    for (int64_t i : idx) d.push_back(v.dims()[i]);
    return Value::from_dims(v.dtype(), std::move(shape), std::move(d));
  }
  size_t w = static_cast<size_t>(dtype_storage_bytes(v.dtype()));
  std::vector<uint8_t> bytes(idx.size() * w);
  const uint8_t* src = v.raw();
  for (size_t k = 0; k < idx.size(); ++k) std::memcpy(bytes.data() + k * w, src + idx[k] * w, w);
  return Value(v.dtype(), std::move(shape), Buffer::take(std::move(bytes)));
}

}  // namespace milkit::ops

namespace milkit::ops {

std::vector<int64_t> broadcast_index(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  return bcast_index(in, out);
}

double rnd(DataType dt, double v) {
  switch (dt) {
    case DataType::Float16: return half_to_float(float_to_half(static_cast<float>(v)));
    case DataType::Float32: return static_cast<double>(static_cast<float>(v));
    default: return v;
  }
}

double np_max(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b); }
double np_min(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::min(a, b); }

}  // namespace milkit::ops

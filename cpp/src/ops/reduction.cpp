// reduction ops: the 12 reductions (coremltools iOS15/reduction.py, iOS17/reduction.py).
//
// reduce_{l1_norm, l2_norm, log_sum, log_sum_exp, max, mean, min, prod, sum, sum_square}:
//   x: T in {fp16, fp32, int32}; axes: optional const int32[K] (None: every axis, not
//   materialized); keep_dims: optional const bool (default False, materialized).
// reduce_argmax / reduce_argmin: x; axis: optional const int32 (default -1); keep_dims; from iOS17
//   output_dtype: optional const string in {int32, uint16} (default "int32").
// All fold when x is known, like coremltools' value_inference (the result is cast to x's dtype,
// so integer means / logs truncate).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

namespace {

// Normalized, range-checked axes of a reduction. coremltools silently wraps an axis in
// [-2*rank, -rank) and reduces twice over a duplicate axis (it pops the same position twice);
// both are invalid per the op definition (axes in [-rank, rank)), so milkit reports them.
std::vector<int64_t> reduction_axes(const InferCtx& ic, std::string_view input,
                                    const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> r;
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      ic.fail_input(input, "= " + std::to_string(a) + " is out of range for x of rank " +
                               std::to_string(rank) + " (valid: [" + std::to_string(-rank) + ", " +
                               std::to_string(rank - 1) + "])");
    int64_t p = a < 0 ? a + rank : a;
    if (std::find(r.begin(), r.end(), p) != r.end())
      ic.fail_input(input, "lists axis " + std::to_string(p) + " more than once");
    r.push_back(p);
  }
  return r;
}

// The reduced shape: reduced axes become 1 (keep_dims) or are removed.
std::vector<Dim> reduced_shape(Context& ctx, const std::vector<Dim>& shape,
                               const std::vector<int64_t>& axes, bool keep_dims) {
  std::vector<Dim> r;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    bool red = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!red) r.push_back(shape[i]);
    else if (keep_dims) r.push_back(ctx.constant(1));
  }
  return r;
}

// For each element of a row-major tensor of `shape`, the flat index of its group (the output
// element it reduces into) when `axes` are reduced. Also returns the group count.
std::vector<int64_t> group_index(const std::vector<int64_t>& shape, const std::vector<int64_t>& axes,
                                 int64_t& n_groups) {
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) kept.push_back(i);
  std::vector<int64_t> kshape;
  for (int64_t k : kept) kshape.push_back(shape[k]);
  std::vector<int64_t> kstr = ops::strides_of(kshape);
  std::vector<int64_t> gstride(shape.size(), 0);
  for (size_t j = 0; j < kept.size(); ++j) gstride[kept[j]] = kstr[j];
  n_groups = shape_numel(kshape);
  int64_t n = shape_numel(shape);
  std::vector<int64_t> g(static_cast<size_t>(n));
  std::vector<int64_t> ctr(shape.size(), 0);
  int64_t cur = 0;
  for (int64_t k = 0; k < n; ++k) {
    g[k] = cur;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++ctr[d] < shape[d]) {
        cur += gstride[d];
        break;
      }
      cur -= gstride[d] * (shape[d] - 1);
      ctr[d] = 0;
    }
  }
  return g;
}

enum class Red { L1, L2, LogSum, LogSumExp, Max, Mean, Min, Prod, Sum, SumSquare };

int64_t wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

// Folds one group of values. Integers follow numpy: sum/prod/abs/square stay integer (square
// and abs wrap at int32), the rest is computed in double and truncated by the final cast.
bool reduce_group(Red op, const std::vector<double>& fv, const std::vector<int64_t>& iv,
                  bool int_math, double& out_d, int64_t& out_i, bool& is_int) {
  size_t n = int_math ? iv.size() : fv.size();
  is_int = false;
  if (int_math) {
    switch (op) {
      case Red::Sum: case Red::Prod: case Red::Max: case Red::Min: case Red::L1:
      case Red::SumSquare: {
        if ((op == Red::Max || op == Red::Min) && n == 0) return false;
        int64_t acc = op == Red::Prod ? 1 : 0;
        if (op == Red::Max) acc = iv[0];
        if (op == Red::Min) acc = iv[0];
        for (int64_t v : iv) {
          switch (op) {
            case Red::Sum: acc = static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v)); break;
            case Red::Prod: acc = static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(v)); break;
            case Red::Max: acc = std::max(acc, v); break;
            case Red::Min: acc = std::min(acc, v); break;
            case Red::L1: acc += wrap32(v < 0 ? -v : v); break;
            default: acc += wrap32(v * v); break;
          }
        }
        out_i = acc;
        is_int = true;
        return true;
      }
      default: break;
    }
  }
  std::vector<double> d = fv;
  if (int_math) {
    d.resize(n);
    for (size_t k = 0; k < n; ++k) d[k] = static_cast<double>(iv[k]);
  }
  auto sq = [&](size_t k) {
    if (int_math) return static_cast<double>(wrap32(iv[k] * iv[k]));
    return d[k] * d[k];
  };
  double acc = 0;
  switch (op) {
    case Red::L1: for (double v : d) acc += std::fabs(v); break;
    case Red::L2: for (size_t k = 0; k < n; ++k) acc += sq(k); acc = std::sqrt(acc); break;
    case Red::SumSquare: for (size_t k = 0; k < n; ++k) acc += sq(k); break;
    case Red::Sum: for (double v : d) acc += v; break;
    case Red::LogSum: for (double v : d) acc += v; acc = std::log(acc); break;
    case Red::Mean:
      for (double v : d) acc += v;
      acc = n ? acc / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
      break;
    case Red::Prod: acc = 1; for (double v : d) acc *= v; break;
    case Red::Max: case Red::Min: case Red::LogSumExp: {
      if (n == 0) return false;
      double m = d[0];
      for (double v : d) {
        if (std::isnan(m)) break;
        if (std::isnan(v) || (op == Red::Min ? v < m : v > m)) m = v;
      }
      if (op != Red::LogSumExp) {
        acc = m;
        break;
      }
      // numpy: max + log(sum(exp(x - max))); the max of an int tensor stays an int
      for (size_t k = 0; k < n; ++k) acc += std::exp(d[k] - m);
      acc = std::log(acc) + m;
      break;
    }
  }
  out_d = acc;
  return true;
}

void add_reduce(OpRegistry& r, const std::string& name, Red op) {
  OpSchema s;
  s.name = name;
  s.inputs = {in("x", dt::numeric(), "T"), in_opt_const("axes", dt::int32()),
              in_opt_const("keep_dims", dt::boolean(), def_bool(false))};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    const Type* tx = ic.type("x");
    bool keep = ic.bool_("keep_dims");
    if (!tx->has_rank()) return {ic.ctx.tensor_unknown_rank(tx->dtype())};
    int64_t rank = tx->rank();
    std::vector<int64_t> axes;
    if (ic.has("axes")) {
      if (ic.val("axes") && ic.val("axes")->rank() != 1)
        ic.fail_input("axes", "must be a rank-1 list of axes, got a value of rank " +
                                  std::to_string(ic.val("axes")->rank()));
      axes = reduction_axes(ic, "axes", ic.ints("axes"), rank);
    } else {
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    }
    return {ic.ctx.tensor(tx->dtype(), reduced_shape(ic.ctx, tx->shape(), axes, keep))};
  };
  s.value = [op](InferCtx& ic, std::vector<std::shared_ptr<const Value>>& out) {
    if (!ic.known("x")) return false;
    const Value& x = *ic.val("x");
    int64_t rank = x.rank();
    std::vector<int64_t> axes;
    if (ic.has("axes")) axes = reduction_axes(ic, "axes", ic.ints("axes"), rank);
    else for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    bool keep = ic.bool_("keep_dims");
    int64_t ng = 0;
    std::vector<int64_t> g = group_index(x.shape(), axes, ng);
    DataType dt = x.dtype();
    bool int_math = !is_float(dt);
    std::vector<std::vector<double>> fv(static_cast<size_t>(ng));
    std::vector<std::vector<int64_t>> iv(static_cast<size_t>(ng));
    for (int64_t k = 0; k < x.numel(); ++k) {
      if (int_math) iv[g[k]].push_back(x.as_int(k));
      else fv[g[k]].push_back(x.as_double(k));
    }
    std::vector<double> rd(static_cast<size_t>(ng));
    std::vector<int64_t> ri(static_cast<size_t>(ng));
    bool any_int = false, any_dbl = false;
    for (int64_t k = 0; k < ng; ++k) {
      bool is_int = false;
      if (!reduce_group(op, fv[k], iv[k], int_math, rd[k], ri[k], is_int)) return false;
      (is_int ? any_int : any_dbl) = true;
    }
    std::vector<int64_t> shape;
    for (int64_t i = 0; i < rank; ++i) {
      bool red = std::find(axes.begin(), axes.end(), i) != axes.end();
      if (!red) shape.push_back(x.shape()[i]);
      else if (keep) shape.push_back(1);
    }
    if (any_int && !any_dbl) out.push_back(ops::share(Value::from_ints(dt, shape, ri)));
    else out.push_back(ops::share(Value::from_doubles(dt, shape, rd)));
    return true;
  };
  r.add(std::move(s));
}

// reduce_argmax / reduce_argmin at one opset (with_dtype: the iOS17 output_dtype input).
void add_reduce_arg(OpRegistry& r, const std::string& name, bool is_max, bool with_dtype) {
  OpSchema s;
  s.name = name;
  s.since = with_dtype ? Target::iOS17 : Target::iOS13;
  s.inputs = {in("x", dt::numeric(), "T"), in_opt_const("axis", dt::int32(), def_int(-1)),
              in_opt_const("keep_dims", dt::boolean(), def_bool(false))};
  if (with_dtype) s.inputs.push_back(in_opt_const("output_dtype", dt::string(), def_str("int32")));
  auto out_dtype = [with_dtype](const InferCtx& ic) {
    if (!with_dtype) return DataType::Int32;
    std::string d = ic.str("output_dtype");
    std::transform(d.begin(), d.end(), d.begin(), [](unsigned char c) { return std::tolower(c); });
    if (d == "int32") return DataType::Int32;
    if (d == "uint16") return DataType::UInt16;
    ic.fail_input("output_dtype", "is \"" + d + "\"; only \"int32\" and \"uint16\" are supported");
  };
  s.infer = [out_dtype](InferCtx& ic) -> std::vector<const Type*> {
    const Type* tx = ic.type("x");
    DataType odt = out_dtype(ic);
    bool keep = ic.bool_("keep_dims");
    int64_t a = ic.int_("axis");
    if (!tx->has_rank()) return {ic.ctx.tensor_unknown_rank(odt)};
    int64_t rank = tx->rank();
    if (rank == 0) ic.fail_input("x", "must have rank >= 1, got a scalar");
    std::vector<int64_t> axes = reduction_axes(ic, "axis", {a}, rank);
    return {ic.ctx.tensor(odt, reduced_shape(ic.ctx, tx->shape(), axes, keep))};
  };
  s.value = [is_max, out_dtype](InferCtx& ic, std::vector<std::shared_ptr<const Value>>& out) {
    if (!ic.known("x")) return false;
    const Value& x = *ic.val("x");
    int64_t rank = x.rank();
    int64_t axis = reduction_axes(ic, "axis", {ic.int_("axis")}, rank)[0];
    bool keep = ic.bool_("keep_dims");
    const auto& sh = x.shape();
    int64_t len = sh[axis];
    if (len == 0) return false;
    int64_t inner = 1, outer = 1;
    for (int64_t i = axis + 1; i < rank; ++i) inner *= sh[i];
    for (int64_t i = 0; i < axis; ++i) outer *= sh[i];
    bool int_math = !is_float(x.dtype());
    std::vector<int64_t> res(static_cast<size_t>(outer * inner));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in_ = 0; in_ < inner; ++in_) {
        int64_t base = o * len * inner + in_;
        int64_t best = 0;
        if (int_math) {
          int64_t bv = x.as_int(base);
          for (int64_t k = 1; k < len; ++k) {
            int64_t v = x.as_int(base + k * inner);
            if (is_max ? v > bv : v < bv) bv = v, best = k;
          }
        } else {
          // numpy: the first NaN wins
          double bv = x.as_double(base);
          for (int64_t k = 1; k < len && !std::isnan(bv); ++k) {
            double v = x.as_double(base + k * inner);
            if (std::isnan(v) || (is_max ? v > bv : v < bv)) bv = v, best = k;
          }
        }
        res[o * inner + in_] = best;
      }
    }
    std::vector<int64_t> shape;
    for (int64_t i = 0; i < rank; ++i) {
      if (i != axis) shape.push_back(sh[i]);
      else if (keep) shape.push_back(1);
    }
    out.push_back(ops::share(Value::from_ints(out_dtype(ic), shape, res)));
    return true;
  };
  r.add(std::move(s));
}

}  // namespace

void register_reduction_ops(OpRegistry& r) {
  add_reduce_arg(r, "reduce_argmax", true, false);
  add_reduce_arg(r, "reduce_argmax", true, true);
  add_reduce_arg(r, "reduce_argmin", false, false);
  add_reduce_arg(r, "reduce_argmin", false, true);
  add_reduce(r, "reduce_l1_norm", Red::L1);
  add_reduce(r, "reduce_l2_norm", Red::L2);
  add_reduce(r, "reduce_log_sum", Red::LogSum);
  add_reduce(r, "reduce_log_sum_exp", Red::LogSumExp);
  add_reduce(r, "reduce_max", Red::Max);
  add_reduce(r, "reduce_mean", Red::Mean);
  add_reduce(r, "reduce_min", Red::Min);
  add_reduce(r, "reduce_prod", Red::Prod);
  add_reduce(r, "reduce_sum", Red::Sum);
  add_reduce(r, "reduce_sum_square", Red::SumSquare);
}

}  // namespace milkit

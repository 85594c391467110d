// ATen pooling: max / average pooling, adaptive pooling.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

struct PoolArgs {
  std::vector<int64_t> kernel, stride, pad;
  bool ceil = false;
};

PoolArgs pool_args(C& cv, const json& n, size_t sp) {
  PoolArgs p;
  p.kernel = expand_list(cv, n, cv.ints(n, "kernel_size"), sp, "kernel_size");
  auto st = cv.ints(n, "stride", {});
  p.stride = st.empty() ? p.kernel : expand_list(cv, n, st, sp, "stride");
  auto pad = expand_list(cv, n, cv.ints(n, "padding", {0}), sp, "padding");
  for (auto v : pad) {
    p.pad.push_back(v);
    p.pad.push_back(v);
  }
  p.ceil = cv.bo(n, "ceil_mode", false);
  return p;
}

std::pair<Var*, Var*> max_pool_taps(C& cv, const json& n, Var* x, size_t sp, const PoolArgs& p, const std::vector<int64_t>& dil,
                                    bool want_idx);

void max_pool(C& cv, const json& n, size_t sp) {
  Var* x = input(cv, n);
  int r = cv.rank(n, x);
  bool unbatched = r == static_cast<int>(sp) + 1;
  if (unbatched) x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {0})});
  auto p = pool_args(cv, n, sp);
  auto dil = expand_list(cv, n, cv.ints(n, "dilation", {1}), sp, "dilation");
  bool dilated = std::any_of(dil.begin(), dil.end(), [](int64_t d) { return d != 1; });
  // max_pool*d_with_indices: the indices are computed only when something reads them
  bool want_idx = output_used(cv, n, 1);
  if (dilated || want_idx) {
    for (size_t q = 0; q < sp; ++q)
      if (!C::shape(x)[static_cast<size_t>(r) + (unbatched ? 1 : 0) - sp + q]->is_const())
        cv.fail(n, std::string(want_idx ? "the indices output" : "dilated max pooling") + " needs known spatial sizes");
    auto [y, idx] = max_pool_taps(cv, n, x, sp, p, dil, want_idx);
    if (unbatched) {
      y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", {0})});
      if (idx) idx = cv.op("squeeze", {C::a("x", idx), C::aints32("axes", {0})});
    }
    cv.outs(n, {y, idx});
    return;
  }
  Var* y = cv.op("max_pool", {C::a("x", x), C::aints32("kernel_sizes", p.kernel), C::aints32("strides", p.stride),
                              C::astr("pad_type", "custom"), C::aints32("pad", p.pad), C::abool("ceil_mode", p.ceil)});
  if (unbatched) y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", {0})});
  cv.out(n, y);
}

void avg_pool(C& cv, const json& n, size_t sp) {
  Var* x = input(cv, n);
  int r = cv.rank(n, x);
  bool unbatched = r == static_cast<int>(sp) + 1;
  if (unbatched) x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {0})});
  auto p = pool_args(cv, n, sp);
  if (C::has(n, "divisor_override")) cv.fail(n, "divisor_override is not supported");
  bool include = cv.bo(n, "count_include_pad", true);
  Var* y = cv.op("avg_pool", {C::a("x", x), C::aints32("kernel_sizes", p.kernel), C::aints32("strides", p.stride),
                              C::astr("pad_type", "custom"), C::aints32("pad", p.pad),
                              C::abool("exclude_padding_from_average", !include), C::abool("ceil_mode", p.ceil)});
  if (unbatched) y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", {0})});
  cv.out(n, y);
}

// adaptive average / max pooling over the last `sp` dims
void adaptive_pool(C& cv, const json& n, size_t sp, bool is_max) {
  if (is_max && output_used(cv, n, 1)) cv.fail(n, "the indices output of adaptive max pooling is not supported");
  Var* x = input(cv, n);
  int r = cv.rank(n, x);
  auto out_size = expand_list(cv, n, cv.ints(n, "output_size"), sp, "output_size");
  const char* reduce = is_max ? "reduce_max" : "reduce_mean";
  bool all_one = std::all_of(out_size.begin(), out_size.end(), [](int64_t v) { return v == 1; });
  std::vector<int64_t> axes;
  for (size_t k = 0; k < sp; ++k) axes.push_back(r - static_cast<int64_t>(sp) + static_cast<int64_t>(k));
  if (all_one) {
    cv.out(n, cv.op(reduce, {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", true)}));
    return;
  }
  std::vector<int64_t> in_size;
  for (auto ax : axes) {
    Dim d = C::shape(x)[static_cast<size_t>(ax)];
    if (!d->is_const()) cv.fail(n, "adaptive pooling of a symbolic size to " + std::to_string(out_size[0]) + " is not supported");
    in_size.push_back(d->value());
  }
  bool divisible = true;
  for (size_t k = 0; k < sp; ++k) divisible = divisible && in_size[k] % out_size[k] == 0;
  if (divisible && r == static_cast<int>(sp) + 2) {
    std::vector<int64_t> kern;
    for (size_t k = 0; k < sp; ++k) kern.push_back(in_size[k] / out_size[k]);
    std::vector<int64_t> pad(2 * sp, 0);
    cv.out(n, cv.op(is_max ? "max_pool" : "avg_pool",
                    {C::a("x", x), C::aints32("kernel_sizes", kern), C::aints32("strides", kern),
                     C::astr("pad_type", "valid")}));
    return;
  }
  // general: one window per output position, axis by axis (torch's start/end rule)
  Var* cur = x;
  for (size_t k = 0; k < sp; ++k) {
    int64_t ax = axes[k], in = in_size[k], o = out_size[k];
    Arg vals{"values", {}, true};
    for (int64_t i = 0; i < o; ++i) {
      int64_t s = (i * in) / o, e = ((i + 1) * in + o - 1) / o;
      Var* sl = cv.op("slice_by_size", {C::a("x", cur), C::a("begin", [&] {
                                           std::vector<int64_t> b(static_cast<size_t>(r), 0);
                                           b[static_cast<size_t>(ax)] = s;
                                           return Value::int_list(b);
                                         }()),
                                        C::a("size", [&] {
                                          std::vector<int64_t> z(static_cast<size_t>(r), -1);
                                          z[static_cast<size_t>(ax)] = e - s;
                                          return Value::int_list(z);
                                        }())});
      vals.items.push_back(ArgItem{cv.op(reduce, {C::a("x", sl), C::aints32("axes", {ax}), C::abool("keep_dims", true)}), nullptr});
    }
    cur = o == 1 ? vals.items[0].var : cv.op("concat", {vals, C::ai32("axis", ax)});
  }
  cv.out(n, cur);
}

// ---- max pooling by taps, max_unpool2d ---------------------------------------------------------
// max pooling from its definition, for what MIL's max_pool cannot do (dilation, the indices
// output): the max over the kernel's taps, each a strided slice of the input padded with -inf.
// Indices are torch's flat positions in the input plane (h * W + w) of the first maximum (a NaN
// wins, as in torch's `val > max || isnan(val)`); a window of -inf gives its first in-bounds tap.
// x is batched [N, C, spatial...] with known spatial sizes.
std::pair<Var*, Var*> max_pool_taps(C& cv, const json& n, Var* x, size_t sp, const PoolArgs& p, const std::vector<int64_t>& dil,
                                    bool want_idx) {
  int r = cv.rank(n, x);
  std::vector<int64_t> in(sp), o(sp), axes(sp), lo(sp), hi(sp);
  for (size_t q = 0; q < sp; ++q) {
    axes[q] = r - static_cast<int64_t>(sp) + static_cast<int64_t>(q);
    in[q] = known_dim(cv, n, x, axes[q], "the spatial sizes");
    int64_t k = p.kernel[q], s = p.stride[q], pd = p.pad[2 * q], d = dil[q];
    int64_t span = in[q] + 2 * pd - d * (k - 1) - 1;
    o[q] = (p.ceil ? (span + s - 1) / s : span / s) + 1;
    if (p.ceil && (o[q] - 1) * s >= in[q] + pd) --o[q];  // the last window must start inside
    if (o[q] <= 0) cv.fail(n, "the kernel does not fit the padded input");
    lo[q] = pd;
    hi[q] = std::max<int64_t>(pd, (o[q] - 1) * s + d * (k - 1) + 1 - in[q] - pd);
  }
  DataType dt = C::dtype(x);
  double lowest = is_float(dt) ? -std::numeric_limits<double>::infinity() : static_cast<double>(std::numeric_limits<int32_t>::min());
  Var* xp = cv.e.pad_trailing(x, lo, hi, lowest);
  int64_t taps = 1, L = 1;
  for (size_t q = 0; q < sp; ++q) taps *= p.kernel[q], L *= o[q];
  // the input position each output reads at tap t (a padded position: the window's first
  // in-bounds one, which is where torch's index starts)
  auto tap_of = [&](int64_t t) {
    std::vector<int64_t> tq(sp);
    for (int64_t rem = t, q = static_cast<int64_t>(sp) - 1; q >= 0; --q) {
      tq[static_cast<size_t>(q)] = rem % p.kernel[static_cast<size_t>(q)];
      rem /= p.kernel[static_cast<size_t>(q)];
    }
    return tq;
  };
  std::vector<int64_t> first(static_cast<size_t>(L), -1);
  std::vector<std::vector<int64_t>> pos_of(static_cast<size_t>(taps), std::vector<int64_t>(static_cast<size_t>(L), -1));
  if (want_idx)
    for (int64_t t = 0; t < taps; ++t) {
      auto tq = tap_of(t);
      for (int64_t pos = 0; pos < L; ++pos) {
        int64_t flat = 0, mul = 1;
        bool ok = true;
        for (int64_t rem = pos, q = static_cast<int64_t>(sp) - 1; q >= 0; --q) {
          size_t u = static_cast<size_t>(q);
          int64_t c = (rem % o[u]) * p.stride[u] - p.pad[2 * u] + tq[u] * dil[u];
          rem /= o[u];
          ok = ok && c >= 0 && c < in[u];
          flat += c * mul;
          mul *= in[u];
        }
        if (!ok) continue;
        pos_of[static_cast<size_t>(t)][static_cast<size_t>(pos)] = flat;
        if (first[static_cast<size_t>(pos)] < 0) first[static_cast<size_t>(pos)] = flat;
      }
    }
  Var* cur = nullptr;
  Var* idx = nullptr;
  for (int64_t t = 0; t < taps; ++t) {
    auto tq = tap_of(t);
    std::vector<int64_t> begin(sp);
    for (size_t q = 0; q < sp; ++q) begin[q] = tq[q] * dil[q];
    Var* v = cv.e.strided(xp, axes, begin, o, p.stride);
    if (!want_idx) {
      cur = cur ? bin(cv, "maximum", cur, v) : v;
      continue;
    }
    std::vector<int64_t> row = pos_of[static_cast<size_t>(t)];
    for (int64_t k = 0; k < L; ++k)
      if (row[static_cast<size_t>(k)] < 0) row[static_cast<size_t>(k)] = first[static_cast<size_t>(k)];
    Var* rv = cv.c(Value::from_ints(DataType::Int32, o, row));
    if (!cur) {
      cur = v;
      idx = bin(cv, "add", cv.op("fill_like", {C::a("ref_tensor", v), C::a("value", Value::scalar_int(DataType::Int32, 0))}), rv);
      continue;
    }
    Var* upd = cv.op("logical_or", {C::a("x", bin(cv, "greater", v, cur)), C::a("y", bin(cv, "not_equal", v, v))});
    cur = cv.op("select", {C::a("cond", upd), C::a("a", v), C::a("b", cur)});
    idx = cv.op("select", {C::a("cond", upd), C::a("a", rv), C::a("b", idx)});
  }
  return {cur, idx};
}

void max_pool1d(C& cv, const json& n) { max_pool(cv, n, 1); }

void max_pool2d(C& cv, const json& n) { max_pool(cv, n, 2); }

void max_pool3d(C& cv, const json& n) { max_pool(cv, n, 3); }

void avg_pool1d(C& cv, const json& n) { avg_pool(cv, n, 1); }

void avg_pool2d(C& cv, const json& n) { avg_pool(cv, n, 2); }

void avg_pool3d(C& cv, const json& n) { avg_pool(cv, n, 3); }

void adaptive_avg_pool1d(C& cv, const json& n) { adaptive_pool(cv, n, 1, false); }

void adaptive_avg_pool2d(C& cv, const json& n) { adaptive_pool(cv, n, 2, false); }

void adaptive_avg_pool3d(C& cv, const json& n) { adaptive_pool(cv, n, 3, false); }

void adaptive_max_pool1d(C& cv, const json& n) { adaptive_pool(cv, n, 1, true); }

void adaptive_max_pool2d(C& cv, const json& n) { adaptive_pool(cv, n, 2, true); }

}  // namespace

void register_pooling(OpTable& t) {
  t.on({"aten.max_pool1d", "aten.max_pool1d_with_indices"}, max_pool1d);
  t.on({"aten.max_pool2d", "aten.max_pool2d_with_indices"}, max_pool2d);
  t.on({"aten.max_pool3d", "aten.max_pool3d_with_indices"}, max_pool3d);
  t.on("aten.avg_pool1d", avg_pool1d);
  t.on("aten.avg_pool2d", avg_pool2d);
  t.on("aten.avg_pool3d", avg_pool3d);
  t.on("aten.adaptive_avg_pool1d", adaptive_avg_pool1d);
  t.on({"aten.adaptive_avg_pool2d", "aten._adaptive_avg_pool2d"}, adaptive_avg_pool2d);
  t.on({"aten.adaptive_avg_pool3d", "aten._adaptive_avg_pool3d"}, adaptive_avg_pool3d);
  t.on("aten.adaptive_max_pool1d", adaptive_max_pool1d);
  t.on("aten.adaptive_max_pool2d", adaptive_max_pool2d);
}

}  // namespace torch_detail
}  // namespace milkit

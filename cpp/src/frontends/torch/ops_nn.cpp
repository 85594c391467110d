// ATen neural-network operators: linear algebra (linear, addmm, matmul, bmm, baddbmm),
// convolutions (conv*d, convolution, transposed), normalization (batch, layer, group, RMS),
// pooling (max, avg, adaptive), softmax, dropout, scaled_dot_product_attention, embedding.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "converter.h"

namespace milkit {
namespace torch_detail {

namespace {

using C = Converter;

Var* bin(C& cv, const char* op, Var* x, Var* y) { return cv.op(op, {C::a("x", x), C::a("y", y)}); }

Var* input(C& cv, const json& n) { return C::has(n, "input") ? cv.tensor(n, "input") : cv.tensor(n, "self"); }

bool is_const(Var* v) { return v->value() && !v->value()->is_symbolic(); }

// `v` (per-channel, rank 1) reshaped to broadcast over [N, C, spatial...] of rank `rank`.
Var* per_channel(C& cv, Var* v, int rank) {
  std::vector<int64_t> axes;
  for (int i = 2; i < rank; ++i) axes.push_back(i - 1);
  if (axes.empty()) return v;
  return cv.op("expand_dims", {C::a("x", v), C::aints32("axes", axes)});
}

std::vector<int64_t> expand_list(C& cv, const json& n, std::vector<int64_t> v, size_t k, const char* what) {
  if (v.size() == 1 && k > 1) v.assign(k, v[0]);
  if (v.size() != k) cv.fail(n, std::string(what) + " has " + std::to_string(v.size()) + " values for " + std::to_string(k) + " spatial dims");
  return v;
}

// conv / conv_transpose with torch's arguments
Var* convolution(C& cv, const json& n, Var* x, Var* w, Var* bias, bool transposed) {
  int r = cv.rank(n, x);
  bool unbatched = false;
  int wr = cv.rank(n, w);
  if (r == wr - 1) {  // torch accepts unbatched inputs
    x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {0})});
    unbatched = true;
    r += 1;
  }
  if (r < 3) cv.fail(n, "input has rank " + std::to_string(r) + "; expected N, C and spatial dims");
  size_t sp = static_cast<size_t>(r - 2);
  auto stride = expand_list(cv, n, cv.ints(n, "stride", {1}), sp, "stride");
  auto dil = expand_list(cv, n, cv.ints(n, "dilation", {1}), sp, "dilation");
  int64_t groups = cv.i(n, "groups", 1);
  DataType dt = C::dtype(x);
  w = cv.cast(w, dt);
  std::vector<Arg> args{C::a("x", x), C::a("weight", w)};
  if (bias) args.push_back(C::a("bias", cv.cast(bias, dt)));
  args.push_back(C::aints32("strides", stride));
  args.push_back(C::aints32("dilations", dil));
  args.push_back(C::ai32("groups", groups));
  Var* out;
  if (!transposed) {
    const json* pa = C::arg(n, "padding");
    if (pa && pa->contains("as_string")) {
      std::string p = (*pa)["as_string"].get<std::string>();
      if (p != "same" && p != "valid") cv.fail(n, "padding '" + p + "' is not 'same' or 'valid'");
      args.push_back(C::astr("pad_type", p));
    } else {
      auto pad = expand_list(cv, n, cv.ints(n, "padding", {0}), sp, "padding");
      std::vector<int64_t> p2;
      for (auto p : pad) {
        p2.push_back(p);
        p2.push_back(p);
      }
      args.push_back(C::astr("pad_type", "custom"));
      args.push_back(C::aints32("pad", p2));
    }
    out = cv.op("conv", std::move(args));
  } else {
    auto pad = expand_list(cv, n, cv.ints(n, "padding", {0}), sp, "padding");
    auto opad = expand_list(cv, n, cv.ints(n, "output_padding", {0}), sp, "output_padding");
    std::vector<int64_t> p2, extra(sp, 0);
    for (size_t k = 0; k < sp; ++k) {
      p2.push_back(pad[k]);
      int64_t e = pad[k] - opad[k];
      if (e < 0) {
        extra[k] = -e;
        e = 0;
      }
      p2.push_back(e);
    }
    args.push_back(C::astr("pad_type", "custom"));
    args.push_back(C::aints32("pad", p2));
    if (bias && std::any_of(extra.begin(), extra.end(), [](int64_t e) { return e > 0; })) args.erase(args.begin() + 2);
    out = cv.op("conv_transpose", std::move(args));
    if (std::any_of(extra.begin(), extra.end(), [](int64_t e) { return e > 0; })) {
      std::vector<int64_t> pads(4, 0);
      for (size_t k = 0; k < sp; ++k) {
        pads.push_back(0);
        pads.push_back(extra[k]);
      }
      out = cv.op("pad", {C::a("x", out), C::aints32("pad", pads), C::astr("mode", "constant"),
                          C::a("constant_val", Value::scalar_float(dt, 0))});
      // the added border holds only the bias
      if (bias) out = cv.op("add", {C::a("x", out), C::a("y", per_channel(cv, cv.cast(bias, dt), r))});
    }
  }
  if (unbatched) out = cv.op("squeeze", {C::a("x", out), C::aints32("axes", {0})});
  return out;
}

void conv_fn(C& cv, const json& n, bool transposed) {
  Var* x = input(cv, n);
  Var* w = cv.tensor(n, "weight");
  Var* bias = cv.opt_tensor(n, "bias");
  cv.out(n, convolution(cv, n, x, w, bias, transposed));
}

Var* matmul(C& cv, Var* x, Var* y, bool ty = false) {
  return cv.op("matmul", {C::a("x", x), C::a("y", y), C::abool("transpose_x", false), C::abool("transpose_y", ty)});
}

Var* batch_norm(C& cv, const json& n, Var* x, Var* w, Var* b, Var* mean, Var* var, double eps) {
  int r = cv.rank(n, x);
  DataType dt = C::dtype(x);
  if (!mean || !var) cv.fail(n, "batch_norm without running statistics (training mode) is not supported");
  bool ok_const = is_const(mean) && is_const(var) && (!w || is_const(w)) && (!b || is_const(b));
  if (ok_const && r >= 3 && r <= 5) {
    std::vector<Arg> args{C::a("x", x), C::a("mean", cv.cast(mean, dt)), C::a("variance", cv.cast(var, dt))};
    if (w) args.push_back(C::a("gamma", cv.cast(w, dt)));
    if (b) args.push_back(C::a("beta", cv.cast(b, dt)));
    args.push_back(C::a("epsilon", Value::scalar_float(dt, eps)));
    return cv.op("batch_norm", std::move(args));
  }
  // general form: (x - mean) / sqrt(var + eps) * w + b, per channel (axis 1)
  int rr = std::max(r, 2);
  auto pc = [&](Var* v) { return per_channel(cv, cv.cast(v, dt), rr); };
  Var* y = bin(cv, "sub", x, pc(mean));
  Var* den = cv.op("rsqrt", {C::a("x", bin(cv, "add", pc(var), cv.cs(eps, dt)))});
  y = bin(cv, "mul", y, den);
  if (w) y = bin(cv, "mul", y, pc(w));
  if (b) y = bin(cv, "add", y, pc(b));
  return y;
}

Var* layer_norm(C& cv, const json& n, Var* x, const std::vector<int64_t>& normalized, Var* w, Var* b, double eps) {
  int r = cv.rank(n, x);
  DataType dt = C::dtype(x);
  std::vector<int64_t> axes;
  for (size_t k = 0; k < normalized.size(); ++k) axes.push_back(r - static_cast<int64_t>(normalized.size()) + static_cast<int64_t>(k));
  bool wc = (!w || is_const(w)) && (!b || is_const(b));
  if (wc) {
    std::vector<Arg> args{C::a("x", x), C::aints32("axes", axes)};
    if (w) args.push_back(C::a("gamma", cv.cast(w, dt)));
    if (b) args.push_back(C::a("beta", cv.cast(b, dt)));
    args.push_back(C::a("epsilon", Value::scalar_float(dt, eps)));
    return cv.op("layer_norm", std::move(args));
  }
  Var* y = cv.op("layer_norm", {C::a("x", x), C::aints32("axes", axes), C::a("epsilon", Value::scalar_float(dt, eps))});
  if (w) y = bin(cv, "mul", y, cv.cast(w, dt));
  if (b) y = bin(cv, "add", y, cv.cast(b, dt));
  return y;
}

Var* group_norm(C& cv, const json& n, Var* x, int64_t groups, Var* w, Var* b, double eps) {
  int r = cv.rank(n, x);
  DataType dt = C::dtype(x);
  // [N, C, *] -> [N, G, C/G * prod(*)]; normalize over the last axis; back; per-channel affine
  Var* shp = cv.op("shape", {C::a("x", x)});
  Var* g = cv.op("reshape", {C::a("x", x), C::a("shape", cv.shape_of_pieces(x, {{true, 0}, {false, groups}, {false, -1}}))});
  Var* mean = cv.op("reduce_mean", {C::a("x", g), C::aints32("axes", {2}), C::abool("keep_dims", true)});
  Var* d = bin(cv, "sub", g, mean);
  Var* var = cv.op("reduce_mean", {C::a("x", bin(cv, "mul", d, d)), C::aints32("axes", {2}), C::abool("keep_dims", true)});
  Var* y = bin(cv, "mul", d, cv.op("rsqrt", {C::a("x", bin(cv, "add", var, cv.cs(eps, dt)))}));
  y = cv.op("reshape", {C::a("x", y), C::a("shape", shp)});
  if (w) y = bin(cv, "mul", y, per_channel(cv, cv.cast(w, dt), r));
  if (b) y = bin(cv, "add", y, per_channel(cv, cv.cast(b, dt), r));
  return y;
}

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
  auto dil = cv.ints(n, "dilation", {1});
  for (auto d : dil)
    if (d != 1) cv.fail(n, "dilated pooling is not supported");
  return p;
}

void max_pool(C& cv, const json& n, size_t sp) {
  Var* x = input(cv, n);
  int r = cv.rank(n, x);
  bool unbatched = r == static_cast<int>(sp) + 1;
  if (unbatched) x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {0})});
  auto p = pool_args(cv, n, sp);
  Var* y = cv.op("max_pool", {C::a("x", x), C::aints32("kernel_sizes", p.kernel), C::aints32("strides", p.stride),
                              C::astr("pad_type", "custom"), C::aints32("pad", p.pad), C::abool("ceil_mode", p.ceil)});
  if (unbatched) y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", {0})});
  cv.out(n, y);  // indices (max_pool2d_with_indices' second output) are not produced
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

Var* softmax(C& cv, const json& n, bool log) {
  Var* x = input(cv, n);
  if (auto dt = cv.dtype_arg(n, "dtype")) x = cv.cast(x, *dt);
  if (auto od = cv.out_dtype(n); od && is_float(*od)) x = cv.cast(x, *od);
  if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
  int64_t d = cv.axis(n, cv.i(n, "dim", -1), cv.rank(n, x));
  if (!log) return cv.op("softmax", {C::a("x", x), C::ai32("axis", d)});
  Var* lse = cv.op("reduce_log_sum_exp", {C::a("x", x), C::aints32("axes", {d}), C::abool("keep_dims", true)});
  return bin(cv, "sub", x, lse);
}

// softmax(x) along `axis` with rows that are -inf throughout giving 0, not NaN (torch's
// _safe_softmax, which scaled_dot_product_attention uses for fully masked query rows)
Var* safe_softmax(C& cv, Var* x, int64_t axis) {
  Var* p = cv.op("softmax", {C::a("x", x), C::ai32("axis", axis)});
  DataType dt = C::dtype(x);
  Var* top = cv.op("reduce_max", {C::a("x", x), C::aints32("axes", {axis}), C::abool("keep_dims", true)});
  Var* dead = bin(cv, "equal", top, cv.cs(-std::numeric_limits<double>::infinity(), dt));
  return cv.op("select", {C::a("cond", dead), C::a("a", cv.cs(0, dt)), C::a("b", p)});
}

// scaled_dot_product_attention by its definition (mask, causal, scale, GQA)
Var* sdpa(C& cv, const json& n) {
  Var* q = cv.tensor(n, "query");
  Var* k = cv.tensor(n, "key");
  Var* v = cv.tensor(n, "value");
  Var* mask = cv.opt_tensor(n, "attn_mask");
  bool causal = cv.bo(n, "is_causal", false);
  DataType dt = C::dtype(q);
  int r = cv.rank(n, q);
  if (r < 2) cv.fail(n, "query must have rank >= 2");
  Dim e = C::shape(q)[static_cast<size_t>(r - 1)];
  double scale;
  if (C::has(n, "scale")) {
    scale = cv.f(n, "scale", 1);
  } else {
    if (!e->is_const()) cv.fail(n, "the embedding size of the query must be known");
    scale = 1.0 / std::sqrt(static_cast<double>(e->value()));
  }
  if (cv.bo(n, "enable_gqa", false) && r >= 3) {
    Dim hq = C::shape(q)[static_cast<size_t>(r - 3)], hk = C::shape(k)[static_cast<size_t>(r - 3)];
    if (!hq->is_const() || !hk->is_const() || hk->value() == 0 || hq->value() % hk->value())
      cv.fail(n, "enable_gqa needs known head counts, the query's a multiple of the key's");
    int64_t rep = hq->value() / hk->value();
    if (rep > 1) {
      // repeat_interleave along the head axis: [.., Hk, S, E] -> [.., Hk, rep, S, E] -> [.., Hk*rep, S, E]
      auto rep_kv = [&](Var* t) {
        Var* ex = cv.op("expand_dims", {C::a("x", t), C::aints32("axes", {r - 2})});
        std::vector<int64_t> reps(static_cast<size_t>(r + 1), 1);
        reps[static_cast<size_t>(r - 2)] = rep;
        Var* tl = cv.op("tile", {C::a("x", ex), C::aints32("reps", reps)});
        std::vector<Dim> sh = C::shape(t);
        sh[static_cast<size_t>(r - 3)] = cv.ctx().constant(hq->value());
        return cv.op("reshape", {C::a("x", tl), C::a("shape", cv.shape_var(sh))});
      };
      k = rep_kv(k);
      v = rep_kv(v);
    }
  }
  Var* qs = bin(cv, "mul", q, cv.cs(scale, dt));
  Var* s = matmul(cv, qs, cv.cast(k, dt), true);
  if (causal) {
    Dim L = C::shape(q)[static_cast<size_t>(r - 2)], S = C::shape(k)[static_cast<size_t>(r - 2)];
    Var* ones = cv.op("fill", {C::a("shape", cv.shape_var({L, S})), C::a("value", Value::scalar_float(dt, 1))});
    Var* tri = cv.op("band_part", {C::a("x", ones), C::ai32("lower", -1), C::ai32("upper", 0)});
    Var* keep = bin(cv, "greater", tri, cv.cs(0, dt));
    s = cv.op("select", {C::a("cond", keep), C::a("a", s), C::a("b", cv.cs(-std::numeric_limits<double>::infinity(), dt))});
  }
  if (mask) {
    if (C::dtype(mask) == DataType::Bool)
      s = cv.op("select", {C::a("cond", mask), C::a("a", s), C::a("b", cv.cs(-std::numeric_limits<double>::infinity(), dt))});
    else
      s = bin(cv, "add", s, cv.cast(mask, dt));
  }
  // a mask can hide every key from a query (padding): torch gives that row 0
  Var* p = mask ? safe_softmax(cv, s, -1) : cv.op("softmax", {C::a("x", s), C::ai32("axis", -1)});
  return matmul(cv, p, cv.cast(v, dt));
}

}  // namespace

void register_nn(OpTable& t) {
  t["aten.linear"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    Var* w = cv.tensor(n, "weight");
    Var* b = cv.opt_tensor(n, "bias");
    DataType dt = C::dtype(x);
    if (is_const(w) && (!b || is_const(b)) && cv.rank(n, w) == 2) {
      std::vector<Arg> args{C::a("x", x), C::a("weight", cv.cast(w, dt))};
      if (b) args.push_back(C::a("bias", cv.cast(b, dt)));
      cv.out(n, cv.op("linear", std::move(args)));
      return;
    }
    Var* y = matmul(cv, x, cv.cast(w, dt), true);
    if (b) y = bin(cv, "add", y, cv.cast(b, dt));
    cv.out(n, y);
  };
  t["aten.addmm"] = [](C& cv, const json& n) {
    Var* bias = cv.tensor(n, "self");
    Var* m1 = cv.tensor(n, "mat1");
    Var* m2 = cv.tensor(n, "mat2");
    double beta = cv.f(n, "beta", 1), alpha = cv.f(n, "alpha", 1);
    DataType dt = C::dtype(m1);
    Var* y = matmul(cv, m1, cv.cast(m2, dt));
    if (alpha != 1) y = bin(cv, "mul", y, cv.cs(alpha, dt));
    if (beta != 0) {
      Var* bb = cv.cast(bias, dt);
      if (beta != 1) bb = bin(cv, "mul", bb, cv.cs(beta, dt));
      y = bin(cv, "add", y, bb);
    }
    cv.out(n, y);
  };
  t["aten.mm"] = [](C& cv, const json& n) {
    Var* x = cv.tensor(n, "self");
    cv.out(n, matmul(cv, x, cv.cast(cv.tensor(n, "mat2"), C::dtype(x))));
  };
  t["aten.bmm"] = t["aten.mm"];
  t["aten.matmul"] = [](C& cv, const json& n) {
    Var* x = cv.tensor(n, "self");
    cv.out(n, matmul(cv, x, cv.cast(cv.tensor(n, "other"), C::dtype(x))));
  };
  t["aten.baddbmm"] = [](C& cv, const json& n) {
    Var* bias = cv.tensor(n, "self");
    Var* b1 = cv.tensor(n, "batch1");
    DataType dt = C::dtype(b1);
    Var* y = matmul(cv, b1, cv.cast(cv.tensor(n, "batch2"), dt));
    double beta = cv.f(n, "beta", 1), alpha = cv.f(n, "alpha", 1);
    if (alpha != 1) y = bin(cv, "mul", y, cv.cs(alpha, dt));
    if (beta != 0) {
      Var* bb = cv.cast(bias, dt);
      if (beta != 1) bb = bin(cv, "mul", bb, cv.cs(beta, dt));
      y = bin(cv, "add", y, bb);
    }
    cv.out(n, y);
  };
  t["aten.dot"] = [](C& cv, const json& n) {
    Var* x = cv.tensor(n, "self");
    Var* y = cv.cast(cv.tensor(n, "tensor"), C::dtype(x));
    cv.out(n, cv.op("reduce_sum", {C::a("x", bin(cv, "mul", x, y)), C::aints32("axes", {0}), C::abool("keep_dims", false)}));
  };

  for (const char* name : {"aten.conv1d", "aten.conv2d", "aten.conv3d"})
    t[name] = [](C& cv, const json& n) { conv_fn(cv, n, false); };
  for (const char* name : {"aten.conv_transpose1d", "aten.conv_transpose2d", "aten.conv_transpose3d"})
    t[name] = [](C& cv, const json& n) { conv_fn(cv, n, true); };
  t["aten.convolution"] = [](C& cv, const json& n) { conv_fn(cv, n, cv.bo(n, "transposed", false)); };
  t["aten._convolution"] = t["aten.convolution"];

  t["aten.batch_norm"] = [](C& cv, const json& n) {
    if (cv.bo(n, "training", false)) cv.fail(n, "batch_norm in training mode is not supported (export the model in eval mode)");
    Var* x = input(cv, n);
    cv.out(n, batch_norm(cv, n, x, cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"), cv.opt_tensor(n, "running_mean"),
                         cv.opt_tensor(n, "running_var"), cv.f(n, "eps", 1e-5)));
  };
  t["aten._native_batch_norm_legit_no_training"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    cv.out(n, batch_norm(cv, n, x, cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"), cv.opt_tensor(n, "running_mean"),
                         cv.opt_tensor(n, "running_var"), cv.f(n, "eps", 1e-5)));
  };
  t["aten._native_batch_norm_legit_functional"] = [](C& cv, const json& n) {
    if (cv.bo(n, "training", false)) cv.fail(n, "batch_norm in training mode is not supported (export the model in eval mode)");
    Var* x = input(cv, n);
    cv.out(n, batch_norm(cv, n, x, cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"), cv.opt_tensor(n, "running_mean"),
                         cv.opt_tensor(n, "running_var"), cv.f(n, "eps", 1e-5)));
  };
  t["aten.native_batch_norm"] = t["aten._native_batch_norm_legit_functional"];
  t["aten._native_batch_norm_legit"] = t["aten._native_batch_norm_legit_functional"];
  // no running statistics: normalized by the batch's own (instance_norm decomposes to this)
  t["aten._native_batch_norm_legit.no_stats"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    int r = cv.rank(n, x);
    DataType dt = C::dtype(x);
    std::vector<int64_t> axes{0};
    for (int k = 2; k < r; ++k) axes.push_back(k);
    double eps = cv.f(n, "eps", 1e-5);
    Var* mean = cv.op("reduce_mean", {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", true)});
    Var* d = bin(cv, "sub", x, mean);
    Var* var = cv.op("reduce_mean", {C::a("x", bin(cv, "mul", d, d)), C::aints32("axes", axes), C::abool("keep_dims", true)});
    Var* y = bin(cv, "mul", d, cv.op("rsqrt", {C::a("x", bin(cv, "add", var, cv.cs(eps, dt)))}));
    if (Var* w = cv.opt_tensor(n, "weight")) y = bin(cv, "mul", y, per_channel(cv, cv.cast(w, dt), std::max(r, 2)));
    if (Var* b = cv.opt_tensor(n, "bias")) y = bin(cv, "add", y, per_channel(cv, cv.cast(b, dt), std::max(r, 2)));
    cv.out(n, y);
  };
  t["aten.instance_norm"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    int r = cv.rank(n, x);
    DataType dt = C::dtype(x);
    std::vector<int64_t> axes;
    for (int k = 2; k < r; ++k) axes.push_back(k);
    double eps = cv.f(n, "eps", 1e-5);
    Var* mean = cv.op("reduce_mean", {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", true)});
    Var* d = bin(cv, "sub", x, mean);
    Var* var = cv.op("reduce_mean", {C::a("x", bin(cv, "mul", d, d)), C::aints32("axes", axes), C::abool("keep_dims", true)});
    Var* y = bin(cv, "mul", d, cv.op("rsqrt", {C::a("x", bin(cv, "add", var, cv.cs(eps, dt)))}));
    if (Var* w = cv.opt_tensor(n, "weight")) y = bin(cv, "mul", y, per_channel(cv, cv.cast(w, dt), r));
    if (Var* b = cv.opt_tensor(n, "bias")) y = bin(cv, "add", y, per_channel(cv, cv.cast(b, dt), r));
    cv.out(n, y);
  };
  t["aten.layer_norm"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    cv.out(n, layer_norm(cv, n, x, cv.ints(n, "normalized_shape"), cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"),
                         cv.f(n, "eps", 1e-5)));
  };
  t["aten.native_layer_norm"] = t["aten.layer_norm"];
  t["aten.group_norm"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    cv.out(n, group_norm(cv, n, x, cv.i(n, "num_groups", 1), cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"),
                         cv.f(n, "eps", 1e-5)));
  };
  t["aten.native_group_norm"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    cv.out(n, group_norm(cv, n, x, cv.i(n, "group", 1), cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"),
                         cv.f(n, "eps", 1e-5)));
  };
  t["aten.rms_norm"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    DataType dt = C::dtype(x);
    int r = cv.rank(n, x);
    auto ns = cv.ints(n, "normalized_shape");
    std::vector<int64_t> axes;
    for (size_t k = 0; k < ns.size(); ++k) axes.push_back(r - static_cast<int64_t>(ns.size()) + static_cast<int64_t>(k));
    double eps = C::has(n, "eps") ? cv.f(n, "eps", 0)
                                  : (dt == DataType::Float16 ? 0.0009765625 : static_cast<double>(std::numeric_limits<float>::epsilon()));
    Var* ms = cv.op("reduce_mean", {C::a("x", bin(cv, "mul", x, x)), C::aints32("axes", axes), C::abool("keep_dims", true)});
    Var* y = bin(cv, "mul", x, cv.op("rsqrt", {C::a("x", bin(cv, "add", ms, cv.cs(eps, dt)))}));
    if (Var* w = cv.opt_tensor(n, "weight")) y = bin(cv, "mul", y, cv.cast(w, dt));
    cv.out(n, y);
  };
  t["aten._fused_rms_norm"] = t["aten.rms_norm"];

  t["aten.max_pool1d"] = [](C& cv, const json& n) { max_pool(cv, n, 1); };
  t["aten.max_pool2d"] = [](C& cv, const json& n) { max_pool(cv, n, 2); };
  t["aten.max_pool3d"] = [](C& cv, const json& n) { max_pool(cv, n, 3); };
  t["aten.max_pool2d_with_indices"] = t["aten.max_pool2d"];
  t["aten.max_pool3d_with_indices"] = t["aten.max_pool3d"];
  t["aten.avg_pool1d"] = [](C& cv, const json& n) { avg_pool(cv, n, 1); };
  t["aten.avg_pool2d"] = [](C& cv, const json& n) { avg_pool(cv, n, 2); };
  t["aten.avg_pool3d"] = [](C& cv, const json& n) { avg_pool(cv, n, 3); };
  t["aten.adaptive_avg_pool1d"] = [](C& cv, const json& n) { adaptive_pool(cv, n, 1, false); };
  t["aten.adaptive_avg_pool2d"] = [](C& cv, const json& n) { adaptive_pool(cv, n, 2, false); };
  t["aten._adaptive_avg_pool2d"] = t["aten.adaptive_avg_pool2d"];
  t["aten.adaptive_avg_pool3d"] = [](C& cv, const json& n) { adaptive_pool(cv, n, 3, false); };
  t["aten.adaptive_max_pool1d"] = [](C& cv, const json& n) { adaptive_pool(cv, n, 1, true); };
  t["aten.adaptive_max_pool2d"] = [](C& cv, const json& n) { adaptive_pool(cv, n, 2, true); };

  t["aten.softmax"] = [](C& cv, const json& n) { cv.out(n, softmax(cv, n, false)); };
  t["aten._softmax"] = t["aten.softmax"];
  t["aten._safe_softmax"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    if (auto dt = cv.dtype_arg(n, "dtype")) x = cv.cast(x, *dt);
    if (auto od = cv.out_dtype(n); od && is_float(*od)) x = cv.cast(x, *od);
    if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
    cv.out(n, safe_softmax(cv, x, cv.axis(n, cv.i(n, "dim", -1), cv.rank(n, x))));
  };
  t["aten.log_softmax"] = [](C& cv, const json& n) { cv.out(n, softmax(cv, n, true)); };
  t["aten._log_softmax"] = t["aten.log_softmax"];

  t["aten.dropout"] = [](C& cv, const json& n) {
    if (cv.bo(n, "train", false) && cv.f(n, "p", 0) > 0) cv.fail(n, "dropout in training mode is not supported (export the model in eval mode)");
    cv.out(n, cv.op("identity", {C::a("x", input(cv, n))}));
  };
  t["aten.native_dropout"] = t["aten.dropout"];
  t["aten.feature_dropout"] = t["aten.dropout"];
  t["aten.alpha_dropout"] = t["aten.dropout"];

  t["aten.scaled_dot_product_attention"] = [](C& cv, const json& n) {
    if (cv.f(n, "dropout_p", 0) > 0) cv.fail(n, "attention dropout is not supported (export the model in eval mode)");
    cv.out(n, sdpa(cv, n));
  };
  t["aten._scaled_dot_product_flash_attention_for_cpu"] = [](C& cv, const json& n) {
    if (cv.f(n, "dropout_p", 0) > 0) cv.fail(n, "attention dropout is not supported");
    cv.out(n, sdpa(cv, n));
  };
  t["aten.embedding"] = [](C& cv, const json& n) {
    Var* w = cv.tensor(n, "weight");
    Var* idx = cv.cast(cv.tensor(n, "indices"), DataType::Int32);
    cv.out(n, cv.op("gather", {C::a("x", w), C::a("indices", idx), C::ai32("axis", 0)}));
  };
  t["aten.pixel_shuffle"] = [](C& cv, const json& n) {
    cv.out(n, cv.op("pixel_shuffle", {C::a("x", cv.tensor(n, "self")), C::ai32("upscale_factor", cv.i(n, "upscale_factor", 1))}));
  };
  t["aten.pixel_unshuffle"] = [](C& cv, const json& n) {
    cv.out(n, cv.op("pixel_unshuffle", {C::a("x", cv.tensor(n, "self")),
                                        C::a("downscale_factor", Value::scalar_int(DataType::UInt32, cv.i(n, "downscale_factor", 1)))}));
  };
}

}  // namespace torch_detail
}  // namespace milkit

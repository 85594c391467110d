// Sliding windows: im2col, col2im, pooling by taps with indices, max_unpool.
#include "milkit/compose/windows.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>

namespace milkit {
namespace compose {

Window Window::filled(size_t sp) const {
  Window w = *this;
  auto fill = [&](std::vector<int64_t>& v, int64_t def, const char* what) {
    if (v.empty()) v.assign(sp, def);
    if (v.size() != sp)
      fail(std::string(what) + " needs " + std::to_string(sp) + " values, got " +
           std::to_string(v.size()));
  };
  if (w.kernel.size() != sp)
    fail("the kernel needs " + std::to_string(sp) + " values, got " +
         std::to_string(w.kernel.size()));
  fill(w.stride, 1, "stride");
  fill(w.dilation, 1, "dilation");
  fill(w.pad_begin, 0, "pads");
  fill(w.pad_end, 0, "pads");
  return w;
}

int64_t Window::out_size(size_t i, int64_t in, bool ceil_mode) const {
  int64_t s = stride[i], ek = (kernel[i] - 1) * dilation[i] + 1;
  int64_t span = in + pad_begin[i] + pad_end[i] - ek;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad_begin[i]) --out;
  return out;
}

namespace {

std::vector<int64_t> spatial_sizes(Var* x, const char* what) {
  int r = Emitter::rank(x);
  std::vector<int64_t> in;
  for (int i = 2; i < r; ++i) {
    const Dim& d = x->type()->shape()[static_cast<size_t>(i)];
    if (!d->is_const()) fail(std::string(what) + " needs the spatial sizes to be known");
    in.push_back(d->value());
  }
  return in;
}

}  // namespace

Var* im2col(Emitter& e, Var* x, const Window& win) {
  auto in = spatial_sizes(x, "im2col");
  size_t sp = in.size();
  Window w = win.filled(sp);
  std::vector<int64_t> o(sp), axes(sp);
  int64_t L = 1, K = 1;
  for (size_t q = 0; q < sp; ++q) {
    o[q] = w.out_size(q, in[q], false);
    if (o[q] <= 0) fail("the kernel does not fit the padded input");
    axes[q] = static_cast<int64_t>(q) + 2;
    L *= o[q];
    K *= w.kernel[q];
  }
  x = e.pad_trailing(x, w.pad_begin, w.pad_end, 0);
  std::vector<Var*> taps;
  for (int64_t t = 0; t < K; ++t) {
    std::vector<int64_t> begin(sp);
    for (int64_t r = t, q = static_cast<int64_t>(sp) - 1; q >= 0; --q) {
      size_t u = static_cast<size_t>(q);
      begin[u] = (r % w.kernel[u]) * w.dilation[u];
      r /= w.kernel[u];
    }
    taps.push_back(e.strided(x, axes, begin, o, w.stride));
  }
  Var* y = taps.size() == 1 ? e.expand_dims(taps[0], {2}) : e.stack(taps, 2);  // [N, C, K, out...]
  const auto& sh = x->type()->shape();
  if (sh[0]->is_const() && sh[1]->is_const())
    return e.reshape(y, {sh[0]->value(), sh[1]->value() * K, L});
  // a symbolic batch / channel count: [N, C, K, out...] -> [N, C * K, L] keeping N
  std::vector<int64_t> shape{0, -1, L};
  return e.op(
      "reshape",
      {Builder::arg("x", y),
       Builder::arg("shape",
                    e.concat({e.op("slice_by_size",
                                   {Builder::arg("x", e.op("shape", {Builder::arg("x", x)})),
                                    Builder::arg("begin", Value::int_list({0})),
                                    Builder::arg("size", Value::int_list({1}))}),
                              e.ci({-1, L})},
                             0))});
}

namespace {

// A rank-1 int32 shape: x's leading `lead` dims (consts when known, else read at run time)
// followed by `tail`.
Var* leading_shape(Emitter& e, Var* x, int64_t lead, const std::vector<int64_t>& tail) {
  const auto& sh = x->type()->shape();
  std::vector<int64_t> known;
  for (int64_t i = 0; i < lead; ++i)
    if (sh[static_cast<size_t>(i)]->is_const())
      known.push_back(sh[static_cast<size_t>(i)]->value());
  if (static_cast<int64_t>(known.size()) == lead) {
    known.insert(known.end(), tail.begin(), tail.end());
    return e.ci(known);
  }
  Var* head = e.slice_axis(e.op("shape", {Builder::arg("x", x)}), 0, 0, lead);
  return tail.empty() ? head : e.concat({head, e.ci(tail)}, 0);
}

}  // namespace

Var* col2im(Emitter& e, Var* x, const std::vector<int64_t>& img, const Window& win) {
  if (!x->type()->has_rank() || x->type()->rank() != 3) fail("col2im needs a 3-D input");
  if (!x->type()->shape()[1]->is_const())
    fail("col2im needs the channel count of the input to be known");
  size_t sp = img.size();
  Window w = win.filled(sp);
  int64_t K = 1, P = 1, L = 1;
  std::vector<int64_t> nb(sp);
  for (size_t i = 0; i < sp; ++i) {
    K *= w.kernel[i];
    P *= img[i];
    nb[i] = w.out_size(i, img[i], false);
    L *= nb[i];
  }
  const auto& xsh = x->type()->shape();
  int64_t CK = xsh[1]->value();
  if (CK % K || (xsh[2]->is_const() && xsh[2]->value() != L))
    fail("the input's shape does not match the image and kernel shapes");
  int64_t Cc = CK / K;
  // where each input element lands in the flattened [C, image] output (C * P: dropped, in the pads)
  std::vector<int64_t> idx(static_cast<size_t>(CK * L));
  std::vector<int64_t> kd(sp), ld(sp);
  for (int64_t c = 0; c < Cc; ++c)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t l = 0; l < L; ++l) {
        int64_t kk = k, ll = l, flat = 0;
        bool inside = true;
        for (int64_t i = static_cast<int64_t>(sp) - 1; i >= 0; --i) {
          size_t u = static_cast<size_t>(i);
          kd[u] = kk % w.kernel[u];
          kk /= w.kernel[u];
          ld[u] = ll % nb[u];
          ll /= nb[u];
        }
        for (size_t i = 0; i < sp; ++i) {
          int64_t q = ld[i] * w.stride[i] + kd[i] * w.dilation[i] - w.pad_begin[i];
          inside = inside && q >= 0 && q < img[i];
          flat = flat * img[i] + q;
        }
        idx[static_cast<size_t>((c * K + k) * L + l)] = inside ? c * P + flat : Cc * P;
      }
  DataType dt = Emitter::dtype(x);
  Var* data;
  if (xsh[0]->is_const()) {
    int64_t N = xsh[0]->value();
    data = e.c(Value::from_doubles(
        dt, {N, Cc * P + 1}, std::vector<double>(static_cast<size_t>(N * (Cc * P + 1)), 0.0)));
  } else {
    // a batch known only at run time: zeros of [N, C * P + 1] filled at run time
    data = e.op("fill", {Builder::arg("shape", leading_shape(e, x, 1, {Cc * P + 1})),
                         Builder::arg("value", is_float(dt) ? Value::scalar_float(dt, 0)
                                                            : Value::scalar_int(dt, 0))});
  }
  Var* y =
      e.op("scatter", {Builder::arg("data", data),
                       Builder::arg("indices", Value::from_ints(DataType::Int32, {CK * L}, idx)),
                       Builder::arg("updates", e.reshape(x, {-1, CK * L})),
                       Builder::arg("axis", Value::scalar_int(DataType::Int32, 1)),
                       Builder::arg("mode", Value::scalar_string("add"))});
  y = e.slice_axis(y, 1, 0, Cc * P);
  std::vector<int64_t> shape = {-1, Cc};
  shape.insert(shape.end(), img.begin(), img.end());
  return e.reshape(y, shape);
}

namespace {

// The flat input position of kernel tap `tap` for every output (-1 outside the input), and the
// per-output tap count for averages.
void tap_positions(const Window& w, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                   const std::vector<int64_t>& tap, const PoolSpec& s, std::vector<int64_t>& flat,
                   std::vector<double>& count) {
  size_t sp = in.size();
  std::vector<int64_t> pos(sp);
  for (size_t o = 0; o < flat.size(); ++o) {
    bool inside = true, in_pads = true;
    for (int64_t r = static_cast<int64_t>(o), i = static_cast<int64_t>(sp) - 1; i >= 0; --i) {
      size_t u = static_cast<size_t>(i);
      int64_t oi = r % out[u];
      r /= out[u];
      int64_t p = oi * w.stride[u] + tap[u] * w.dilation[u] - w.pad_begin[u];
      pos[u] = p;
      inside = inside && p >= 0 && p < in[u];
      in_pads = in_pads && p >= -w.pad_begin[u] && p < in[u] + w.pad_end[u];
    }
    int64_t f = 0, mul = 1;
    if (s.index_order == IndexOrder::ColumnMajor) {
      for (size_t i = 0; i < sp; ++i) f += pos[i] * mul, mul *= in[i];
    } else {
      for (int64_t i = static_cast<int64_t>(sp) - 1; i >= 0; --i)
        f += pos[static_cast<size_t>(i)] * mul, mul *= in[static_cast<size_t>(i)];
    }
    flat[o] = inside ? f : -1;
    if (s.count_include_pad ? in_pads : inside) count[o] += 1;
  }
}

}  // namespace

Var* pool_by_taps(Emitter& e, Var* x, const PoolSpec& s, Var** indices) {
  auto in = spatial_sizes(x, "pooling by taps");
  size_t sp = in.size();
  Window w = s.window.filled(sp);
  std::vector<int64_t> out(sp);
  for (size_t i = 0; i < sp; ++i) {
    out[i] = w.out_size(i, in[i], s.ceil_mode);
    if (out[i] < 1) fail("the pooling window does not fit the padded input");
  }
  DataType dt = Emitter::dtype(x);
  // pad: begin pads, and at the end whatever the last window reaches past the input
  std::vector<int64_t> lo(sp), hi(sp);
  for (size_t i = 0; i < sp; ++i) {
    int64_t need = (out[i] - 1) * w.stride[i] + (w.kernel[i] - 1) * w.dilation[i] + 1;
    lo[i] = w.pad_begin[i];
    hi[i] = std::max<int64_t>(0, need - w.pad_begin[i] - in[i]);
  }
  double fillv = s.kind == PoolKind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
  Var* xp = x;
  if (std::any_of(lo.begin(), lo.end(), [](int64_t v) { return v != 0; }) ||
      std::any_of(hi.begin(), hi.end(), [](int64_t v) { return v != 0; })) {
    std::vector<int64_t> pad(4, 0);
    for (size_t i = 0; i < sp; ++i) pad.push_back(lo[i]), pad.push_back(hi[i]);
    xp = e.op("pad", {Builder::arg("x", x), Builder::arg("pad", Value::int_list(pad)),
                      Builder::arg("constant_val", Value::scalar_float(dt, fillv))});
  }
  int64_t taps = 1, out_count = 1, in_count = 1;
  for (auto k : w.kernel) taps *= k;
  for (auto o : out) out_count *= o;
  for (auto v : in) in_count *= v;
  std::vector<int64_t> out_shape = {1, 1}, axes;
  out_shape.insert(out_shape.end(), out.begin(), out.end());
  for (size_t i = 0; i < sp; ++i) axes.push_back(static_cast<int64_t>(i) + 2);
  Var* acc = nullptr;
  Var* idx = nullptr;
  std::vector<double> count(static_cast<size_t>(out_count), 0.0);
  std::vector<int64_t> flat(static_cast<size_t>(out_count));
  for (int64_t t = 0; t < taps; ++t) {
    std::vector<int64_t> tap(sp), begin(sp);
    for (int64_t r = t, i = static_cast<int64_t>(sp) - 1; i >= 0; --i) {
      size_t u = static_cast<size_t>(i);
      tap[u] = r % w.kernel[u];
      r /= w.kernel[u];
      begin[u] = tap[u] * w.dilation[u];
    }
    Var* sl = e.strided(xp, axes, begin, out, w.stride);
    tap_positions(w, in, out, tap, s, flat, count);
    if (!acc) {
      acc = sl;
      if (indices) idx = e.c(Value::from_ints(DataType::Int32, out_shape, flat));
    } else if (s.kind == PoolKind::Max) {
      if (indices)
        idx = e.sel(e.bin("greater", sl, acc),
                    e.c(Value::from_ints(DataType::Int32, out_shape, flat)), idx);
      acc = e.bin("maximum", acc, sl);
    } else {
      acc = e.bin("add", acc, sl);
    }
  }
  if (s.kind == PoolKind::Avg)
    acc = e.bin("real_div", acc, e.c(Value::from_doubles(dt, out_shape, count)));
  if (indices) {
    if (s.kind != PoolKind::Max) fail("only max pooling gives indices");
    if (s.index_order == IndexOrder::Plane) {
      *indices = idx;
    } else {
      // + (n * C + c) * prod(spatial)
      auto xs = Emitter::static_shape(x);
      if (!xs) fail("the indices need the input shape to be known");
      std::vector<int64_t> base(static_cast<size_t>((*xs)[0] * (*xs)[1]));
      for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<int64_t>(i) * in_count;
      std::vector<int64_t> bshape = {(*xs)[0], (*xs)[1]};
      for (size_t i = 0; i < sp; ++i) bshape.push_back(1);
      *indices = e.bin("add", idx, e.c(Value::from_ints(DataType::Int32, bshape, base)));
    }
  }
  return acc;
}

Var* max_unpool(Emitter& e, Var* x, Var* indices, const std::vector<int64_t>& out_spatial,
                UnpoolIndices kind) {
  int r = Emitter::rank(x);
  if (r < 3 || static_cast<size_t>(r) != out_spatial.size() + 2)
    fail("max_unpool needs an input [N, C, spatial...] with one output size per spatial dim");
  DataType dt = Emitter::dtype(x);
  int64_t plane = 1;
  for (int64_t v : out_spatial) plane *= v;
  Var* idx = e.cast(indices, DataType::Int32);
  if (kind == UnpoolIndices::Tensor) {
    auto xs = Emitter::need_static_shape(x, "max_unpool");
    std::vector<int64_t> shape = {xs[0], xs[1]};
    shape.insert(shape.end(), out_spatial.begin(), out_spatial.end());
    int64_t total = xs[0] * xs[1] * plane;
    Var* data = e.c(Value::from_doubles(is_float(dt) ? dt : DataType::Float32, {total},
                                        std::vector<double>(static_cast<size_t>(total), 0.0)));
    Var* upd = e.reshape(is_float(dt) ? x : e.cast(x, DataType::Float32), {-1});
    Var* y =
        e.op("scatter", {Builder::arg("data", data), Builder::arg("indices", e.reshape(idx, {-1})),
                         Builder::arg("updates", upd),
                         Builder::arg("axis", Value::scalar_int(DataType::Int32, 0)),
                         Builder::arg("mode", Value::scalar_string("update"))});
    y = e.reshape(y, shape);
    return is_float(dt) ? y : e.cast(y, dt);
  }
  // N and C may be known only at run time
  auto reshape = [&](Var* v, Var* shape) {
    return e.op("reshape", {Builder::arg("x", v), Builder::arg("shape", shape)});
  };
  Var* flat = reshape(x, leading_shape(e, x, 2, {-1}));
  Var* fi = reshape(idx, leading_shape(e, x, 2, {-1}));
  Var* zeros = e.op(
      "fill", {Builder::arg("shape", leading_shape(e, x, 2, {plane})),
               Builder::arg("value", dt == DataType::Int32 ? Value::scalar_int(DataType::Int32, 0)
                                                           : Value::scalar_float(dt, 0))});
  Var* y = e.op("scatter_along_axis", {Builder::arg("data", zeros), Builder::arg("indices", fi),
                                       Builder::arg("updates", flat),
                                       Builder::arg("axis", Value::scalar_int(DataType::Int32, 2)),
                                       Builder::arg("mode", Value::scalar_string("update"))});
  return reshape(y, leading_shape(e, x, 2, out_spatial));
}

}  // namespace compose
}  // namespace milkit

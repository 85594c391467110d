// Kernels of the normalization ops: batch_norm, instance_norm, l2_norm, layer_norm,
// local_response_norm. All compute in fp32 (fp16 programs are converted by the executor); means
// and variances accumulate in double, the per-element passes are contiguous float loops.
//
// - batch_norm: x [N, C, *D]; y = (x - mean[c]) * gamma[c] / sqrt(variance[c] + eps) + beta[c].
// - instance_norm: x [N, C, *D]; each (n, c) plane is normalized by its own mean and biased
//   variance, then scaled by gamma[c] and shifted by beta[c].
// - l2_norm: the last 3 dims of each batch (the dims before them) are divided by
//   sqrt(sum of their squares + eps) (coremltools' definition, the same in every opset).
// - layer_norm: normalizes over `axes` (any set, default all); gamma / beta have shape
//   x.shape[axes] (axes sorted). Biased variance, eps inside the square root (numpy reference).
// - local_response_norm: Core ML's definition (NeuralNetwork LRNLayerParams, which both Core ML
//   backends run): the channel axis is the third from the end (rank 3: [C, H, W]; rank 4:
//   [N, C, H, W], the same as torch's dim 1; leading dims are batch), y = x / (k + alpha / size *
//   sum(x_j^2))^beta over the channels j in [c - (size-1)//2, c + size//2] clipped to [0, C).
//   For odd sizes that is torch's window; for even sizes torch's window is one channel lower
//   ([c - size//2, c + (size-1)//2]); the window here is ONNX's / Caffe's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "../dispatch.h"
#include "kernels.h"
#include "milkit/exec/threads.h"

namespace milkit {

namespace {

constexpr int64_t kGrainElems = 32768;  // elements of work per parallel chunk

/// Rows per parallel chunk for rows of n elements.
int64_t row_grain(int64_t n) { return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, n)); }

#if defined(__GNUC__) && !defined(__clang__)  // clang: scalar loops (its vector ?: support varies)
#define MILKIT_NORM_VEC 1
/// 4 floats (GCC vector extension): float sums without -ffast-math are not
/// auto-vectorized, so the moments use explicit lanes.
typedef float v4f __attribute__((vector_size(16)));
inline v4f vload(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
constexpr int64_t kLaneBlock = 1024;  // float lanes are folded into a double every block
#endif

/// Sum of f(p[i]) over a contiguous run: float lanes per block, blocks summed in double.
/// `f` works on float and (when vectorized) on v4f.
template <typename F>
inline double lane_sum(const float* p, int64_t n, F f) {
  double s = 0;
  int64_t i = 0;
#ifdef MILKIT_NORM_VEC
  while (n - i >= 16) {
    v4f a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
    int64_t e = i + std::min<int64_t>(kLaneBlock, (n - i) / 16 * 16);
    for (; i < e; i += 16) {
      a0 += f(vload(p + i));
      a1 += f(vload(p + i + 4));
      a2 += f(vload(p + i + 8));
      a3 += f(vload(p + i + 12));
    }
    v4f v = (a0 + a1) + (a2 + a3);
    s += (static_cast<double>(v[0]) + v[1]) + (static_cast<double>(v[2]) + v[3]);
  }
#endif
  for (; i < n; ++i) s += f(p[i]);
  return s;
}

/// Sum of a contiguous float run.
inline double sum_run(const float* p, int64_t n) {
  return lane_sum(p, n, [](auto x) { return x; });
}

/// Sum of (p[i] - m)^2.
inline double sq_dev_run(const float* p, int64_t n, float m) {
  return lane_sum(p, n, [m](auto x) {
    auto d = x - m;
    return d * d;
  });
}

/// Sum of p[i]^2.
inline double sq_run(const float* p, int64_t n) {
  return lane_sum(p, n, [](auto x) { return x * x; });
}

/// Mean and 1/sqrt(biased variance + eps) of a contiguous row (two passes).
inline void row_moments(const float* p, int64_t n, double eps, float& mean, float& rstd) {
  mean = static_cast<float>(sum_run(p, n) / static_cast<double>(n));
  double v = sq_dev_run(p, n, mean) / static_cast<double>(n);
  rstd = static_cast<float>(1.0 / std::sqrt(v + eps));
}

/// A float parameter tensor of `n` elements, or nullptr when absent.
const float* param(KernelCtx& k, const char* name, int64_t n, const std::string& what) {
  if (!k.has(name)) return nullptr;
  const Tensor& t = k.in(name);
  if (t.dtype() != DataType::Float32) k.fail(std::string("'") + name + "' must be fp16 or fp32");
  if (t.numel() != n)
    k.fail(std::string("'") + name + "' has shape " + shape_str(t.shape()) + ", expected " + what);
  return t.data<float>();
}

const Tensor& float_x(KernelCtx& k) {
  const Tensor& x = k.in("x");
  if (x.dtype() != DataType::Float32)
    k.fail("x must be fp16 or fp32, got " + std::string(dtype_name(x.dtype())));
  return x;
}

/// N, C and the spatial size of an [N, C, *D] tensor.
void ncs(KernelCtx& k, const Tensor& x, int64_t& n, int64_t& c, int64_t& s) {
  if (x.rank() < 2) k.fail("x must have rank >= 2 ([N, C, *D]), got shape " + shape_str(x.shape()));
  n = x.dim(0);
  c = x.dim(1);
  s = 1;
  for (int d = 2; d < x.rank(); ++d) s *= x.dim(d);
}

// ---- batch_norm / instance_norm -----------------------------------------------------------------

void batch_norm(KernelCtx& k) {
  const Tensor& x = float_x(k);
  int64_t n, c, s;
  ncs(k, x, n, c, s);
  std::string want = "(" + std::to_string(c) + ",) (C = x.shape[1])";
  const float* mean = param(k, "mean", c, want);
  const float* var = param(k, "variance", c, want);
  if (!mean || !var) k.fail("mean and variance are required");
  const float* gamma = param(k, "gamma", c, want);
  const float* beta = param(k, "beta", c, want);
  double eps = k.float_or("epsilon", 1e-5);
  std::vector<float> scale(static_cast<size_t>(c)), shift(static_cast<size_t>(c));
  for (int64_t i = 0; i < c; ++i) {
    scale[i] = static_cast<float>((gamma ? gamma[i] : 1.0) / std::sqrt(static_cast<double>(var[i]) + eps));
    shift[i] = beta ? beta[i] : 0.0f;
  }
  Tensor& out = k.alloc(0, x.shape());
  const float* xp = x.data<float>();
  float* op = out.mutable_data<float>();
  parallel_for(n * c, row_grain(s), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t ch = r % c;
      const float m = mean[ch], a = scale[ch], sh = shift[ch];
      const float* p = xp + r * s;
      float* q = op + r * s;
      for (int64_t i = 0; i < s; ++i) q[i] = (p[i] - m) * a + sh;
    }
  });
}

void instance_norm(KernelCtx& k) {
  const Tensor& x = float_x(k);
  int64_t n, c, s;
  ncs(k, x, n, c, s);
  std::string want = "(" + std::to_string(c) + ",) (C = x.shape[1])";
  const float* gamma = param(k, "gamma", c, want);
  const float* beta = param(k, "beta", c, want);
  double eps = k.float_or("epsilon", 1e-5);
  Tensor& out = k.alloc(0, x.shape());
  if (out.numel() == 0) return;
  const float* xp = x.data<float>();
  float* op = out.mutable_data<float>();
  parallel_for(n * c, row_grain(3 * s), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t ch = r % c;
      const float* p = xp + r * s;
      float* q = op + r * s;
      float m, rs;
      row_moments(p, s, eps, m, rs);
      const float a = rs * (gamma ? gamma[ch] : 1.0f), sh = beta ? beta[ch] : 0.0f;
      for (int64_t i = 0; i < s; ++i) q[i] = (p[i] - m) * a + sh;
    }
  });
}

// ---- l2_norm ------------------------------------------------------------------------------------

void l2_norm(KernelCtx& k) {
  const Tensor& x = float_x(k);
  if (x.rank() < 3) k.fail("x must have rank >= 3, got shape " + shape_str(x.shape()));
  int64_t d = x.dim(-1) * x.dim(-2) * x.dim(-3);
  double eps = k.float_or("epsilon", 1e-6);
  Tensor& out = k.alloc(0, x.shape());
  if (out.numel() == 0) return;
  int64_t rows = x.numel() / d;
  const float* xp = x.data<float>();
  float* op = out.mutable_data<float>();
  parallel_for(rows, row_grain(2 * d), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* p = xp + r * d;
      float* q = op + r * d;
      double ss = sq_run(p, d);
      const float inv = static_cast<float>(1.0 / std::sqrt(ss + eps));
      for (int64_t j = 0; j < d; ++j) q[j] = p[j] * inv;
    }
  });
}

// ---- layer_norm ---------------------------------------------------------------------------------

void layer_norm(KernelCtx& k) {
  const Tensor& x = float_x(k);
  int rank = x.rank();
  std::vector<bool> red(static_cast<size_t>(rank), !k.has("axes"));
  if (k.has("axes"))
    for (int64_t a : k.ints("axes")) red[k.axis(a, rank)] = true;  // a set: repeats are harmless
  std::vector<int64_t> nshape;  // x.shape[axes]
  for (int d = 0; d < rank; ++d)
    if (red[d]) nshape.push_back(x.dim(d));
  int64_t dn = shape_numel(nshape);
  const float* gamma = param(k, "gamma", dn, shape_str(nshape) + " (x.shape[axes])");
  const float* beta = param(k, "beta", dn, shape_str(nshape) + " (x.shape[axes])");
  double eps = k.float_or("epsilon", 1e-5);
  Tensor& out = k.alloc(0, x.shape());
  if (out.numel() == 0) return;
  const float* xp = x.data<float>();
  float* op = out.mutable_data<float>();
  // normalized dims trailing: contiguous rows of dn elements (the transformer case)
  bool trailing = true;
  for (int d = rank - static_cast<int>(nshape.size()); d < rank; ++d) trailing = trailing && red[d];
  if (trailing) {
    int64_t rows = x.numel() / dn;
    parallel_for(rows, row_grain(3 * dn), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float* p = xp + r * dn;
        float* q = op + r * dn;
        float m, rs;
        row_moments(p, dn, eps, m, rs);
        if (gamma && beta) {
          for (int64_t i = 0; i < dn; ++i) q[i] = (p[i] - m) * rs * gamma[i] + beta[i];
        } else if (gamma) {
          for (int64_t i = 0; i < dn; ++i) q[i] = (p[i] - m) * rs * gamma[i];
        } else if (beta) {
          for (int64_t i = 0; i < dn; ++i) q[i] = (p[i] - m) * rs + beta[i];
        } else {
          for (int64_t i = 0; i < dn; ++i) q[i] = (p[i] - m) * rs;
        }
      }
    });
    return;
  }
  // general axes: offsets of the normalized elements (row-major over x.shape[axes], the order
  // of gamma / beta) and of each group's first element
  std::vector<int64_t> st = exec::strides_of(x.shape());
  std::vector<int64_t> offs(static_cast<size_t>(dn), 0), kdims, kstr, rdims, rstr;
  for (int d = 0; d < rank; ++d) {
    (red[d] ? rdims : kdims).push_back(x.dim(d));
    (red[d] ? rstr : kstr).push_back(st[d]);
  }
  {
    std::vector<int64_t> ctr(rdims.size(), 0);
    int64_t cur = 0;
    for (int64_t i = 0; i < dn; ++i) {
      offs[i] = cur;
      for (int d = static_cast<int>(rdims.size()) - 1; d >= 0; --d) {
        cur += rstr[d];
        if (++ctr[d] < rdims[d]) break;
        cur -= rstr[d] * rdims[d];
        ctr[d] = 0;
      }
    }
  }
  int64_t groups = x.numel() / dn;
  parallel_for(groups, row_grain(3 * dn), [&](int64_t b, int64_t e) {
    std::vector<float> buf(static_cast<size_t>(dn));
    for (int64_t g = b; g < e; ++g) {
      int64_t base = 0, u = g;
      for (int d = static_cast<int>(kdims.size()) - 1; d >= 0; --d) {
        base += (u % kdims[d]) * kstr[d];
        u /= kdims[d];
      }
      for (int64_t i = 0; i < dn; ++i) buf[i] = xp[base + offs[i]];
      float m, rs;
      row_moments(buf.data(), dn, eps, m, rs);
      for (int64_t i = 0; i < dn; ++i) {
        float v = (buf[i] - m) * rs;
        if (gamma) v *= gamma[i];
        if (beta) v += beta[i];
        op[base + offs[i]] = v;
      }
    }
  });
}

// ---- local_response_norm ------------------------------------------------------------------------

void local_response_norm(KernelCtx& k) {
  const Tensor& x = float_x(k);
  int rank = x.rank();
  if (rank < 3) k.fail("x must have rank >= 3 ([*B, C, H, W]), got shape " + shape_str(x.shape()));
  int64_t size = k.int_("size");
  if (size < 1) k.fail("size must be positive, got " + std::to_string(size));
  double alpha = k.float_or("alpha", 1e-4), beta = k.float_or("beta", 0.75), kk = k.float_or("k", 1.0);
  int64_t c = x.dim(-3), s = x.dim(-1) * x.dim(-2);
  Tensor& out = k.alloc(0, x.shape());
  if (out.numel() == 0) return;
  int64_t batches = x.numel() / (c * s);
  int64_t lo = (size - 1) / 2, hi = size / 2;  // window [ch - lo, ch + hi]
  const float* xp = x.data<float>();
  float* op = out.mutable_data<float>();
  const float scale = static_cast<float>(alpha / static_cast<double>(size));
  const float kf = static_cast<float>(kk), nb = static_cast<float>(-beta);
  const bool b75 = beta == 0.75;
  parallel_for(batches * c, row_grain(s * std::min(size, c)), [&](int64_t b, int64_t e) {
    std::vector<float> acc(static_cast<size_t>(s));
    for (int64_t r = b; r < e; ++r) {
      int64_t bi = r / c, ch = r % c;
      const float* plane = xp + bi * c * s;
      std::fill(acc.begin(), acc.end(), 0.0f);
      int64_t c0 = std::max<int64_t>(0, ch - lo), c1 = std::min<int64_t>(c - 1, ch + hi);
      for (int64_t j = c0; j <= c1; ++j) {
        const float* p = plane + j * s;
        for (int64_t i = 0; i < s; ++i) acc[i] += p[i] * p[i];
      }
      const float* p = plane + ch * s;
      float* q = op + r * s;
      if (b75) {  // d^-0.75 = 1 / sqrt(d * sqrt(d)): no pow
        for (int64_t i = 0; i < s; ++i) {
          float d = kf + scale * acc[i];
          q[i] = p[i] / std::sqrt(d * std::sqrt(d));
        }
      } else {
        for (int64_t i = 0; i < s; ++i) q[i] = p[i] * std::pow(kf + scale * acc[i], nb);
      }
    }
  });
}

}  // namespace

void register_normalization_kernels(KernelRegistry& r) {
  r.add("batch_norm", {batch_norm});
  r.add("instance_norm", {instance_norm});
  r.add("l2_norm", {l2_norm});
  r.add("layer_norm", {layer_norm});
  r.add("local_response_norm", {local_response_norm});
}

}  // namespace milkit

// Kernels of the linear ops: linear (x @ weight.T + bias), matmul (numpy matmul: broadcast batch
// dims, rank-1 operands promoted and their inserted dim dropped, transpose_x / transpose_y) and
// einsum (the two batched equations MIL accepts). Float products of a few rows are matrix-vector
// products (gemv.cpp), more go to milkit's GEMM (sgemm.cpp; OpenBLAS for a transposed left
// operand, fp64, or MILKIT_GEMM=blas); a batch folds into M when the right operand has no batch,
// tiny batched products run in a plain loop across threads. Integer products wrap on overflow
// (numpy's int32 matmul). When iOS17's mixed dtypes give an integer output from a float operand,
// the product is computed in double and converted with numpy's astype rules (coremltools' value
// inference: np.matmul, then the output dtype).
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <type_traits>
#include <vector>

#include "../dispatch.h"
#include "../packed_weight.h"
#include "../weight_cache.h"
#include "gemm.h"
#include "gemv.h"
#include "kernels.h"
#include "milkit/exec/threads.h"
#include "sgemm.h"

namespace milkit {

namespace {

/// One matrix product C[M, N] = op(A)[M, K] * op(B)[K, N]; A is stored [K, M] when ta, B is
/// stored [N, K] when tb; lda / ldb / ldc are the row strides of the stored matrices.
struct GemmShape {
  int64_t M = 0, N = 0, K = 0;
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  /// C is an fp16 program's output: a product that rounds it to fp16 values as it stores it
  /// says so by returning true (the kernel then calls set_rounded)
  bool round = false;
};

/// Products of at most this many multiply-adds run in a plain loop (a BLAS call costs more).
constexpr int64_t kSmallGemm = 24 * 24 * 24;

bool fits_int(const GemmShape& g) {
  return g.M <= INT_MAX && g.N <= INT_MAX && g.K <= INT_MAX && g.lda <= INT_MAX &&
         g.ldb <= INT_MAX && g.ldc <= INT_MAX;
}

/// Whether a product goes to the matrix-vector kernels: a few rows of A, not transposed, and B's
/// rows contiguous (the layout of a packed weight).
bool gemv_form(const GemmShape& g) {
  return g.M <= exec::kGemvRows && !g.ta && g.K > 0 && g.ldb == (g.tb ? g.K : g.N);
}

/// Whether a float product goes to milkit's GEMM (sgemm_panels) in blas_gemm and packed_gemm.
bool panel_form(const GemmShape& g) {
  return !g.ta && g.K > 0 && !gemv_form(g) && exec::sgemm_panels_enabled();
}

/// Rows of C set to the bias before a product accumulates into it (the kernels other than
/// milkit's GEMM, which starts its sums from the bias).
template <typename T>
void prefill_bias(const GemmShape& g, const T* bias, T* c) {
  parallel_for(g.M, std::max<int64_t>(1, 65536 / std::max<int64_t>(g.N, 1)),
               [&](int64_t s, int64_t e) {
                 for (int64_t m = s; m < e; ++m) std::copy(bias, bias + g.N, c + m * g.ldc);
               });
}

/// C = A * B + (bias[n] on each row, or beta * C: beta 0 or 1, 0 with a bias); K = 0 leaves the
/// bias or beta * C. True when C was rounded to fp16 values (g.round).
template <typename T>
bool blas_gemm(const GemmShape& g, const T* A, const T* B, T beta, T* C, const T* bias = nullptr) {
  if (g.M == 0 || g.N == 0) return false;
  bool panels = false;
  if constexpr (std::is_same_v<T, float>) panels = panel_form(g);
  if (bias && !panels) {  // milkit's GEMM starts its sums from the bias; the others add to it
    prefill_bias(g, bias, C);
    beta = T(1);
    bias = nullptr;
  }
  if (g.K == 0) {
    if (beta == T(0))
      for (int64_t m = 0; m < g.M; ++m) std::fill(C + m * g.ldc, C + m * g.ldc + g.N, T(0));
    return false;
  }
  if constexpr (std::is_same_v<T, float>) {
    // a few rows: the matrix-vector products that packed weights share (same sums)
    if (gemv_form(g)) {
      exec::GemvWeight w;
      w.dense = B;
      w.ld = g.ldb;
      if (g.tb)
        exec::gemv_nk(g.M, g.N, g.K, A, g.lda, w, beta != 0.0f, C, g.ldc);
      else
        exec::gemv_kn(g.M, g.N, g.K, A, g.lda, w, beta != 0.0f, C, g.ldc);
      return false;
    }
    // more rows, A not transposed: the interpreter's own product (B packed per call)
    if (panels) {
      exec::GemmRhs rhs;
      rhs.f32 = B;
      rhs.nk = g.tb;
      rhs.ld = std::max<int64_t>(g.ldb, g.tb ? g.K : g.N);
      exec::sgemm_panels(g.M, g.N, g.K, A, std::max<int64_t>(g.lda, g.K), rhs, bias, beta != 0.0f,
                         C, g.ldc, g.round);
      return g.round;
    }
    // a single row or column is a matrix-vector product (sgemv streams the matrix once)
    if (g.M == 1 && g.ldb <= INT_MAX) {
      int inca = g.ta ? static_cast<int>(g.lda) : 1;
      if (g.tb)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(g.N), static_cast<int>(g.K), 1.0f,
                    B, static_cast<int>(std::max<int64_t>(g.ldb, g.K)), A, inca, beta, C, 1);
      else
        cblas_sgemv(CblasRowMajor, CblasTrans, static_cast<int>(g.K), static_cast<int>(g.N), 1.0f,
                    B, static_cast<int>(std::max<int64_t>(g.ldb, g.N)), A, inca, beta, C, 1);
      return false;
    }
    if (g.N == 1) {
      int incb = g.tb ? 1 : static_cast<int>(g.ldb), incc = static_cast<int>(g.ldc);
      if (g.ta)
        cblas_sgemv(CblasRowMajor, CblasTrans, static_cast<int>(g.K), static_cast<int>(g.M), 1.0f,
                    A, static_cast<int>(std::max<int64_t>(g.lda, g.M)), B, incb, beta, C, incc);
      else
        cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(g.M), static_cast<int>(g.K), 1.0f,
                    A, static_cast<int>(std::max<int64_t>(g.lda, g.K)), B, incb, beta, C, incc);
      return false;
    }
  }
  auto ta = g.ta ? CblasTrans : CblasNoTrans;
  auto tb = g.tb ? CblasTrans : CblasNoTrans;
  // BLAS rejects leading dims below the stored row length even when that dim is 1 or unused
  int lda = static_cast<int>(std::max<int64_t>(g.lda, g.ta ? g.M : g.K));
  int ldb = static_cast<int>(std::max<int64_t>(g.ldb, g.tb ? g.K : g.N));
  int ldc = static_cast<int>(std::max<int64_t>(g.ldc, g.N));
  if constexpr (std::is_same_v<T, float>)
    exec::parallel_sgemm(g.ta, g.tb, g.M, g.N, g.K, A, lda, B, ldb, beta, C, ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(g.M), static_cast<int>(g.N),
                static_cast<int>(g.K), 1.0, A, lda, B, ldb, beta, C, ldc);
  return false;
}

/// The accumulator of a plain-loop product: the type itself for floats and bool, the unsigned
/// type for integers (wrapping arithmetic without signed-overflow UB).
template <typename T, typename = void>
struct AccOf {
  using type = T;
};
template <typename T>
struct AccOf<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  using type = std::make_unsigned_t<T>;
};

/// a * b wrapping in the accumulator type (unsigned types narrower than int would promote to
/// int and could overflow it, so they multiply as uint32).
template <typename Acc>
Acc mul_acc(Acc a, Acc b) {
  if constexpr (std::is_integral_v<Acc> && sizeof(Acc) < sizeof(unsigned)) {
    return static_cast<Acc>(static_cast<unsigned>(a) * static_cast<unsigned>(b));
  } else {
    return a * b;
  }
}

/// Row m of a product in a plain loop: C[m, :] = sum_k A(m, k) * B(k, :). Integers wrap.
template <typename T>
void loop_gemm_row(const GemmShape& g, int64_t m, const T* A, const T* B, T* crow) {
  using Acc = typename AccOf<T>::type;
  const int64_t sam = g.ta ? 1 : g.lda, sak = g.ta ? g.lda : 1;
  const T* arow = A + m * sam;
  if (!g.tb) {
    // crow += a(m, k) * B[k, :], contiguous over n
    Acc* acc = reinterpret_cast<Acc*>(crow);
    std::fill(acc, acc + g.N, Acc(0));
    for (int64_t k = 0; k < g.K; ++k) {
      const Acc a = static_cast<Acc>(arow[k * sak]);
      const T* brow = B + k * g.ldb;
      if constexpr (std::is_same_v<T, bool>) {
        if (a)
          for (int64_t n = 0; n < g.N; ++n) acc[n] = acc[n] || brow[n];
      } else {
        for (int64_t n = 0; n < g.N; ++n) acc[n] += mul_acc<Acc>(a, static_cast<Acc>(brow[n]));
      }
    }
  } else {
    // crow[n] = dot(A(m, :), B[n, :])
    for (int64_t n = 0; n < g.N; ++n) {
      const T* brow = B + n * g.ldb;
      Acc s = 0;
      if constexpr (std::is_same_v<T, bool>) {
        for (int64_t k = 0; k < g.K && !s; ++k) s = arow[k * sak] && brow[k];
      } else if constexpr (std::is_floating_point_v<T>) {
        if (sak == 1) {
          // 8 partial sums: the compiler vectorizes them (a single float sum cannot reassociate)
          T part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          int64_t k = 0;
          for (; k + 8 <= g.K; k += 8)
            for (int j = 0; j < 8; ++j) part[j] += arow[k + j] * brow[k + j];
          for (; k < g.K; ++k) s += arow[k] * brow[k];
          s += ((part[0] + part[4]) + (part[1] + part[5])) +
               ((part[2] + part[6]) + (part[3] + part[7]));
        } else {
          for (int64_t k = 0; k < g.K; ++k) s += arow[k * sak] * brow[k];
        }
      } else {
        for (int64_t k = 0; k < g.K; ++k)
          s += mul_acc<Acc>(static_cast<Acc>(arow[k * sak]), static_cast<Acc>(brow[k]));
      }
      crow[n] = static_cast<T>(s);
    }
  }
}

/// nb products of the same shape: product b reads A + aoff[b], B + boff[b] and writes
/// C + b * cstride. Floats use BLAS unless the products are tiny; other types loop.
template <typename T>
void batched_gemm(const GemmShape& g, int64_t nb, const T* A, const std::vector<int64_t>& aoff,
                  const T* B, const std::vector<int64_t>& boff, T* C, int64_t cstride) {
  if (nb == 0 || g.M == 0 || g.N == 0) return;
  constexpr bool blas = std::is_same_v<T, float> || std::is_same_v<T, double>;
  if (blas && fits_int(g) && (nb == 1 || g.M * g.N * g.K > kSmallGemm)) {
    if constexpr (std::is_same_v<T, float>) {
      if (nb > 1 && nb >= num_threads() && !g.ta && exec::sgemm_panels_enabled()) {
        // at least a product per thread (attention's heads): whole products across the threads,
        // each on one (its own parallel loop runs inline), not each product split in turn
        parallel_for(nb, 1, [&](int64_t s, int64_t e) {
          for (int64_t b = s; b < e; ++b)
            blas_gemm<T>(g, A + aoff[b], B + boff[b], T(0), C + b * cstride);
        });
        return;
      }
    }
    if constexpr (blas)
      for (int64_t b = 0; b < nb; ++b)
        blas_gemm<T>(g, A + aoff[b], B + boff[b], T(0), C + b * cstride);
    return;
  }
  // one task per output row
  const int64_t work = std::max<int64_t>(1, g.N * std::max<int64_t>(g.K, 1));
  parallel_for(nb * g.M, std::max<int64_t>(1, 32768 / work), [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      int64_t b = i / g.M, m = i % g.M;
      loop_gemm_row<T>(g, m, A + aoff[b], B + boff[b], C + b * cstride + m * g.ldc);
    }
  });
}

/// Offsets (in elements, `mat` per matrix) of each output batch index into an operand whose
/// batch dims `in` broadcast to `out`.
std::vector<int64_t> batch_offsets(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                                   int64_t mat) {
  std::vector<int64_t> st = exec::broadcast_strides(in, out);
  int64_t nb = 1;
  for (int64_t d : out) nb *= d;
  std::vector<int64_t> r(static_cast<size_t>(nb));
  std::vector<int64_t> ctr(out.size(), 0);
  int64_t off = 0;
  for (int64_t b = 0; b < nb; ++b) {
    r[static_cast<size_t>(b)] = off * mat;
    for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
      off += st[d];
      if (++ctr[d] < out[d]) break;
      off -= st[d] * out[d];
      ctr[d] = 0;
    }
  }
  return r;
}

/// The compute dtype of a product whose operands are `a` and `b` and whose output is `out`:
/// out's dtype when every dtype matches, fp32 for a float output, fp64 for an integer output
/// from a float operand (converted to out afterwards).
DataType product_dtype(DataType a, DataType b, DataType out) {
  if (a == out && b == out) return out;
  if (is_float(out)) return DataType::Float32;
  if (is_float(a) || is_float(b)) return DataType::Float64;
  return out;
}

/// Allocates output 0 in `dt` when it differs from the output dtype (set back with finish_out).
Tensor& alloc_out(KernelCtx& k, DataType dt, const std::vector<int64_t>& shape, Tensor& tmp) {
  if (dt == k.out_dtype(0)) return k.alloc(0, shape);
  tmp = Tensor::empty(dt, shape);
  return tmp;
}

void finish_out(KernelCtx& k, const Tensor& tmp) {
  if (tmp.defined()) k.set(0, cast_tensor(tmp, k.out_dtype(0)));
}

// ------------------------------------------------------------------------------------------
// products with a packed weight

/// Products of at least this many rows over a packed or in-place weight decode it panel by panel
/// of kPanelCols output columns and multiply each panel, instead of widening the weight whole
/// through the weight cache: decoding costs little next to 2 * rows flops per weight element, and
/// an LLM's prefill would otherwise keep an fp32 copy of every weight it cycles through.
constexpr int64_t kPanelGemmRows = 16;
constexpr int64_t kPanelCols = 128;

/// C = A * B (+ beta * C) by panels of B's columns decoded in turn: the same BLAS products on
/// the same values, so the same sums as over B widened whole (parallel_sgemm splits N too).
void panel_gemm(const GemmShape& g, const float* A, const PackedWeight& w, float beta, float* C) {
  const int64_t panels = (g.N + kPanelCols - 1) / kPanelCols;
  parallel_for(panels, 1, [&](int64_t s, int64_t e) {
    thread_local std::vector<float> buf;
    if (static_cast<int64_t>(buf.size()) < kPanelCols * g.K)
      buf.resize(static_cast<size_t>(kPanelCols * g.K));
    float* p = buf.data();
    for (int64_t q = s; q < e; ++q) {
      const int64_t n0 = q * kPanelCols, nb = std::min(kPanelCols, g.N - n0);
      if (g.tb)
        w.decode(n0 * g.K, nb * g.K, p);  // rows n0.. of B stored [N, K]
      else
        for (int64_t k = 0; k < g.K; ++k) w.decode(k * g.N + n0, nb, p + k * nb);
      cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                  static_cast<int>(g.M), static_cast<int>(nb), static_cast<int>(g.K), 1.0f, A,
                  static_cast<int>(std::max<int64_t>(g.lda, g.ta ? g.M : g.K)), p,
                  static_cast<int>(g.tb ? g.K : nb), beta, C + n0, static_cast<int>(g.ldc));
    }
  });
}

/// C[M, N] = A[M, K] * B (+ bias[n] on each row) with B packed, stored [N, K] (g.tb) or [K, N].
/// A few rows (decode) read B's packed bytes in the matrix-vector kernels; more go to milkit's
/// GEMM, which widens or decodes B while packing its panels. Without it (MILKIT_GEMM=blas), 16 rows
/// or more decode B panel by panel (panel_gemm) and 5-15 rows make the BLAS calls of B widened to
/// fp32, from the weight cache. True when C was rounded to fp16 values (g.round).
bool packed_gemm(const GemmShape& g, const float* A, const PackedWeight& w, const float* bias,
                 float* C) {
  float beta = 0.0f;
  if (bias && !panel_form(g)) {  // milkit's GEMM starts its sums from the bias; the others add
    prefill_bias(g, bias, C);
    beta = 1.0f;
    bias = nullptr;
  }
  if (gemv_form(g)) {
    exec::GemvWeight gw;
    gw.packed = &w;
    if (g.tb)
      exec::gemv_nk(g.M, g.N, g.K, A, g.lda, gw, beta != 0.0f, C, g.ldc);
    else
      exec::gemv_kn(g.M, g.N, g.K, A, g.lda, gw, beta != 0.0f, C, g.ldc);
    return false;
  }
  if (panel_form(g)) {
    // fp16 widened, other packed forms decoded while each panel is packed: the sums of the fp32
    // copy, without the copy
    const RowForm rf = w.row_form();
    exec::GemmRhs rhs;
    if (rf.kind == RowForm::Kind::Half)
      rhs.f16 = rf.half;
    else
      rhs.packed = &w;
    rhs.nk = g.tb;
    rhs.ld = g.tb ? g.K : g.N;
    exec::sgemm_panels(g.M, g.N, g.K, A, std::max<int64_t>(g.lda, g.K), rhs, bias, false, C, g.ldc,
                       g.round);
    return g.round;
  }
  if (g.M >= kPanelGemmRows) {
    panel_gemm(g, A, w, beta, C);
    return false;
  }
  const Tensor wide = exec::widened(w);
  return blas_gemm<float>(g, A, wide.data<float>(), beta, C);
}

/// matmul of fp32 x [..., M, K] by a packed rank-2 y (x's batch folds into M); false for the
/// forms it does not take (the kernel then decompresses y whole).
bool matmul_packed(KernelCtx& k, const PackedWeight& w) {
  const Tensor& x = k.in("x");
  const bool tx = k.bool_or("transpose_x", false), ty = k.bool_or("transpose_y", false);
  if (x.dtype() != DataType::Float32 || k.out_dtype(0) != DataType::Float32 || tx || x.rank() < 2 ||
      w.shape().size() != 2)
    return false;
  GemmShape g;
  g.K = x.dim(-1);
  g.N = ty ? w.shape()[0] : w.shape()[1];
  if ((ty ? w.shape()[1] : w.shape()[0]) != g.K || g.K == 0 || g.N == 0) return false;
  g.M = x.numel() / g.K;
  g.tb = ty;
  g.lda = g.K;
  g.ldb = ty ? g.K : g.N;
  g.ldc = g.N;
  if (!fits_int(g)) return false;
  std::vector<int64_t> oshape = x.shape();
  oshape.back() = g.N;
  Tensor& out = k.alloc(0, oshape);
  g.round = k.rounds_output();
  if (g.M && packed_gemm(g, x.data<float>(), w, nullptr, out.mutable_data<float>()))
    k.set_rounded();
  return true;
}

/// linear of fp32 x by a packed weight [D_out, D_in]; false for the forms it does not take.
bool linear_packed(KernelCtx& k, const PackedWeight& w) {
  const Tensor& x = k.in("x");
  if (x.dtype() != DataType::Float32 || k.out_dtype(0) != DataType::Float32 || x.rank() < 1 ||
      w.shape().size() != 2)
    return false;
  const int64_t din = x.dim(-1), dout = w.shape()[0];
  if (w.shape()[1] != din || din == 0 || dout == 0) return false;
  const Tensor* b0 = k.has("bias") ? &k.in("bias") : nullptr;
  if (b0 && (b0->dtype() != DataType::Float32 || b0->numel() != dout)) return false;
  GemmShape g;
  g.M = x.numel() / din;
  g.N = dout;
  g.K = din;
  g.tb = true;
  g.lda = g.ldb = din;
  g.ldc = dout;
  if (!fits_int(g)) return false;
  std::vector<int64_t> oshape = x.shape();
  oshape.back() = dout;
  float* c = k.alloc(0, oshape).mutable_data<float>();
  const float* bias = b0 ? b0->data<float>() : nullptr;
  bool any_bias = false;
  for (int64_t j = 0; bias && j < dout && !any_bias; ++j) any_bias = bias[j] != 0.0f;
  g.round = k.rounds_output();
  if (g.M && packed_gemm(g, x.data<float>(), w, any_bias ? bias : nullptr, c)) k.set_rounded();
  return true;
}

// ------------------------------------------------------------------------------------------
// matmul

void matmul_kernel(KernelCtx& k) {
  const PackedWeight* pw = k.packed("y");
  if (pw && matmul_packed(k, *pw)) return;
  const Tensor& x0 = k.in("x");
  Tensor ykeep;  // a packed y, decompressed for this run only
  const Tensor& y0 = weight_tensor(k, "y", ykeep);
  bool tx = k.bool_or("transpose_x", false), ty = k.bool_or("transpose_y", false);
  if (x0.rank() < 1 || y0.rank() < 1)
    k.fail("x and y must have rank >= 1, got " + x0.describe() + " and " + y0.describe());
  if (x0.rank() == 1 && tx) k.fail("x is rank 1, but transpose_x is True");
  if (y0.rank() == 1 && ty) k.fail("y is rank 1, but transpose_y is True");
  std::vector<int64_t> xs = x0.shape(), ys = y0.shape();
  const bool x1 = xs.size() == 1, y1 = ys.size() == 1;
  if (x1) xs.insert(xs.begin(), 1);
  if (y1) ys.push_back(1);
  const size_t xr = xs.size(), yr = ys.size();
  GemmShape g;
  g.ta = tx;
  g.tb = ty;
  g.M = tx ? xs[xr - 1] : xs[xr - 2];
  g.K = tx ? xs[xr - 2] : xs[xr - 1];
  int64_t ky = ty ? ys[yr - 1] : ys[yr - 2];
  g.N = ty ? ys[yr - 2] : ys[yr - 1];
  if (g.K != ky)
    k.fail("x " + x0.describe() + (tx ? " (transposed)" : "") + " and y " + y0.describe() +
           (ty ? " (transposed)" : "") + " cannot be multiplied: the inner dims differ (" +
           std::to_string(g.K) + " vs " + std::to_string(ky) + ")");
  g.lda = xs[xr - 1];
  g.ldb = ys[yr - 1];
  g.ldc = g.N;
  std::vector<int64_t> xb(xs.begin(), xs.end() - 2), yb(ys.begin(), ys.end() - 2), ob;
  try {
    ob = exec::broadcast_shape(xb, yb);
  } catch (const ValueError& e) {
    k.fail(std::string("batch dims: ") + e.what());
  }
  std::vector<int64_t> oshape = ob;
  if (!x1) oshape.push_back(g.M);
  if (!y1) oshape.push_back(g.N);
  int64_t nb = 1;
  for (int64_t d : ob) nb *= d;
  int64_t ynb = 1;
  for (int64_t d : yb) ynb *= d;

  DataType cdt = product_dtype(x0.dtype(), y0.dtype(), k.out_dtype(0));
  Tensor xc = cast_tensor(x0, cdt), yc = cast_tensor(y0, cdt), tmp;
  Tensor& out = alloc_out(k, cdt, oshape, tmp);
  exec::dispatch_compute(cdt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, exec::half>) {
      k.fail("fp16 reaches the kernel unconverted");
    } else {
      const T* a = xc.template data<T>();
      const T* b = yc.template data<T>();
      T* c = out.template mutable_data<T>();
      if (ynb == 1 && !tx && nb > 1) {
        // y has no batch: fold x's batch into M (x's batch dims are the output's)
        GemmShape f = g;
        f.M = g.M * nb;
        batched_gemm<T>(f, 1, a, {0}, b, {0}, c, 0);
        return;
      }
      std::vector<int64_t> aoff = batch_offsets(xb, ob, g.M * g.K),
                           boff = batch_offsets(yb, ob, g.K * g.N);
      batched_gemm<T>(g, nb, a, aoff, b, boff, c, g.M * g.N);
    }
  });
  finish_out(k, tmp);
}

// ------------------------------------------------------------------------------------------
// linear

void linear_kernel(KernelCtx& k) {
  const PackedWeight* pw = k.packed("weight");
  if (pw && linear_packed(k, *pw)) return;
  const Tensor& x0 = k.in("x");
  Tensor wkeep;  // a packed weight, decompressed for this run only
  const Tensor& w0 = weight_tensor(k, "weight", wkeep);
  if (x0.rank() < 1) k.fail("x must have rank >= 1, got a scalar");
  if (w0.rank() != 2) k.fail("weight must have rank 2, got " + w0.describe());
  const int64_t din = x0.dim(-1), dout = w0.dim(0);
  if (w0.dim(1) != din)
    k.fail("the last dim of x " + x0.describe() + " differs from weight's " + w0.describe());
  const Tensor* b0 = k.has("bias") ? &k.in("bias") : nullptr;
  if (b0 && b0->numel() != dout)
    k.fail("bias " + b0->describe() + " does not have D_out = " + std::to_string(dout) + " values");
  std::vector<int64_t> oshape = x0.shape();
  oshape.back() = dout;

  DataType wdt = w0.dtype();
  DataType cdt = product_dtype(x0.dtype(), wdt, k.out_dtype(0));
  if (b0 && b0->dtype() != cdt && !is_float(cdt) && is_float(b0->dtype())) cdt = DataType::Float64;
  Tensor xc = cast_tensor(x0, cdt), wc = cast_tensor(w0, cdt), bc, tmp;
  if (b0) bc = cast_tensor(*b0, cdt);
  Tensor& out = alloc_out(k, cdt, oshape, tmp);
  const int64_t M = din ? x0.numel() / din : (dout ? out.numel() / dout : 0);
  exec::dispatch_compute(cdt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, exec::half>) {
      k.fail("fp16 reaches the kernel unconverted");
    } else {
      T* c = out.template mutable_data<T>();
      const T* bias = b0 ? bc.template data<T>() : nullptr;
      bool any_bias = false;
      if (bias)
        for (int64_t j = 0; j < dout && !any_bias; ++j) any_bias = !(bias[j] == T(0));
      GemmShape g;
      g.M = M;
      g.N = dout;
      g.K = din;
      g.tb = true;
      g.lda = din;
      g.ldb = din;
      g.ldc = dout;
      constexpr bool blas = std::is_same_v<T, float> || std::is_same_v<T, double>;
      if (blas && fits_int(g)) {
        if constexpr (blas) {
          // an fp16 output computed in fp32 (tmp undefined: C is the output itself)
          g.round = std::is_same_v<T, float> && !tmp.defined() && k.rounds_output();
          if (blas_gemm<T>(g, xc.template data<T>(), wc.template data<T>(), T(0), c,
                           any_bias ? bias : nullptr))
            k.set_rounded();
        }
        return;
      }
      batched_gemm<T>(g, 1, xc.template data<T>(), {0}, wc.template data<T>(), {0}, c, 0);
      if (any_bias) {
        parallel_for(
            M, std::max<int64_t>(1, 65536 / std::max<int64_t>(dout, 1)), [&](int64_t s, int64_t e) {
              for (int64_t m = s; m < e; ++m) {
                T* row = c + m * dout;
                if constexpr (std::is_floating_point_v<T>) {
                  for (int64_t j = 0; j < dout; ++j) row[j] += bias[j];
                } else if constexpr (std::is_same_v<T, bool>) {
                  for (int64_t j = 0; j < dout; ++j) row[j] = row[j] || bias[j];
                } else {
                  using U = std::make_unsigned_t<T>;
                  for (int64_t j = 0; j < dout; ++j)
                    row[j] = static_cast<T>(static_cast<U>(row[j]) + static_cast<U>(bias[j]));
                }
              }
            });
      }
    }
  });
  finish_out(k, tmp);
}

// ------------------------------------------------------------------------------------------
// einsum

/// coremltools' parse_einsum_equation: letters numbered by first appearance over input 1,
/// input 2, output.
bool parse_equation(const std::string& eq, std::vector<std::vector<int>>& vecs) {
  size_t arrow = eq.find("->");
  if (arrow == std::string::npos || eq.find("->", arrow + 1) != std::string::npos) return false;
  std::string lhs = eq.substr(0, arrow);
  size_t comma = lhs.find(',');
  if (comma == std::string::npos || lhs.find(',', comma + 1) != std::string::npos) return false;
  std::string parts[3] = {lhs.substr(0, comma), lhs.substr(comma + 1), eq.substr(arrow + 2)};
  std::vector<char> seen;
  for (const std::string& p : parts) {
    std::vector<int> v;
    for (char ch : p) {
      auto it = std::find(seen.begin(), seen.end(), ch);
      if (it == seen.end()) it = seen.insert(seen.end(), ch);
      v.push_back(static_cast<int>(it - seen.begin()));
    }
    vecs.push_back(v);
  }
  return true;
}

/// x [B, C, H, K] (*) y [B, K, H, W] -> [B, C, H, W], B and H broadcast; rank 3 drops B.
void einsum_kernel(KernelCtx& k) {
  std::vector<const Tensor*> vals = k.tuple("values");
  if (vals.size() != 2) k.fail("values must hold 2 tensors, got " + std::to_string(vals.size()));
  const Tensor& x = *vals[0];
  const Tensor& y = *vals[1];
  if (x.dtype() != y.dtype())
    k.fail("values must share one dtype, got " + x.describe() + " and " + y.describe());
  const int r = x.rank();
  if (y.rank() != r || (r != 3 && r != 4))
    k.fail("the inputs must both have rank 3 or 4, got " + x.describe() + " and " + y.describe());
  std::vector<std::vector<int>> v;
  std::string eq = k.str("equation");
  bool ok = parse_equation(eq, v);
  bool ok4 = ok && r == 4 && v[0] == std::vector<int>{0, 1, 2, 3} &&
             v[1] == std::vector<int>{0, 3, 2, 4} && v[2] == std::vector<int>{0, 1, 2, 4};
  bool ok3 = ok && r == 3 && v[0] == std::vector<int>{0, 1, 2} &&
             v[1] == std::vector<int>{2, 1, 3} && v[2] == std::vector<int>{0, 1, 3};
  if (!ok4 && !ok3)
    k.fail("equation \"" + eq + "\" is not supported for rank " + std::to_string(r) + " inputs");
  std::vector<int64_t> xs = x.shape(), ys = y.shape();
  if (r == 3) xs.insert(xs.begin(), 1), ys.insert(ys.begin(), 1);
  const int64_t C = xs[1], K = xs[3], W = ys[3];
  if (ys[1] != K) k.fail("the contracted dims differ: " + x.describe() + " and " + y.describe());
  auto bdim = [&](int d) {
    if (xs[d] != ys[d] && xs[d] != 1 && ys[d] != 1)
      k.fail("dim " + std::to_string(d - 4) + " of " + x.describe() + " and " + y.describe() +
             " cannot broadcast");
    return xs[d] == 1 ? ys[d] : xs[d];
  };
  const int64_t B = bdim(0), H = bdim(2);
  std::vector<int64_t> oshape = {B, C, H, W};
  if (r == 3) oshape.erase(oshape.begin());
  Tensor& out = k.alloc(0, oshape);
  GemmShape g;
  g.M = C;
  g.N = W;
  g.K = K;
  g.lda = xs[2] * K;
  g.ldb = ys[2] * W;
  g.ldc = H * W;
  const int64_t nb = B * H;
  std::vector<int64_t> aoff(static_cast<size_t>(nb)), boff(static_cast<size_t>(nb));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      aoff[b * H + h] = (xs[0] == 1 ? 0 : b) * C * xs[2] * K + (xs[2] == 1 ? 0 : h) * K;
      boff[b * H + h] = (ys[0] == 1 ? 0 : b) * K * ys[2] * W + (ys[2] == 1 ? 0 : h) * W;
    }
  exec::dispatch_compute(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, exec::half>) {
      k.fail("fp16 reaches the kernel unconverted");
    } else {
      T* c = out.template mutable_data<T>();
      const T* a = x.template data<T>();
      const T* bb = y.template data<T>();
      // product (b, h) writes out[b, :, h, :]: rows of stride H * W from b * C * H * W + h * W
      if (H == 1) {
        batched_gemm<T>(g, nb, a, aoff, bb, boff, c, C * W);
        return;
      }
      for (int64_t b = 0; b < B; ++b) {
        std::vector<int64_t> ao(aoff.begin() + b * H, aoff.begin() + (b + 1) * H);
        std::vector<int64_t> bo(boff.begin() + b * H, boff.begin() + (b + 1) * H);
        batched_gemm<T>(g, H, a, ao, bb, bo, c + b * C * H * W, W);
      }
    }
  });
}

}  // namespace

void register_linear_kernels(KernelRegistry& r) {
  r.add("linear", {linear_kernel, true});
  r.add("matmul", {matmul_kernel, true});
  r.add("einsum", {einsum_kernel, true});
}

}  // namespace milkit

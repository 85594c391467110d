// Matrix-vector products for one to a few rows of activations (LLM decode): every weight is read
// once per call, from an fp32 matrix or from a packed weight decoded a panel at a time into a
// per-thread scratch (fp16 read in place, palettized and quantized weights from their packed
// bytes), split across the pool by output channels. Each output is summed in the same order
// whatever the weight's storage and however the outputs are split across threads, so a packed
// weight gives the bits of its decompressed fp32 copy. Private to cpp/src/exec.
#pragma once

#include <cstdint>

#include "../packed_weight.h"

namespace milkit::exec {

/// Asks the cache for `runs` runs of `len` bytes, `stride` bytes apart from `p` (every 64-byte
/// line of each, its last byte included when the run is not aligned to a line): the rows a
/// kernel reads next, fetched while it computes the current ones.
inline void prefetch_runs(const void* p, int64_t stride, int64_t runs, int64_t len) {
  if (len <= 0) return;
  const auto* b = static_cast<const char*>(p);
  for (int64_t r = 0; r < runs; ++r) {
    for (int64_t k = 0; k < len; k += 64) __builtin_prefetch(b + r * stride + k, 0, 2);
    __builtin_prefetch(b + r * stride + len - 1, 0, 2);
  }
}

/// Most rows of A a matrix-vector product takes (more go to BLAS).
constexpr int64_t kGemvRows = 4;

/// The weight of a product: an fp32 matrix (row stride `ld`) or a packed weight (contiguous).
struct GemvWeight {
  const float* dense = nullptr;          ///< fp32 rows, or null when `packed` is given
  int64_t ld = 0;                        ///< row stride of `dense`
  const PackedWeight* packed = nullptr;  ///< the packed weight, when `dense` is null
};

/// C[m, n] = sum_k A[m, k] * W[n, k] (+ C[m, n] when `accumulate`) for m < M, W stored [N, K].
void gemv_nk(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const GemvWeight& w,
             bool accumulate, float* C, int64_t ldc);

/// C[m, n] = sum_k A[m, k] * W[k, n] (+ C[m, n] when `accumulate`) for m < M, W stored [K, N].
void gemv_kn(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const GemvWeight& w,
             bool accumulate, float* C, int64_t ldc);

/// A packed weight seen as N rows of K elements (its axis 0 the rows, K = numel / N), decoded to
/// fp32 rows: from their packed bytes by the matrix-vector kernels' loads where its row form
/// allows (4-bit tables, int8 / int4 with their scales and offsets; worked out once, when made),
/// else by PackedWeight::decode. The values decode() gives, either way.
class PackedRows {
 public:
  /// Rows of `w`, which must outlive this; `K` elements a row.
  PackedRows(const PackedWeight& w, int64_t K);
  /// Elements [k0, k0 + kc) of rows [r0, r0 + n) into `out`, kc floats a row.
  void decode(int64_t r0, int64_t n, int64_t k0, int64_t kc, float* out) const;
  /// Asks the cache for the stored bytes decode(r0, n, k0, kc, ...) will read (rows in a direct
  /// form; nothing otherwise), so that a GEMM can fetch the next rows while it multiplies these.
  void prefetch(int64_t r0, int64_t n, int64_t k0, int64_t kc) const;

 private:
  const PackedWeight* w_;
  int64_t K_;
  RowForm form_;
  bool direct_ = false;  // form_ decodes here and its rows are these
};

}  // namespace milkit::exec

// Matrix-vector products for one to a few rows of activations (LLM decode): every weight is read
// once per call, from an fp32 matrix or from a packed weight decoded a panel at a time into a
// per-thread scratch (fp16 read in place, palettized and quantized weights from their packed
// bytes), split across the pool by output channels. Each output is summed in the same order
// whatever the weight's storage and however the outputs are split across threads, so a packed
// weight gives the bits of its decompressed fp32 copy. Private to cpp/src/exec.
#pragma once

#include <cstdint>

namespace milkit {
class PackedWeight;
struct RowForm;
}

namespace milkit::exec {

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

/// Whether decode_row reads weights of row form `f` on this CPU (a direct form, with scales when
/// it is integers, and AVX2).
bool row_form_decodes(const RowForm& f);

/// Elements [k0, k0 + kc) of row n of a weight of K elements a row in row form `f` (for which
/// row_form_decodes holds) as fp32: the values PackedWeight::decode gives, from the row's packed
/// bytes with the fused matrix-vector kernels' loads.
void decode_row(const RowForm& f, int64_t n, int64_t K, int64_t k0, int64_t kc, float* out);

}  // namespace milkit::exec

// The interpreter's own fp32 matrix product for products with a weight: C = A * B (+ bias), B
// fp32 or fp16 (read in place, widened while packing), packed per call 48 columns at a time into
// a per-thread panel that stays in cache while every row of A passes over it. A is read where it
// lies (no packing), each output summed over k in order whatever the split across threads (with
// AVX-512, the columns of a last panel of 1-8 columns summed as 16 partial sums: narrow_dots).
// Measured against OpenBLAS (docs/interpreter.md): 1.1-1.5x faster on the products of the
// benchmark networks, most at few rows, where OpenBLAS packs A and B for little work. Private to
// cpp/src/exec.
#pragma once

#include <cstdint>
#include <functional>

namespace milkit {
class PackedWeight;
}

namespace milkit::exec {

/// The right operand of sgemm_panels: fp32 or fp16 elements, or a packed weight decoded while
/// packing, stored [N, K] (`nk`, the layout of a linear weight) or [K, N], with row stride `ld`
/// (elements; a packed weight's rows are contiguous).
struct GemmRhs {
  const float* f32 = nullptr;            ///< fp32 elements
  const uint16_t* f16 = nullptr;         ///< else fp16 elements (IEEE binary16 bit patterns)
  const PackedWeight* packed = nullptr;  ///< else a packed weight
  bool nk = true;                        ///< stored [N, K] rather than [K, N]
  int64_t ld = 0;                        ///< row stride of the stored matrix
  /// A last panel of at most 8 columns computed as dot products along k (AVX-512): each of its
  /// outputs summed as 16 partial sums, not in k order. Off where the columns a product gets
  /// depend on the thread count (a column would then be summed one way or the other, and the
  /// bits would depend on the threads).
  bool narrow_dots = true;
};

/// Whether sgemm_panels runs on this CPU (AVX2 and FMA) and is not turned off with
/// MILKIT_GEMM=blas (which sends these products back to OpenBLAS, to compare the two).
bool sgemm_panels_enabled();

/// C[M, N] = A[M, K] * B (+ bias[n] when `bias`) (+ C when `accumulate`); A row-major with row
/// stride lda, C with ldc; with `round_half` each output is rounded to fp16's value as it is
/// stored (an fp16 program's output, while in registers). Split across the pool by 48-column
/// panels of B, and by rows of A when there are fewer panels than threads. Requires
/// sgemm_panels_enabled().
void sgemm_panels(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const GemmRhs& b,
                  const float* bias, bool accumulate, float* C, int64_t ldc,
                  bool round_half = false);

class PackedRows;

/// The left operand of sgemm_rows_outer: rows [row0, row0 + M) of a packed weight (fp16 in
/// place, compressed), or else an fp32 matrix with row stride `ld`.
struct GemmLhs {
  const PackedRows* packed = nullptr;  ///< a packed weight's row decoder
  int64_t row0 = 0;                    ///< its first row
  const float* f32 = nullptr;          ///< else fp32 rows
  int64_t ld = 0;                      ///< their stride
};

/// C[M, N] (+)= A * B for products of few columns and a large A (a conv's weight over a small
/// image): each thread takes a range of A's row blocks, packs all of B's panels for a block of k
/// (together within 256 KB), and reads each block of 8 rows of A once for all the panels: a
/// packed A decoded once per call (no fp32 copy of the weight made), a dense one read from
/// memory once per call instead of once per panel (sgemm_panels' order). The same sums as
/// sgemm_panels (each output summed over k in order; a narrow last panel's dot products over the
/// same blocks of k in every path). Requires sgemm_panels_enabled().
void sgemm_rows_outer(int64_t M, int64_t N, int64_t K, const GemmLhs& a, const GemmRhs& b,
                      bool accumulate, float* C, int64_t ldc);

/// Called when rows [m0, m1) of C hold their final values (every column), on the thread that
/// computed them, while they are in cache.
using RowsDone = std::function<void(int64_t m0, int64_t m1)>;

/// Floats of B packed whole at most by sgemm_row_blocks (512 KB: it stays in L2).
constexpr int64_t kRowBlockFloats = int64_t{1} << 17;

/// C[M, N] = row_bias[m] (when given) + A[M, K] * B by blocks of up to 8 rows, each done across
/// every column (B packed whole by each thread that takes blocks, once per call, into a buffer of
/// its own that it keeps), then handed to `done` (may be empty): a 1x1 conv's output channels
/// with their bias and a fused activation applied while they are in cache. The same sums as
/// sgemm_panels over C prefilled with the bias. False (and nothing done) when B packed would exceed
/// kRowBlockFloats, K is 0, or sgemm_panels is off.
bool sgemm_row_blocks(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                      const GemmRhs& b, const float* row_bias, float* C, int64_t ldc,
                      const RowsDone& done);

}  // namespace milkit::exec

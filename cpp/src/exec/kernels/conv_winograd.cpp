// Winograd F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks"):
// a 2x2 output tile from its 4x4 input patch d is A^T [U . V] A with U = G g G^T (the 3x3 filter
// g transformed once per call) and V = B^T d B, where
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
//   A^T = [1 1 1 0; 0 1 -1 -1].
// Summed over input channels, the 16 elementwise products become 16 GEMMs
// M[xi][co, tile] = U[xi][co, ci] * V[xi][ci, tile]: 16 multiply-adds per tile and channel pair
// instead of 36 (2.25x fewer), in OpenBLAS's single-threaded GEMM.
//
// Per image, tile rows are taken in chunks whose V (16 x C_in x tiles) fits in kVFloats: the
// chunk's V is made across threads (one input channel per task), then tasks of (output channel
// block, block of tile rows) each run their 16 GEMMs into a per-thread M and transform it into
// the output rows. U is made once per call when it fits in kUFloats, else by each task for its
// block of output channels. Every GEMM sums over all input channels in one call, so results do
// not depend on the blocking or the thread count.
//
// Transforms are plain loops over tiles (contiguous runs: input columns are split into even and
// odd ones first), compiled twice: for AVX2 + FMA, picked at run time, and for the baseline.
#include "conv_winograd.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <vector>

#include "milkit/exec/threads.h"
#include "vec_math.h"

namespace milkit::exec {

namespace {

constexpr int64_t kUFloats = 1 << 18;     // transformed filters made once per call up to this size
constexpr int64_t kVFloats = 1 << 18;     // transformed input per chunk of tile rows
constexpr int64_t kVFloatsMax = 1 << 22;  // the same, for convs whose filters are made per task
constexpr int64_t kSubTiles = 128;        // tiles per GEMM (whole tile rows, at least one)
constexpr int64_t kResidentBlock = 32;    // output channels per task when U is made once per call

/// A stride between the 16 matrices of U, V or M: n floats rounded up to a cache line, plus one
/// line, so that the 16 runs a transform reads or writes together do not all fall in the same
/// cache sets (a stride that is a multiple of 4 KB would make them evict each other).
int64_t xi_stride(int64_t n) { return (n + 15) / 16 * 16 + 16; }

#define MILKIT_WINO_INLINE __attribute__((always_inline)) inline

/// U[xi][co, ci] (xi stride `xs`, rows of C_in floats) for the n filters g[co, ci, 3, 3]: each
/// filter row's taps gathered into 9 runs over ci (`sc`, 9 C_in floats), then transformed a run
/// at a time.
MILKIT_WINO_INLINE void filter_body(const float* g, int64_t n, int64_t cin, float* u, int64_t xs,
                                    float* sc) {
  for (int64_t co = 0; co < n; ++co) {
    const float* gc = g + co * cin * 9;
    cblas_somatcopy(CblasRowMajor, CblasTrans, static_cast<int>(cin), 9, 1.0f, gc, 9, sc,
                    static_cast<int>(cin));
    const float* k[9];
    for (int j = 0; j < 9; ++j) k[j] = sc + j * cin;
    float* o = u + co * cin;
    for (int64_t ci = 0; ci < cin; ++ci) {
      float q[4][3];
      for (int c = 0; c < 3; ++c) {  // G g
        q[0][c] = k[c][ci];
        q[1][c] = 0.5f * (k[c][ci] + k[3 + c][ci] + k[6 + c][ci]);
        q[2][c] = 0.5f * (k[c][ci] - k[3 + c][ci] + k[6 + c][ci]);
        q[3][c] = k[6 + c][ci];
      }
      for (int i = 0; i < 4; ++i) {  // (G g) G^T
        o[(4 * i) * xs + ci] = q[i][0];
        o[(4 * i + 1) * xs + ci] = 0.5f * (q[i][0] + q[i][1] + q[i][2]);
        o[(4 * i + 2) * xs + ci] = 0.5f * (q[i][0] - q[i][1] + q[i][2]);
        o[(4 * i + 3) * xs + ci] = q[i][2];
      }
    }
  }
}

/// B^T down four rows: t0 = d0 - d2, t1 = d1 + d2, t2 = d2 - d1, t3 = d1 - d3, elementwise.
MILKIT_WINO_INLINE void rows_bt(const float* __restrict d0, const float* __restrict d1,
                                const float* __restrict d2, const float* __restrict d3,
                                float* __restrict t0, float* __restrict t1, float* __restrict t2,
                                float* __restrict t3, int64_t n) {
  for (int64_t m = 0; m < n; ++m) {
    t0[m] = d0[m] - d2[m];
    t1[m] = d1[m] + d2[m];
    t2[m] = d2[m] - d1[m];
    t3[m] = d1[m] - d3[m];
  }
}

/// B across each tile's columns (e[tx], o[tx], e[tx + 1], o[tx + 1]) of a row made by rows_bt.
MILKIT_WINO_INLINE void cols_b(const float* __restrict e, const float* __restrict o,
                               float* __restrict v0, float* __restrict v1, float* __restrict v2,
                               float* __restrict v3, int64_t tw) {
  for (int64_t tx = 0; tx < tw; ++tx) {
    v0[tx] = e[tx] - e[tx + 1];
    v1[tx] = o[tx] + e[tx + 1];
    v2[tx] = e[tx + 1] - o[tx];
    v3[tx] = o[tx] - o[tx + 1];
  }
}

/// A^T down one column j of the tiles' m: s0 = m0 + m1 + m2, s1 = m1 - m2 - m3, elementwise.
MILKIT_WINO_INLINE void rows_at(const float* __restrict m0, const float* __restrict m1,
                                const float* __restrict m2, const float* __restrict m3,
                                float* __restrict s0, float* __restrict s1, int64_t n) {
  for (int64_t t = 0; t < n; ++t) {
    s0[t] = m0[t] + m1[t] + m2[t];
    s1[t] = m1[t] - m2[t] - m3[t];
  }
}

/// A across the columns of one output row of the tiles (s[j] made by rows_at), plus the bias:
/// r[2 tx] = s0 + s1 + s2 + bias, r[2 tx + 1] = s1 - s2 - s3 + bias.
MILKIT_WINO_INLINE void cols_a(const float* __restrict s0, const float* __restrict s1,
                               const float* __restrict s2, const float* __restrict s3, float bias,
                               float* __restrict r, int64_t tw) {
  for (int64_t tx = 0; tx < tw; ++tx) {
    r[2 * tx] = s0[tx] + s1[tx] + s2[tx] + bias;
    r[2 * tx + 1] = s1[tx] - s2[tx] - s3[tx] + bias;
  }
}

/// dst = src (n floats); false when one is not finite.
MILKIT_WINO_INLINE bool copy_finite(const float* __restrict src, float* __restrict dst, int64_t n) {
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float val = src[i];
    bad |= (val - val) != (val - val);  // inf - inf and NaN are NaN
    dst[i] = val;
  }
  return bad == 0;
}

/// V[xi][tile] (xi stride `xs`) of input plane xc for tile rows [ty0, ty1): each patch row split
/// into even and odd columns (zeros outside the input), B^T applied down the 4 rows, then B
/// across each tile's columns (even tx, odd tx, even tx + 1, odd tx + 1). `sc` holds 16 (tw + 1)
/// floats.
MILKIT_WINO_INLINE void input_body(const Conv2dShape& s, int64_t tw, const float* xc, int64_t ty0,
                                   int64_t ty1, float* v, int64_t xs, float* sc) {
  const int64_t w1 = tw + 1;
  float* ev[4];
  float* od[4];
  for (int r = 0; r < 4; ++r) {
    ev[r] = sc + r * w1;
    od[r] = sc + (4 + r) * w1;
  }
  float* a[4];  // B^T down the rows: even columns
  float* b[4];  // odd columns
  for (int i = 0; i < 4; ++i) {
    a[i] = sc + (8 + i) * w1;
    b[i] = sc + (12 + i) * w1;
  }
  // columns 2m - pw (even) and 2m + 1 - pw (odd) are both inside for m in [mlo, mhi)
  const int64_t mlo = std::min<int64_t>(w1, (s.pw + 1) / 2);
  const int64_t mhi = std::max<int64_t>(mlo, std::min<int64_t>(w1, (s.IW + s.pw) / 2));
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    for (int r = 0; r < 4; ++r) {
      const int64_t ih = 2 * ty - s.ph + r;
      float* e = ev[r];
      float* o = od[r];
      if (ih < 0 || ih >= s.IH) {
        std::fill(e, e + w1, 0.0f);
        std::fill(o, o + w1, 0.0f);
        continue;
      }
      const float* row = xc + ih * s.IW;
      auto at = [&](int64_t c) { return c >= 0 && c < s.IW ? row[c] : 0.0f; };
      for (int64_t m = 0; m < mlo; ++m) {
        e[m] = at(2 * m - s.pw);
        o[m] = at(2 * m + 1 - s.pw);
      }
      const float* base = row - s.pw;
      for (int64_t m = mlo; m < mhi; ++m) {
        e[m] = base[2 * m];
        o[m] = base[2 * m + 1];
      }
      for (int64_t m = mhi; m < w1; ++m) {
        e[m] = at(2 * m - s.pw);
        o[m] = at(2 * m + 1 - s.pw);
      }
    }
    rows_bt(ev[0], ev[1], ev[2], ev[3], a[0], a[1], a[2], a[3], w1);
    rows_bt(od[0], od[1], od[2], od[3], b[0], b[1], b[2], b[3], w1);
    float* dst = v + (ty - ty0) * tw;
    for (int i = 0; i < 4; ++i)
      cols_b(a[i], b[i], dst + (4 * i) * xs, dst + (4 * i + 1) * xs, dst + (4 * i + 2) * xs,
             dst + (4 * i + 3) * xs, tw);
  }
}

/// Output rows of one channel from m[xi][tile] (xi stride `xs`) for tile rows [ty0, ty1) (m's
/// tiles start at ty0): A^T m A plus the bias, written to y's rows 2 ty and 2 ty + 1 that
/// exist. `sc` holds 10 tw floats. Returns false when a written value is not finite.
MILKIT_WINO_INLINE bool output_body(const Conv2dShape& s, int64_t tw, const float* m, int64_t xs,
                                    int64_t ty0, int64_t ty1, float bias, float* yc, float* sc) {
  float* sr[2][4];
  for (int j = 0; j < 4; ++j) {
    sr[0][j] = sc + j * tw;
    sr[1][j] = sc + (4 + j) * tw;
  }
  float* r = sc + 8 * tw;
  bool good = true;
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    const float* mt = m + (ty - ty0) * tw;
    for (int j = 0; j < 4; ++j)
      rows_at(mt + j * xs, mt + (4 + j) * xs, mt + (8 + j) * xs, mt + (12 + j) * xs, sr[0][j],
              sr[1][j], tw);
    for (int h = 0; h < 2 && 2 * ty + h < s.OH; ++h) {
      cols_a(sr[h][0], sr[h][1], sr[h][2], sr[h][3], bias, r, tw);
      good &= copy_finite(r, yc + (2 * ty + h) * s.OW, s.OW);
    }
  }
  return good;
}

void filter_base(const float* g, int64_t n, int64_t cin, float* u, int64_t xs, float* sc) {
  filter_body(g, n, cin, u, xs, sc);
}
void input_base(const Conv2dShape& s, int64_t tw, const float* xc, int64_t ty0, int64_t ty1,
                float* v, int64_t xs, float* sc) {
  input_body(s, tw, xc, ty0, ty1, v, xs, sc);
}
bool output_base(const Conv2dShape& s, int64_t tw, const float* m, int64_t xs, int64_t ty0,
                 int64_t ty1, float bias, float* yc, float* sc) {
  return output_body(s, tw, m, xs, ty0, ty1, bias, yc, sc);
}

#ifdef MILKIT_VMATH_AVX2
#define MILKIT_WINO_AVX2 __attribute__((target("avx2,fma")))
MILKIT_WINO_AVX2 void filter_avx2(const float* g, int64_t n, int64_t cin, float* u, int64_t xs,
                                  float* sc) {
  filter_body(g, n, cin, u, xs, sc);
}
MILKIT_WINO_AVX2 void input_avx2(const Conv2dShape& s, int64_t tw, const float* xc, int64_t ty0,
                                 int64_t ty1, float* v, int64_t xs, float* sc) {
  input_body(s, tw, xc, ty0, ty1, v, xs, sc);
}
MILKIT_WINO_AVX2 bool output_avx2(const Conv2dShape& s, int64_t tw, const float* m, int64_t xs,
                                  int64_t ty0, int64_t ty1, float bias, float* yc, float* sc) {
  return output_body(s, tw, m, xs, ty0, ty1, bias, yc, sc);
}
#endif

/// One of this thread's buffers (kept between convs, like the im2col columns: made and freed per
/// conv, megabyte buffers leave the allocator's heap grown).
float* buffer(int which, int64_t n) {
  thread_local std::vector<float> bufs[5];
  std::vector<float>& b = bufs[which];
  if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
  return b.data();
}
enum Buf { kU = 0, kV = 1, kM = 2, kScratch = 3, kFilter = 4 };

// The transforms compile to the same operations in both versions (no contraction into FMA:
// each is a sum or difference, or a product by 0.5), so the bits do not depend on the CPU.
void filter_transform(const float* g, int64_t n, int64_t cin, float* u, int64_t xs) {
  float* sc = buffer(kFilter, 9 * cin);
#ifdef MILKIT_VMATH_AVX2
  if (vmath::cpu_avx2_fma()) return filter_avx2(g, n, cin, u, xs, sc);
#endif
  filter_base(g, n, cin, u, xs, sc);
}
void input_transform(const Conv2dShape& s, int64_t tw, const float* xc, int64_t ty0, int64_t ty1,
                     float* v, int64_t xs, float* sc) {
#ifdef MILKIT_VMATH_AVX2
  if (vmath::cpu_avx2_fma()) return input_avx2(s, tw, xc, ty0, ty1, v, xs, sc);
#endif
  input_base(s, tw, xc, ty0, ty1, v, xs, sc);
}
bool output_transform(const Conv2dShape& s, int64_t tw, const float* m, int64_t xs, int64_t ty0,
                      int64_t ty1, float bias, float* yc, float* sc) {
#ifdef MILKIT_VMATH_AVX2
  if (vmath::cpu_avx2_fma()) return output_avx2(s, tw, m, xs, ty0, ty1, bias, yc, sc);
#endif
  return output_base(s, tw, m, xs, ty0, ty1, bias, yc, sc);
}

}  // namespace

bool winograd_suits(const Conv2dShape& s) {
  static const bool off =
      std::getenv("MILKIT_WINOGRAD") && std::getenv("MILKIT_WINOGRAD")[0] == '0';
  if (off) return false;
  return s.KH == 3 && s.KW == 3 && s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 &&
         s.Cin >= 16 && s.Cout >= 16 && ((s.OH + 1) / 2) * ((s.OW + 1) / 2) >= 36;
}

bool winograd_conv3x3(const Conv2dShape& s, const float* x, const WeightRows& w, const float* bias,
                      float* y) {
  const int64_t cin = s.Cin, cout = s.Cout, th = (s.OH + 1) / 2, tw = (s.OW + 1) / 2;
  if (s.N == 0 || cout == 0 || th == 0 || tw == 0) return true;
  // Blocks do not depend on the thread count: OpenBLAS's edge kernels may round a row of C
  // differently from its main kernel, so a row must fall at the same place of the same block.
  const bool resident = 16 * cout * cin <= kUFloats;
  const int64_t cb =
      resident ? std::min<int64_t>(cout, kResidentBlock)
               : std::min<int64_t>(cout, std::max<int64_t>(16, kUFloats / (16 * cin) / 16 * 16));
  const int64_t nco = (cout + cb - 1) / cb;
  float* ures = nullptr;
  if (resident) {
    ures = buffer(kU, 16 * xi_stride(cout * cin));
    parallel_for(nco, 1, [&](int64_t b, int64_t e) {
      for (int64_t q = b; q < e; ++q) {
        const int64_t c0 = q * cb, n = std::min(cb, cout - c0);
        filter_transform(w(c0, n), n, cin, ures + c0 * cin, xi_stride(cout * cin));
      }
    });
  }
  // filters made per task are made once per chunk: such convs take all their tiles at once
  const int64_t rows_sub = std::clamp<int64_t>(kSubTiles / tw, 1, th);
  const int64_t rows_chunk = std::clamp<int64_t>(
      (resident ? kVFloats : kVFloatsMax) / (16 * cin * tw) / rows_sub * rows_sub, rows_sub, th);
  float* v = buffer(kV, 16 * xi_stride(cin * rows_chunk * tw));
  const int64_t ip = s.IH * s.IW, op = s.OH * s.OW;
  std::atomic<bool> ok{true};
  for (int64_t n = 0; n < s.N && ok.load(std::memory_order_relaxed); ++n) {
    const float* xn = x + n * cin * ip;
    float* yn = y + n * cout * op;
    for (int64_t ty0 = 0; ty0 < th; ty0 += rows_chunk) {
      const int64_t ty1 = std::min(th, ty0 + rows_chunk), tc = (ty1 - ty0) * tw,
                    vxs = xi_stride(cin * tc);
      parallel_for(cin, 1, [&](int64_t b, int64_t e) {
        float* sc = buffer(kScratch, 16 * (tw + 1));
        for (int64_t ci = b; ci < e; ++ci)
          input_transform(s, tw, xn + ci * ip, ty0, ty1, v + ci * tc, vxs, sc);
      });
      const int64_t nsub = (ty1 - ty0 + rows_sub - 1) / rows_sub;
      // resident filters: a task per (channel block, block of tile rows); else per channel block,
      // which makes its filters once and runs every block of tile rows
      const int64_t tasks = resident ? nco * nsub : nco;
      parallel_for(tasks, 1, [&](int64_t b, int64_t e) {
        bool good = true;
        for (int64_t task = b; task < e; ++task) {
          const int64_t q = resident ? task / nsub : task;
          const int64_t c0 = q * cb, nc = std::min(cb, cout - c0);
          const float* u;
          int64_t uxs;
          if (resident) {
            u = ures + c0 * cin;
            uxs = xi_stride(cout * cin);
          } else {
            uxs = xi_stride(nc * cin);
            float* ub = buffer(kU, 16 * uxs);
            filter_transform(w(c0, nc), nc, cin, ub, uxs);
            u = ub;
          }
          const int64_t sb = resident ? task % nsub : 0, se = resident ? sb + 1 : nsub;
          for (int64_t sub = sb; sub < se; ++sub) {
            const int64_t r0 = ty0 + sub * rows_sub, r1 = std::min(ty1, r0 + rows_sub);
            const int64_t nt = (r1 - r0) * tw, toff = (r0 - ty0) * tw;
            const int64_t mxs = xi_stride(nc * nt);
            float* m = buffer(kM, 16 * mxs + 10 * tw);
            for (int xi = 0; xi < 16; ++xi)
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(nc),
                          static_cast<int>(nt), static_cast<int>(cin), 1.0f, u + xi * uxs,
                          static_cast<int>(cin), v + xi * vxs + toff, static_cast<int>(tc), 0.0f,
                          m + xi * mxs, static_cast<int>(nt));
            float* sc = m + 16 * mxs;
            for (int64_t co = 0; co < nc; ++co)
              good &= output_transform(s, tw, m + co * nt, mxs, r0, r1, bias ? bias[c0 + co] : 0.0f,
                                       yn + (c0 + co) * op, sc);
          }
        }
        if (!good) ok.store(false, std::memory_order_relaxed);
      });
    }
  }
  return ok.load();
}

}  // namespace milkit::exec

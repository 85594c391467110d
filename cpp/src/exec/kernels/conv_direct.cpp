// Depthwise conv: each input plane is copied once, zero-padded, into a per-thread buffer laid
// out as `sw` phase planes (phase q holds the padded columns q, q + sw, q + 2 sw, ...), so that
// every tap of every stride reads a contiguous run of columns. Output rows are computed in
// blocks of 16 columns kept in registers across all taps (GCC vector extensions: two AVX
// registers when the CPU has AVX2 + FMA, four SSE registers otherwise); the padded rows are
// long enough that a block may run past the output's last column into scratch.
#include "conv_direct.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "milkit/exec/threads.h"
#include "vec_math.h"

namespace milkit::exec {

namespace {

constexpr int64_t kBlock = 16;  // output columns per register block

typedef float v8 __attribute__((vector_size(32)));

/// The plane layout of one padded input channel.
struct Padded {
  int64_t rows = 0;   // padded rows read by the taps
  int64_t width = 0;  // floats per row of one phase plane
  int64_t phase = 0;  // floats per phase plane
};

Padded padded_layout(const Conv2dShape& s) {
  Padded p;
  p.rows = (s.OH - 1) * s.sh + (s.KH - 1) * s.dh + 1;
  const int64_t blocks = (s.OW + kBlock - 1) / kBlock;
  p.width = blocks * kBlock + (s.KW - 1) * s.dw / s.sw + 1;
  p.phase = p.rows * p.width;
  return p;
}

/// Copies input plane `xc` [IH, IW] into `buf` as the padded phase planes (zeros outside).
void pad_plane(const Conv2dShape& s, const Padded& p, const float* xc, float* buf) {
  std::fill(buf, buf + p.phase * s.sw, 0.0f);
  for (int64_t r = 0; r < p.rows; ++r) {
    const int64_t ih = r - s.ph;
    if (ih < 0 || ih >= s.IH) continue;
    const float* src = xc + ih * s.IW;
    for (int64_t q = 0; q < s.sw; ++q) {
      float* dst = buf + q * p.phase + r * p.width;
      // padded column j * sw + q is input column j * sw + q - pw
      const int64_t jlo = std::max<int64_t>(0, (s.pw - q + s.sw - 1) / s.sw);
      const int64_t jhi = std::min<int64_t>(p.width, (s.IW + s.pw - q + s.sw - 1) / s.sw);
      if (s.sw == 1) {
        if (jhi > jlo) std::memcpy(dst + jlo, src + jlo - s.pw, sizeof(float) * (jhi - jlo));
      } else {
        for (int64_t j = jlo; j < jhi; ++j) dst[j] = src[j * s.sw + q - s.pw];
      }
    }
  }
}

/// All output rows of one plane from its padded input; off[kw] is tap kw's offset in the
/// padded buffer (phase plane and column), `tail` a scratch block for the last columns.
inline __attribute__((always_inline)) void dw_plane_body(const Conv2dShape& s, const Padded& p,
                                                         const float* buf, const int64_t* off,
                                                         const float* w, float b, float* y) {
  float tail[kBlock];
  for (int64_t oh = 0; oh < s.OH; ++oh) {
    float* dst = y + oh * s.OW;
    for (int64_t ow = 0; ow < s.OW; ow += kBlock) {
      v8 a0 = v8{} + b, a1 = a0;
      for (int64_t kh = 0; kh < s.KH; ++kh) {
        const float* row = buf + (oh * s.sh + kh * s.dh) * p.width + ow;
        const float* wk = w + kh * s.KW;
        for (int64_t kw = 0; kw < s.KW; ++kw) {
          const float* src = row + off[kw];
          const v8 wv = v8{} + wk[kw];
          v8 x0, x1;
          std::memcpy(&x0, src, sizeof x0);
          std::memcpy(&x1, src + 8, sizeof x1);
          a0 += wv * x0;
          a1 += wv * x1;
        }
      }
      float* o = ow + kBlock <= s.OW ? dst + ow : tail;
      std::memcpy(o, &a0, sizeof a0);
      std::memcpy(o + 8, &a1, sizeof a1);
      if (o == tail) std::copy(tail, tail + (s.OW - ow), dst + ow);
    }
  }
}

void dw_plane_base(const Conv2dShape& s, const Padded& p, const float* buf, const int64_t* off,
                   const float* w, float b, float* y) {
  dw_plane_body(s, p, buf, off, w, b, y);
}

#ifdef MILKIT_VMATH_AVX2
__attribute__((target("avx2,fma"))) void dw_plane_avx2(const Conv2dShape& s, const Padded& p,
                                                       const float* buf, const int64_t* off,
                                                       const float* w, float b, float* y) {
  dw_plane_body(s, p, buf, off, w, b, y);
}
#endif

}  // namespace

void depthwise_conv2d(const Conv2dShape& s, const float* x, const float* w, const float* bias,
                      float* y) {
  if (s.N == 0 || s.Cout == 0 || s.OH <= 0 || s.OW <= 0) return;
  const Padded p = padded_layout(s);
  const int64_t mult = s.Cout / s.Cin, kp = s.KH * s.KW, op = s.OH * s.OW, ip = s.IH * s.IW;
  std::vector<int64_t> off(static_cast<size_t>(s.KW));
  for (int64_t kw = 0; kw < s.KW; ++kw) off[kw] = (kw * s.dw) % s.sw * p.phase + (kw * s.dw) / s.sw;
  auto plane_fn = dw_plane_base;
#ifdef MILKIT_VMATH_AVX2
  if (vmath::cpu_avx2_fma()) plane_fn = dw_plane_avx2;
#endif
  const int64_t work = std::max<int64_t>(1, op * kp + p.phase * s.sw);
  parallel_for(s.N * s.Cout, std::max<int64_t>(1, 32768 / work), [&](int64_t b, int64_t e) {
    std::vector<float> buf(static_cast<size_t>(p.phase * s.sw));
    int64_t filled = -1;  // the input plane (n * Cin + ci) in buf
    for (int64_t pl = b; pl < e; ++pl) {
      const int64_t n = pl / s.Cout, co = pl % s.Cout, in = n * s.Cin + co / mult;
      if (in != filled) {
        pad_plane(s, p, x + in * ip, buf.data());
        filled = in;
      }
      plane_fn(s, p, buf.data(), off.data(), w + co * kp, bias ? bias[co] : 0.0f, y + pl * op);
    }
  });
}

}  // namespace milkit::exec

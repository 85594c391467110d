// ATen window functions (hann, hamming, blackman).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// window functions as constants: 0.5 - 0.5 cos(2 pi k / N) (hann), 0.54 - 0.46 cos (hamming),
// N = length (periodic) or length - 1
void window(C& cv, const json& n, double a0, double a1, double a2) {
  int64_t len = cv.i(n, "window_length", 0);
  if (len < 0) cv.fail(n, "window_length must be non-negative");
  bool periodic = cv.bo(n, "periodic", true);
  DataType dt = DataType::Float32;
  if (auto od = cv.dtype_arg(n, "dtype")) dt = *od;
  std::vector<double> w;
  double N = static_cast<double>(periodic ? len : len - 1);
  for (int64_t k = 0; k < len; ++k) {
    if (len == 1) {
      w.push_back(1.0);
      continue;
    }
    double t = 2.0 * M_PI * static_cast<double>(k) / N;
    w.push_back(a0 - a1 * std::cos(t) + a2 * std::cos(2 * t));
  }
  cv.out(n, cv.c(Value::from_doubles(dt, {len}, w)));
}

void hann_window(C& cv, const json& n) { window(cv, n, 0.5, 0.5, 0.0); }

void hamming_window(C& cv, const json& n) { window(cv, n, 0.54, 0.46, 0.0); }

void hamming_window_periodic(C& cv, const json& n) { window(cv, n, 0.54, 0.46, 0.0); }

void blackman_window(C& cv, const json& n) { window(cv, n, 0.42, 0.5, 0.08); }

}  // namespace

void register_signal(OpTable& t) {
  t.on("aten.hann_window", hann_window);
  t.on("aten.hamming_window.default", hamming_window);
  t.on("aten.hamming_window.periodic", hamming_window_periodic);
  t.on("aten.blackman_window", blackman_window);
}

}  // namespace torch_detail
}  // namespace milkit

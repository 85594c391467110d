// ATen padding: constant, reflection, replication and circular.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// pad(x, p, "circular"): per padded axis, negative pads crop first, then the axis wraps around
// ([x[L-b:], x, x[:e]]); torch requires pads no larger than the (cropped) size
Var* circular_pad(C& cv, const json& n, Var* x, const std::vector<int64_t>& tp) {
  int r = cv.rank(n, x);
  if (tp.size() % 2 || tp.size() / 2 > static_cast<size_t>(r)) cv.fail(n, "pad has " + std::to_string(tp.size()) + " values for rank " + std::to_string(r));
  auto p = mil_pad(tp, r);
  for (int k = 0; k < r; ++k) {
    int64_t b = p[static_cast<size_t>(2 * k)], e = p[static_cast<size_t>(2 * k + 1)];
    if (b == 0 && e == 0) continue;
    Dim sz = C::shape(x)[static_cast<size_t>(k)];
    if (!sz->is_const()) cv.fail(n, "circular padding of a symbolic dim (" + sz->str() + ") is not supported");
    int64_t L = sz->value();
    if (b < 0 || e < 0) {
      SliceSpec s;
      s.start = std::max<int64_t>(-b, 0);
      s.end = L - std::max<int64_t>(-e, 0);
      if (*s.end <= s.start) cv.fail(n, "circular pad crops the whole dim");
      x = slice_axis(cv, n, x, k, s);
      L = *s.end - s.start;
    }
    if (b > L || e > L) cv.fail(n, "circular padding larger than the dim (" + std::to_string(L) + ")");
    std::vector<Var*> parts;
    if (b > 0) {
      SliceSpec s;
      s.start = L - b;
      parts.push_back(slice_axis(cv, n, x, k, s));
    }
    parts.push_back(x);
    if (e > 0) {
      SliceSpec s;
      s.end = e;
      parts.push_back(slice_axis(cv, n, x, k, s));
    }
    if (parts.size() > 1) x = cv.op("concat", {values_arg(parts), C::ai32("axis", k)});
  }
  return x;
}

// padding
void constant_pad_nd(C& cv, const json& n) {
  cv.out(n, pad(cv, n, self(cv, n), cv.ints(n, "pad"), "constant", cv.f(n, "value", 0)));
}

void pad_op(C& cv, const json& n) {
  std::string mode = cv.s(n, "mode", "constant");
  std::string m = mode == "reflect" ? "reflect" : mode == "replicate" ? "replicate" : mode == "constant" ? "constant" : "";
  if (mode == "circular") {
    cv.out(n, circular_pad(cv, n, self(cv, n), cv.ints(n, "pad")));
    return;
  }
  if (m.empty()) cv.fail(n, "pad mode '" + mode + "' is not supported");
  cv.out(n, pad(cv, n, self(cv, n), cv.ints(n, "pad"), m, cv.f(n, "value", 0)));
}

void reflection_pad1d(C& cv, const json& n) { cv.out(n, pad(cv, n, self(cv, n), cv.ints(n, "padding"), "reflect", 0)); }

void replication_pad1d(C& cv, const json& n) { cv.out(n, pad(cv, n, self(cv, n), cv.ints(n, "padding"), "replicate", 0)); }

}  // namespace

void register_padding(OpTable& t) {
  t.on("aten.constant_pad_nd", constant_pad_nd);
  t.on("aten.pad", pad_op);
  t.on({"aten.reflection_pad1d", "aten.reflection_pad2d", "aten.reflection_pad3d"}, reflection_pad1d);
  t.on({"aten.replication_pad1d", "aten.replication_pad2d", "aten.replication_pad3d"}, replication_pad1d);
}

}  // namespace torch_detail
}  // namespace milkit

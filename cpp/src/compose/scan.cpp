// Cumulative scans: MIL's cumsum, and Hillis-Steele scans for the rest.
#include "milkit/compose/scan.h"

#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <vector>

namespace milkit {
namespace compose {

Var* cumsum(Emitter& e, Var* x, const ScanSpec& s) {
  int64_t ax = Emitter::axis(s.axis, Emitter::rank(x));
  return e.op("cumsum",
              {Builder::arg("x", x), Builder::arg("axis", Value::scalar_int(DataType::Int32, ax)),
               Builder::arg("exclusive", Value::scalar_bool(s.exclusive)),
               Builder::arg("reverse", Value::scalar_bool(s.reverse))});
}

namespace {

// reverse / exclusive handling around a log-step scan whose step combines x with x shifted by k
Var* log_scan(Emitter& e, Var* x, const ScanSpec& s, double identity, const char* what,
              const std::function<Var*(Var*, Var*)>& combine) {
  int r = Emitter::rank(x);
  if (r == 0) fail(std::string("a cumulative ") + what + " needs at least one dim");
  int64_t ax = Emitter::axis(s.axis, r);
  const Dim& d = x->type()->shape()[static_cast<size_t>(ax)];
  if (!d->is_const())
    fail(std::string("a cumulative ") + what + " along a symbolic dim is not supported");
  int64_t len = d->value();
  if (s.reverse)
    x = e.op("reverse", {Builder::arg("x", x), Builder::arg("axes", Value::int_list({ax}))});
  if (s.exclusive && len > 0) x = e.shift(x, ax, 1, identity);
  for (int64_t k = 1; k < len; k *= 2) x = combine(x, e.shift(x, ax, k, identity));
  if (s.reverse)
    x = e.op("reverse", {Builder::arg("x", x), Builder::arg("axes", Value::int_list({ax}))});
  return x;
}

}  // namespace

Var* cumprod(Emitter& e, Var* x, const ScanSpec& s) {
  return log_scan(e, x, s, 1.0, "product", [&](Var* a, Var* b) { return e.bin("mul", a, b); });
}

Var* logcumsumexp(Emitter& e, Var* x, const ScanSpec& s) {
  DataType dt = Emitter::dtype(x);
  if (!is_float(dt)) fail("logcumsumexp needs a float input");
  return log_scan(e, x, s, -INFINITY, "log-sum-exp", [&](Var* cur, Var* prev) {
    Var* hi = e.bin("maximum", prev, cur);
    Var* lo = e.bin("minimum", prev, cur);
    Var* ex = e.un("exp", e.bin("sub", lo, hi));
    Var* sum = e.bin("add", hi, e.un("log", e.bin("add", ex, e.cs(1, dt))));
    Var* ninf = e.bin("equal", hi, e.cs(-INFINITY, dt));
    return e.sel(ninf, hi, sum);
  });
}

std::pair<Var*, Var*> cumextreme(Emitter& e, Var* x, const ScanSpec& s, bool is_max) {
  if (s.exclusive || s.reverse) fail("a cumulative maximum / minimum runs forward, inclusive");
  DataType dt = Emitter::dtype(x);
  if (dt == DataType::Bool) x = e.cast(x, dt = DataType::Int32);
  int r = Emitter::rank(x);
  if (r == 0) fail("a cumulative maximum / minimum needs at least one dim");
  int64_t ax = Emitter::axis(s.axis, r);
  const Dim& d = x->type()->shape()[static_cast<size_t>(ax)];
  if (!d->is_const()) fail("a cumulative maximum / minimum along a symbolic dim is not supported");
  int64_t len = d->value();
  double worst = is_float(dt) ? (is_max ? -INFINITY : INFINITY)
                              : static_cast<double>(is_max ? std::numeric_limits<int32_t>::min()
                                                           : std::numeric_limits<int32_t>::max());
  // the index along the axis, broadcast to x's shape
  std::vector<int64_t> ishape(static_cast<size_t>(r), 1), iv;
  ishape[static_cast<size_t>(ax)] = len;
  for (int64_t i = 0; i < len; ++i) iv.push_back(i);
  Var* idx = e.c(Value::from_ints(DataType::Int32, ishape, iv));
  // zeros of x's shape (fill from a run-time shape: available on every target)
  Var* zeros = e.op("fill", {Builder::arg("shape", e.op("shape", {Builder::arg("x", x)})),
                             Builder::arg("value", Value::scalar_int(DataType::Int32, 0))});
  idx = e.bin("add", idx, zeros);
  for (int64_t k = 1; k < len; k *= 2) {
    Var* pv = e.shift(x, ax, k, worst);
    Var* pi = e.shift(idx, ax, k, 0);
    Var* keep = e.bin(is_max ? "greater_equal" : "less_equal", x, pv);  // later wins ties
    x = e.sel(keep, x, pv);
    idx = e.sel(keep, idx, pi);
  }
  return {x, idx};
}

}  // namespace compose
}  // namespace milkit

// Cumulative scans: MIL's cumsum, and Hillis-Steele scans for the rest.
#include "milkit/compose/scan.h"

#include <cmath>
#include <functional>

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

}  // namespace compose
}  // namespace milkit

// ATen operators of other families: upsampling (nearest).
#include <cmath>

#include "converter.h"

namespace milkit {
namespace torch_detail {

namespace {

using C = Converter;

Var* self(C& cv, const json& n) { return C::has(n, "self") ? cv.tensor(n, "self") : cv.tensor(n, "input"); }

// integer scale factors of an upsample over the last 2 dims, from output_size or scale_factors
std::vector<double> scales(C& cv, const json& n, Var* x, size_t sp) {
  std::vector<double> s;
  if (C::has(n, "scale_factors")) {
    s = cv.floats(n, "scale_factors");
  } else if (C::has(n, "scales_h") || C::has(n, "scales_w")) {
    s = {cv.f(n, "scales_h", 0), cv.f(n, "scales_w", 0)};
  }
  if (s.size() == sp && std::all_of(s.begin(), s.end(), [](double v) { return v > 0; })) return s;
  auto out = cv.ints(n, "output_size");
  if (out.size() != sp) cv.fail(n, "upsampling needs output_size or scale_factors for " + std::to_string(sp) + " dims");
  int r = cv.rank(n, x);
  s.clear();
  for (size_t k = 0; k < sp; ++k) {
    Dim in = C::shape(x)[static_cast<size_t>(r) - sp + k];
    if (!in->is_const()) cv.fail(n, "upsampling a symbolic size to a fixed output_size is not supported");
    s.push_back(static_cast<double>(out[k]) / static_cast<double>(in->value()));
  }
  return s;
}

}  // namespace

void register_misc(OpTable& t) {
  t["aten.upsample_nearest2d"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    auto s = scales(cv, n, x, 2);
    if (s[0] != std::floor(s[0]) || s[1] != std::floor(s[1]))
      cv.fail(n, "nearest upsampling by a non-integer factor is not supported");
    cv.out(n, cv.op("upsample_nearest_neighbor",
                    {C::a("x", x), C::a("scale_factor_height", Value::scalar_int(DataType::Int32, static_cast<int64_t>(s[0]))),
                     C::a("scale_factor_width", Value::scalar_int(DataType::Int32, static_cast<int64_t>(s[1])))}));
  };
}

}  // namespace torch_detail
}  // namespace milkit

// ATen complex tensors. Core ML has no complex multiarrays, so a complex tensor inside the program
// is a (real, imaginary) pair of real tensors of one shape (Converter::complex_vars), as
// coremltools' complex dialect is once lowered: view_as_complex / complex / polar make one,
// view_as_real / real / imag / abs / angle read one, arithmetic (add, sub, mul, div, neg, conj,
// exp) combines the parts, and the ops that act on every element alike (reshape, permute, slice,
// cat, sum, ...) run the real converter on each part. Program inputs and outputs stay real.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

bool complex_name(C& cv, const std::string& name) {
  if (cv.complex_vars.count(name)) return true;
  if (cv.defined(name)) return false;
  const json* v = cv.lookup("tensor_values", name);
  return v && is_complex_type(v->value("dtype", 0));
}

// every tensor name a node reads (tensor and tensor-list arguments)
std::vector<std::string> read_names(const json& n) {
  std::vector<std::string> r;
  auto ins = n.find("inputs");
  if (ins == n.end() || !ins->is_array()) return r;
  for (auto& in : *ins) {
    const json& a = in.value("arg", json::object());
    if (a.contains("as_tensor")) r.push_back(a["as_tensor"].value("name", std::string()));
    for (const char* key : {"as_tensors", "as_optional_tensors"})
      if (a.contains(key))
        for (auto& e : a[key]) {
          if (e.contains("name"))
            r.push_back(e.value("name", std::string()));
          else if (e.contains("as_tensor"))
            r.push_back(e["as_tensor"].value("name", std::string()));
        }
  }
  return r;
}

// an argument as a complex or real value (Python numbers as scalar consts of `dt`)
Cx arg_cx(C& cv, const json& n, const char* name, DataType dt) {
  std::string t = C::tensor_name(n, name);
  auto it = cv.complex_vars.find(t);
  if (it != cv.complex_vars.end()) return {it->second.first, it->second.second};
  if (C::is_number(n, name)) return {cv.cs(cv.number(n, name, 0), dt), nullptr};
  return {cv.cast(cv.tensor(n, name), dt), nullptr};
}

// the float dtype the parts of a node's complex operands compute in
DataType parts_dtype(C& cv, const json& n) {
  for (const auto& nm : read_names(n)) {
    auto it = cv.complex_vars.find(nm);
    if (it != cv.complex_vars.end()) return C::dtype(it->second.first);
  }
  for (const auto& nm : read_names(n))
    if (cv.defined(nm) && is_float(C::dtype(cv.var(nm)))) return C::dtype(cv.var(nm));
  return DataType::Float32;
}

Var* zeros_like(C& cv, Var* x) { return fill(cv, shape_of_var(cv, x), 0, C::dtype(x)); }

// re and im broadcast to one shape (torch's complex(re, im) broadcasts; adding zeros is exact)
Cx same_shape(C& cv, Cx v) {
  if (C::shape(v.re) == C::shape(v.im)) return v;
  return {bin(cv, "add", v.re, zeros_like(cv, v.im)), bin(cv, "add", v.im, zeros_like(cv, v.re))};
}

void name_part(C& cv, Var* v, const std::string& name) {
  if (v->op() && v->op()->op_type() != "const" && !v->input_of())
    v->set_name(cv.ctx().free_name(cv.name_prefix + name));
}

// binds output `k` of `n` to a complex (or, im null, real) value
void out_cx(C& cv, const json& n, Cx v, size_t k = 0) {
  if (!v.im) return cv.out(n, v.re, k);
  auto names = C::output_names(n);
  if (k >= names.size() || names[k].empty()) return;
  v = same_shape(cv, v);
  name_part(cv, v.re, names[k] + "_real");
  name_part(cv, v.im, names[k] + "_imag");
  cv.complex_vars[names[k]] = {v.re, v.im};
}

// ---- making and reading complex tensors -----------------------------------------------------

// x[..., i] (the last axis dropped)
Var* last(C& cv, Var* x, int64_t i) {
  return cv.op("gather", {C::a("x", x), C::a("indices", Value::scalar_int(DataType::Int32, i)),
                          C::ai32("axis", -1)});
}

void view_as_complex(C& cv, const json& n) {
  Var* x = self(cv, n);
  out_cx(cv, n, {last(cv, x, 0), last(cv, x, 1)});
}

void view_as_real(C& cv, const json& n) {
  Cx v = arg_cx(cv, n, "self", parts_dtype(cv, n));
  if (!v.im) cv.fail(n, "view_as_real of a real tensor");
  cv.out(n, cv.op("stack", {values_arg({v.re, v.im}), C::ai32("axis", -1)}));
}

void complex_op(C& cv, const json& n) {
  DataType dt = parts_dtype(cv, n);
  out_cx(cv, n, {cv.cast(cv.tensor(n, "real"), dt), cv.cast(cv.tensor(n, "imag"), dt)});
}

void polar_op(C& cv, const json& n) {
  DataType dt = parts_dtype(cv, n);
  Var* r = cv.cast(cv.tensor(n, "abs"), dt);
  Var* th = cv.cast(cv.tensor(n, "angle"), dt);
  out_cx(cv, n,
         {bin(cv, "mul", r, cv.op("cos", {C::a("x", th)})),
          bin(cv, "mul", r, cv.op("sin", {C::a("x", th)}))});
}

void real_op(C& cv, const json& n) {
  Cx v = arg_cx(cv, n, "self", parts_dtype(cv, n));
  cv.out(n, v.im ? v.re : cv.op("identity", {C::a("x", v.re)}));
}

void imag_op(C& cv, const json& n) {
  Cx v = arg_cx(cv, n, "self", parts_dtype(cv, n));
  if (!v.im) cv.fail(n, "imag is not defined for real tensors");
  cv.out(n, v.im);
}

// angle of a real tensor: pi where x < 0, else 0 (NaN stays NaN)
void angle_op(C& cv, const json& n) {
  DataType dt = parts_dtype(cv, n);
  Cx v = arg_cx(cv, n, "self", dt);
  if (v.im) return cv.out(n, atan2_of(cv, v.im, v.re));
  Var* x = v.re;
  Var* r = sel(cv, bin(cv, "less", x, cv.cs(0, dt)), cv.cs(M_PI, dt), cv.cs(0, dt));
  cv.out(n, bin(cv, "add", r, bin(cv, "mul", x, cv.cs(0, dt))));
}

// ---- arithmetic -------------------------------------------------------------------------------

Var* neg(C& cv, Var* x) { return bin(cv, "mul", x, cv.cs(-1, C::dtype(x))); }

void abs_cx(C& cv, const json& n) {
  Cx v = arg_cx(cv, n, "self", parts_dtype(cv, n));
  Var* s = bin(cv, "add", bin(cv, "mul", v.re, v.re), bin(cv, "mul", v.im, v.im));
  cv.out(n, cv.op("sqrt", {C::a("x", s)}));
}

void add_sub(C& cv, const json& n, bool sub) {
  DataType dt = parts_dtype(cv, n);
  Cx x = arg_cx(cv, n, "self", dt), y = arg_cx(cv, n, "other", dt);
  double alpha = cv.number(n, "alpha", 1.0) * (sub ? -1 : 1);
  auto scaled = [&](Var* v) { return alpha == 1 ? v : bin(cv, "mul", v, cv.cs(alpha, dt)); };
  Var* re = bin(cv, "add", x.re, scaled(y.re));
  Var* im = x.im && y.im ? bin(cv, "add", x.im, scaled(y.im)) : x.im ? x.im : scaled(y.im);
  out_cx(cv, n, {re, im});
}

void add_cx(C& cv, const json& n) { add_sub(cv, n, false); }
void sub_cx(C& cv, const json& n) { add_sub(cv, n, true); }

// (a + bi)(c + di) = (ac - bd) + (ad + bc)i
Cx mul(C& cv, Cx x, Cx y) {
  if (!x.im) std::swap(x, y);
  if (!y.im) return {bin(cv, "mul", x.re, y.re), bin(cv, "mul", x.im, y.re)};
  return {bin(cv, "sub", bin(cv, "mul", x.re, y.re), bin(cv, "mul", x.im, y.im)),
          bin(cv, "add", bin(cv, "mul", x.re, y.im), bin(cv, "mul", x.im, y.re))};
}

void mul_cx(C& cv, const json& n) {
  DataType dt = parts_dtype(cv, n);
  out_cx(cv, n, mul(cv, arg_cx(cv, n, "self", dt), arg_cx(cv, n, "other", dt)));
}

// x / y = x conj(y) / |y|^2
void div_cx(C& cv, const json& n) {
  DataType dt = parts_dtype(cv, n);
  if (C::has(n, "rounding_mode")) cv.fail(n, "division with a rounding mode of complex tensors");
  Cx x = arg_cx(cv, n, "self", dt), y = arg_cx(cv, n, "other", dt);
  if (!y.im)
    return out_cx(cv, n, {bin(cv, "real_div", x.re, y.re), bin(cv, "real_div", x.im, y.re)});
  Var* den = bin(cv, "add", bin(cv, "mul", y.re, y.re), bin(cv, "mul", y.im, y.im));
  Cx q = mul(cv, x, {y.re, neg(cv, y.im)});
  out_cx(cv, n, {bin(cv, "real_div", q.re, den), bin(cv, "real_div", q.im, den)});
}

void neg_cx(C& cv, const json& n) {
  Cx v = arg_cx(cv, n, "self", parts_dtype(cv, n));
  out_cx(cv, n, {neg(cv, v.re), neg(cv, v.im)});
}

// conj / _conj / conj_physical; of a real tensor, itself
void conj_op(C& cv, const json& n) {
  Cx v = arg_cx(cv, n, "self", parts_dtype(cv, n));
  if (!v.im) return cv.out(n, cv.op("identity", {C::a("x", v.re)}));
  out_cx(cv, n, {v.re, neg(cv, v.im)});
}

// resolve_conj / resolve_neg / clone / alias / detach ...: the value itself; a copy to a real
// dtype keeps the real part, as torch does
void same_cx(C& cv, const json& n) {
  Cx v = arg_cx(cv, n, "self", parts_dtype(cv, n));
  if (!v.im) return cv.out(n, cv.op("identity", {C::a("x", v.re)}));
  auto st =
      C::output_names(n).empty() ? nullptr : cv.lookup("tensor_values", C::output_names(n)[0]);
  if (st && !is_complex_type(st->value("dtype", 0))) {
    auto dt = mil_dtype(st->value("dtype", 0));
    return cv.out(n, dt ? cv.cast(v.re, *dt) : v.re);
  }
  out_cx(cv, n, v);
}

// e^(a + bi) = e^a (cos b + i sin b)
void exp_cx(C& cv, const json& n) {
  Cx v = arg_cx(cv, n, "self", parts_dtype(cv, n));
  Var* m = cv.op("exp", {C::a("x", v.re)});
  out_cx(cv, n,
         {bin(cv, "mul", m, cv.op("cos", {C::a("x", v.im)})),
          bin(cv, "mul", m, cv.op("sin", {C::a("x", v.im)}))});
}

// ---- ops acting on each part alike ------------------------------------------------------------

const std::unordered_set<std::string>& partwise_ops() {
  static const std::unordered_set<std::string> s = {"aten.view",
                                                    "aten.reshape",
                                                    "aten._unsafe_view",
                                                    "aten.view_copy",
                                                    "aten.permute",
                                                    "aten.permute_copy",
                                                    "aten.transpose",
                                                    "aten.transpose_copy",
                                                    "aten.t",
                                                    "aten.t_copy",
                                                    "aten.slice",
                                                    "aten.slice_copy",
                                                    "aten.select",
                                                    "aten.select_copy",
                                                    "aten.narrow",
                                                    "aten.unsqueeze",
                                                    "aten.unsqueeze_copy",
                                                    "aten.squeeze",
                                                    "aten.squeeze_copy",
                                                    "aten.flatten",
                                                    "aten.unflatten",
                                                    "aten.expand",
                                                    "aten.expand_copy",
                                                    "aten.cat",
                                                    "aten.concat",
                                                    "aten.concatenate",
                                                    "aten.stack",
                                                    "aten.split",
                                                    "aten.split_with_sizes",
                                                    "aten.chunk",
                                                    "aten.unbind",
                                                    "aten.index_select",
                                                    "aten.index",
                                                    "aten.flip",
                                                    "aten.roll",
                                                    "aten.repeat",
                                                    "aten.movedim",
                                                    "aten.sum",
                                                    "aten.mean",
                                                    "aten.contiguous",
                                                    "aten.clone",
                                                    "aten.alias",
                                                    "aten.detach",
                                                    "aten.lift_fresh_copy",
                                                    "_operator.getitem",
                                                    "aten.unsafe_split",
                                                    "aten.tile",
                                                    "aten.swapaxes",
                                                    "aten.gather",
                                                    "aten.pad",
                                                    "aten.constant_pad_nd"};
  return s;
}

// "aten.mul.Tensor" / "aten.mul_.Tensor" -> "aten.mul"
std::string packet(const json& n) {
  std::string p = split_target(n.value("target", std::string())).first;
  std::string functional = functional_of(p);
  return functional.empty() ? p : functional;
}

// cat / stack: every tensor argument is a value (not an index)
bool lists_values(const std::string& op) {
  return op.find("cat") != std::string::npos || op.find("stack") != std::string::npos;
}

// the node's real converter run twice: complex operands bound to their real parts, then to their
// imaginary parts (real tensors in a list of a complex cat / stack are zeros there)
void partwise(C& cv, const json& n, const ConvertFn& fn) {
  std::vector<std::string> cx_in, real_in;
  for (const auto& nm : read_names(n)) {
    if (cv.complex_vars.count(nm))
      cx_in.push_back(nm);
    else if (!nm.empty() && cv.defined(nm))
      real_in.push_back(nm);
  }
  auto outs = C::output_names(n);
  std::vector<Cx> res(outs.size());
  std::unordered_map<std::string, Var*> saved;
  for (const auto& nm : real_in) saved[nm] = cv.var(nm);
  for (int part = 0; part < 2; ++part) {
    for (const auto& nm : cx_in)
      cv.vars[nm] = part ? cv.complex_vars[nm].second : cv.complex_vars[nm].first;
    if (part && lists_values(packet(n)))
      for (const auto& nm : real_in) cv.vars[nm] = zeros_like(cv, saved[nm]);
    fn(cv, n);
    for (size_t k = 0; k < outs.size(); ++k) {
      if (outs[k].empty() || !cv.vars.count(outs[k])) continue;
      (part ? res[k].im : res[k].re) = cv.vars[outs[k]];
      cv.vars.erase(outs[k]);
      if (!part) name_part(cv, res[k].re, outs[k] + "_real");
    }
  }
  for (const auto& nm : cx_in) cv.vars.erase(nm);
  for (auto& kv : saved) cv.vars[kv.first] = kv.second;
  for (size_t k = 0; k < outs.size(); ++k)
    if (res[k].re && res[k].im) out_cx(cv, n, res[k], k);
}

using Fn = void (*)(C&, const json&);

const std::unordered_map<std::string, Fn>& complex_ops() {
  static const std::unordered_map<std::string, Fn> m = {
      {"aten.view_as_complex", view_as_complex},
      {"aten.view_as_real", view_as_real},
      {"aten.complex", complex_op},
      {"aten.polar", polar_op},
      {"aten.real", real_op},
      {"aten.imag", imag_op},
      {"aten.angle", angle_op},
      {"aten.abs", abs_cx},
      {"aten.add", add_cx},
      {"aten.sub", sub_cx},
      {"aten.mul", mul_cx},
      {"aten.div", div_cx},
      {"aten.neg", neg_cx},
      {"aten.conj", conj_op},
      {"aten._conj", conj_op},
      {"aten.conj_physical", conj_op},
      {"aten._conj_physical", conj_op},
      {"aten._conj_copy", conj_op},
      {"aten.resolve_conj", same_cx},
      {"aten.resolve_neg", same_cx},
      {"aten.exp", exp_cx},
      {"aten._to_copy", same_cx},
      {"aten.to", same_cx},
      {"aten.type_as", same_cx},
      {"aten.view_as_real_copy", view_as_real},
      {"aten.view_as_complex_copy", view_as_complex}};
  return m;
}

}  // namespace

bool complex_node(C& cv, const json& n) {
  for (const auto& nm : read_names(n))
    if (!nm.empty() && cv.complex_vars.count(nm)) return true;
  for (const auto& nm : C::output_names(n))
    if (!nm.empty() && complex_name(cv, nm)) return true;
  return false;
}

void convert_complex(C& cv, const json& n, const ConvertFn* real_fn) {
  if (convert_fft(cv, n)) return;
  std::string p = packet(n);
  auto it = complex_ops().find(p);
  if (it != complex_ops().end()) return it->second(cv, n);
  if (partwise_ops().count(p) && real_fn) return partwise(cv, n, *real_fn);
  cv.fail(n, "this operator of a complex tensor is not supported (complex tensors convert through "
                 "view_as_complex / complex "
                 "/ polar, elementwise add, sub, mul, div, neg, conj, exp, abs, angle, real, imag, "
                 "view_as_real and "
                 "shape ops)");
}

void bind_complex_const(C& cv, const std::string& name, const Value& v) {
  Var* c = cv.c(narrow(v, "tensor '" + name + "'"));
  Var* re = last(cv, c, 0);
  Var* im = last(cv, c, 1);
  name_part(cv, re, name + "_real");
  name_part(cv, im, name + "_imag");
  cv.complex_vars[name] = {re, im};
}

Cx complex_arg(C& cv, const json& n, const char* name) {
  auto it = cv.complex_vars.find(C::tensor_name(n, name));
  if (it != cv.complex_vars.end()) return {it->second.first, it->second.second};
  return {cv.tensor(n, name), nullptr};
}

void out_complex(C& cv, const json& n, Cx v, size_t k) { out_cx(cv, n, v, k); }

void register_complex(OpTable& t) {
  for (const char* k : {"aten.view_as_complex", "aten.view_as_real", "aten.complex", "aten.polar",
                        "aten.real", "aten.imag", "aten.angle", "aten.conj", "aten._conj",
                        "aten.conj_physical", "aten._conj_physical", "aten.view_as_real_copy",
                        "aten.view_as_complex_copy", "aten._conj_copy"})
    t.on(k, complex_ops().at(k));
  register_fft(t);
}

}  // namespace torch_detail
}  // namespace milkit

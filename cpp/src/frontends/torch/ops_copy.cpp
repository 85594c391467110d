// ATen copies, casts and aliases (clone, to, detach, ...), copy_, fill_, zero_.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// copies and casts
void ident(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (auto od = cv.out_dtype(n)) x = cv.cast(x, *od);
  cv.out(n, cv.op("identity", {C::a("x", x)}));
}

void copy_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* src = cv.cast(cv.tensor(n, "src"), C::dtype(x));
  if (src->type() == x->type()) cv.out(n, cv.op("identity", {C::a("x", src)}));
  else cv.out(n, expand_to(cv, n, src, C::shape(x)));
}

void fill_scalar(C& cv, const json& n) {
  Var* x = self(cv, n);
  cv.out(n, fill(cv, shape_of_var(cv, x), cv.f(n, "value", 0), C::dtype(x)));
}

void fill_tensor(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* v = cv.cast(cv.tensor(n, "value"), C::dtype(x));
  cv.out(n, expand_to(cv, n, v, C::shape(x)));
}

void zero_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  cv.out(n, fill(cv, shape_of_var(cv, x), 0, C::dtype(x)));
}

// .item(): the value stays a rank-0 tensor that the ops reading the scalar take as an operand
void item(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (!C::shape(x).empty())
    x = cv.op("reshape", {C::a("x", x), C::a("shape", cv.ci(std::vector<int64_t>{}))});
  auto out = n.find("outputs");
  if (out == n.end() || out->size() != 1 || !(*out)[0].is_object() || (*out)[0].empty())
    cv.fail(n, "expected one scalar output");
  const json& o = (*out)[0].begin().value();
  if (!o.is_object() || !o.contains("as_name"))
    cv.fail(n, "the value of .item() is a constant the program does not name");
  cv.scalar_values[o["as_name"].get<std::string>()] = x;
  // an integer read this way is torch's unbacked symbol (u0): sizes computed from it read x
  if ((*out)[0].contains("as_sym_int")) cv.bind_dim(cv.sym_dim((*out)[0]), cv.cast(x, DataType::Int32));
}

}  // namespace

void register_copy(OpTable& t) {
  t.on({"aten.clone", "aten.contiguous", "aten.alias", "aten.detach", "aten.lift_fresh_copy", "aten.lift_fresh", "aten._to_copy", "aten.to", "aten.type_as", "aten.alias_copy", "aten.detach_copy", "aten.resolve_conj", "aten.resolve_neg", "aten.positive", "aten._to_dim_order_copy", "aten.clone_dim_order"}, ident);
  t.on("aten.copy", copy_op);
  t.on("aten.fill.Scalar", fill_scalar);
  t.on("aten.fill.Tensor", fill_tensor);
  t.on("aten.zero", zero_op);
  t.on({"aten.item", "aten._local_scalar_dense"}, item);
}

}  // namespace torch_detail
}  // namespace milkit

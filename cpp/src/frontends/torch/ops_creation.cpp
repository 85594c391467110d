// ATen factories: zeros / ones / full / empty (and their new_ / _like forms), arange, linspace, eye, scalar_tensor, triangle indices, meshgrid.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// meshgrid(tensors, indexing): each 0-d / 1-d input laid along its own axis and broadcast to the
// grid; "xy" swaps the first two axes of the grid
void meshgrid(C& cv, const json& n) {
  auto vs = cv.tensors(n, "tensors");
  std::string ix = cv.s(n, "indexing", "ij");
  if (ix != "ij" && ix != "xy") cv.fail(n, "meshgrid indexing '" + ix + "' is not supported");
  size_t N = vs.size();
  std::vector<Dim> lens;
  for (auto& v : vs) {
    int r = cv.rank(n, v);
    if (r > 1) cv.fail(n, "meshgrid takes 0-d or 1-d tensors");
    if (r == 0) v = cv.op("expand_dims", {C::a("x", v), C::aints32("axes", {0})});
    lens.push_back(C::shape(v)[0]);
  }
  std::vector<size_t> ax(N);
  std::iota(ax.begin(), ax.end(), 0);
  if (ix == "xy" && N >= 2) std::swap(ax[0], ax[1]);
  std::vector<Dim> grid(N);
  for (size_t k = 0; k < N; ++k) grid[ax[k]] = lens[k];
  std::vector<Var*> outs;
  for (size_t k = 0; k < N; ++k) {
    std::vector<int64_t> axes;
    for (size_t a = 0; a < N; ++a)
      if (a != ax[k]) axes.push_back(static_cast<int64_t>(a));
    Var* v = axes.empty() ? vs[k] : cv.op("expand_dims", {C::a("x", vs[k]), C::aints32("axes", axes)});
    outs.push_back(expand_to(cv, n, v, grid));
  }
  cv.outs(n, outs);
}

// a linspace end point: a number, or a tensor of known value
double known_number(C& cv, const json& n, const char* name) {
  if (C::is_number(n, name)) return cv.f(n, name, 0);
  const Value* v = cv.known(C::tensor_name(n, name));
  if (!v || v->numel() != 1) cv.fail(n, std::string("linspace with a computed '") + name + "' is not supported");
  return v->as_double(0);
}

// tri*_indices(row, col, offset): the (row, col) pairs of the triangle in row-major order
void tri_indices(C& cv, const json& n, bool lower) {
  int64_t rows = cv.i(n, "row", 0), cols = cv.i(n, "col", 0), off = cv.i(n, "offset", 0);
  std::vector<int64_t> is, js;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (lower ? j - i <= off : j - i >= off) is.push_back(i), js.push_back(j);
  if (is.empty()) cv.fail(n, "the triangle has no indices (an empty tensor, which Core ML cannot hold)");
  int64_t cnt = static_cast<int64_t>(is.size());
  is.insert(is.end(), js.begin(), js.end());
  DataType dt = factory_dtype(cv, n, nullptr, DataType::Int32);
  cv.out(n, cv.c(Value::from_ints(dt, {2, cnt}, is)));
}

// factories
void filled(C& cv, const json& n, double v) {
  DataType dt = factory_dtype(cv, n, nullptr, DataType::Float32);
  cv.out(n, fill(cv, cv.shape_var(cv.dims(n, "size")), v, dt));
}

void new_filled(C& cv, const json& n, double v) {
  Var* x = self(cv, n);
  DataType dt = factory_dtype(cv, n, x, C::dtype(x));
  cv.out(n, fill(cv, size_shape(cv, cv.dims(n, "size"), x), v, dt));
}

void empty_strided(C& cv, const json& n) {
  DataType dt = factory_dtype(cv, n, nullptr, DataType::Float32);
  cv.out(n, fill(cv, cv.shape_var(cv.dims(n, "size")), 0, dt));
}

void new_empty_strided(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = factory_dtype(cv, n, x, C::dtype(x));
  cv.out(n, fill(cv, size_shape(cv, cv.dims(n, "size"), x), 0, dt));
}

// linspace(start, end, steps): torch's kernel: step = (end - start) / (steps - 1), the first
// half start + i * step, the second half end - (steps - 1 - i) * step (integers truncated)
void linspace_op(C& cv, const json& n) {
  double s = known_number(cv, n, "start"), e = known_number(cv, n, "end");
  int64_t steps = cv.i(n, "steps", 0);
  if (steps <= 0) cv.fail(n, "linspace with " + std::to_string(steps) + " steps is empty, which Core ML cannot hold");
  DataType dt = factory_dtype(cv, n, nullptr, DataType::Float32);
  bool ints = !is_float(dt);
  if (ints) s = std::trunc(s), e = std::trunc(e);
  std::vector<double> v(static_cast<size_t>(steps));
  double step = steps > 1 ? (e - s) / static_cast<double>(steps - 1) : 0;
  for (int64_t i = 0; i < steps; ++i) {
    double y = i < steps / 2 ? s + step * static_cast<double>(i) : e - step * static_cast<double>(steps - 1 - i);
    v[static_cast<size_t>(i)] = ints ? std::trunc(y) : y;
  }
  if (steps == 1) v[0] = s;
  cv.out(n, cv.c(Value::from_doubles(dt, {steps}, v)));
}

void triu_indices(C& cv, const json& n) { tri_indices(cv, n, false); }

void tril_indices(C& cv, const json& n) { tri_indices(cv, n, true); }

// eye(n, m): i == j over an n x m grid
void eye_op(C& cv, const json& n) {
  DataType dt = factory_dtype(cv, n, nullptr, DataType::Float32);
  const json* na = C::arg(n, "n");
  const json* ma = C::arg(n, "m");
  Dim N = na ? cv.sym_dim(*na) : cv.ctx().constant(0);
  Dim M = ma ? cv.sym_dim(*ma) : N;
  Var* i = cv.op("expand_dims", {C::a("x", range_of(cv, N)), C::aints32("axes", {1})});
  Var* j = cv.op("expand_dims", {C::a("x", range_of(cv, M)), C::aints32("axes", {0})});
  cv.out(n, cv.cast(bin(cv, "equal", i, j), dt));
}

void zeros_op(C& cv, const json& n) { filled(cv, n, 0); }

void ones_op(C& cv, const json& n) { filled(cv, n, 1); }

void empty_memory_format(C& cv, const json& n) { filled(cv, n, 0); }

void empty_op(C& cv, const json& n) { filled(cv, n, 0); }

// a tensor of shape `shp` filled with the node's fill_value: a constant where it is a known number,
// else the value computed at run time (a symbolic size, a tensor's .item())
Var* filled_with_value(C& cv, const json& n, Var* shp, DataType dt) {
  const json* a = C::arg(n, "fill_value");
  if (C::is_number(n, "fill_value") && !a->contains("as_sym_int") && !cv.item_value(*a))
    return fill(cv, shp, cv.f(n, "fill_value", 0), dt);
  // MIL's fill takes a constant value: a run-time one is added to zeros of the shape
  Var* v = cv.scalar_or_tensor(n, "fill_value", dt);
  return cv.op("add", {C::a("x", fill(cv, shp, 0, dt)), C::a("y", v)});
}

void full_op(C& cv, const json& n) {
  DataType dt = factory_dtype(cv, n, nullptr, DataType::Float32);
  cv.out(n, filled_with_value(cv, n, cv.shape_var(cv.dims(n, "size")), dt));
}

void new_zeros(C& cv, const json& n) { new_filled(cv, n, 0); }

void new_ones(C& cv, const json& n) { new_filled(cv, n, 1); }

void new_empty(C& cv, const json& n) { new_filled(cv, n, 0); }

void new_full(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = factory_dtype(cv, n, x, C::dtype(x));
  cv.out(n, filled_with_value(cv, n, size_shape(cv, cv.dims(n, "size"), x), dt));
}

void zeros_like(C& cv, const json& n) { like(cv, n, 0); }

void ones_like(C& cv, const json& n) { like(cv, n, 1); }

void empty_like(C& cv, const json& n) { like(cv, n, 0); }

void full_like(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = factory_dtype(cv, n, x, C::dtype(x));
  cv.out(n, filled_with_value(cv, n, shape_of_var(cv, x), dt));
}

void scalar_tensor(C& cv, const json& n) {
  DataType dt = factory_dtype(cv, n, nullptr, DataType::Float32);
  cv.out(n, cv.op("identity", {C::a("x", cv.scalar_or_tensor(n, "s", dt))}));
}

void arange_op(C& cv, const json& n) {
  DataType dt = factory_dtype(cv, n, nullptr, DataType::Int32);
  // a float range over integer (possibly symbolic) bounds is computed in int32 and cast, so
  // its length stays an expression of the sizes (arange(2 * n, dtype=float) has 2*s0 elements)
  bool ints = true;
  for (const char* name : {"start", "end", "step"}) {
    const json* a = C::arg(n, name);
    if (a && !a->contains("as_int") && !a->contains("as_sym_int")) ints = false;
  }
  DataType rdt = is_float(dt) && ints ? DataType::Int32 : dt;
  auto num = [&](const char* name, double def) -> Var* {
    if (!C::has(n, name)) return cv.cs(def, rdt);
    return cv.scalar_or_tensor(n, name, rdt);
  };
  Var* start = C::has(n, "start") ? num("start", 0) : cv.cs(0, rdt);
  Var* end = num("end", 0);
  Var* step = num("step", 1);
  Var* r = cv.op("range_1d", {C::a("end", end), C::a("start", start), C::a("step", step)});
  cv.out(n, rdt == dt ? r : cv.cast(r, dt));
}

}  // namespace

void register_creation(OpTable& t) {
  t.on("aten.empty_strided", empty_strided);
  t.on("aten.new_empty_strided", new_empty_strided);
  t.on("aten.meshgrid", meshgrid);
  t.on("aten.linspace", linspace_op);
  t.on("aten.triu_indices", triu_indices);
  t.on("aten.tril_indices", tril_indices);
  t.on("aten.eye", eye_op);
  t.on("aten.zeros", zeros_op);
  t.on("aten.ones", ones_op);
  t.on("aten.empty.memory_format", empty_memory_format);
  t.on("aten.empty", empty_op);
  t.on("aten.full", full_op);
  t.on("aten.new_zeros", new_zeros);
  t.on("aten.new_ones", new_ones);
  t.on("aten.new_empty", new_empty);
  t.on("aten.new_full", new_full);
  t.on("aten.zeros_like", zeros_like);
  t.on("aten.ones_like", ones_like);
  t.on("aten.empty_like", empty_like);
  t.on("aten.full_like", full_like);
  t.on("aten.scalar_tensor", scalar_tensor);
  t.on("aten.arange", arange_op);
}

}  // namespace torch_detail
}  // namespace milkit

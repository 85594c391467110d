// ONNX control flow: If -> cond, Loop -> while_loop (scan outputs collected in lists).
#include "converter.h"

namespace milkit {
namespace onnx_detail {

namespace {

using onnx::GraphProto;
using onnx::NodeProto;
using C = Converter;

const GraphProto& graph_attr(C& cv, const NodeProto& n, const char* name) {
  auto* a = C::attr(n, name);
  if (!a || !a->has_g()) cv.fail(n, std::string("attribute '") + name + "' (a graph) is required");
  return a->g();
}

// Converts a subgraph in a new scope under the current one; `inputs` bind its inputs.
std::vector<Var*> subgraph(C& cv, const GraphProto& g, const std::vector<Var*>& inputs) {
  Scope inner;
  inner.parent = cv.scope;
  Scope* saved = cv.scope;
  cv.scope = &inner;
  for (size_t i = 0; i < inputs.size() && i < static_cast<size_t>(g.input_size()); ++i)
    inner.vars[g.input(static_cast<int>(i)).name()] = inputs[i];
  cv.add_initializers(g);
  cv.convert_nodes(g.node(), "subgraph '" + g.name() + "'");
  std::vector<Var*> outs;
  for (auto& o : g.output()) outs.push_back(cv.var(o.name()));
  cv.scope = saved;
  return outs;
}

Var* scalar_bool(C& cv, Var* v) {
  if (C::dtype(v) != DataType::Bool) v = cv.cast(v, DataType::Bool);
  if (v->type()->has_rank() && v->type()->rank() == 0) return v;
  return cv.op("reshape", {C::a("x", v), C::aints32("shape", {})});
}

void if_op(C& cv, const NodeProto& n) {
  Var* pred = scalar_bool(cv, cv.in(n, 0));
  const GraphProto& tg = graph_attr(cv, n, "then_branch");
  const GraphProto& eg = graph_attr(cv, n, "else_branch");
  if (tg.output_size() != n.output_size() || eg.output_size() != n.output_size())
    cv.fail(n, "the branches must return one value per output");
  // a known predicate picks a branch at conversion time
  if (pred->has_value()) {
    auto outs = subgraph(cv, pred->value()->as_int(0) ? tg : eg, {});
    for (int i = 0; i < n.output_size(); ++i) cv.out(n, i, outs[static_cast<size_t>(i)]);
    return;
  }
  auto branch = [&cv](const GraphProto& g) {
    return [&cv, &g](const std::vector<Var*>&) {
      auto outs = subgraph(cv, g, {});
      // a branch output must be made inside the branch
      for (auto& v : outs) v = cv.op("identity", {C::a("x", v)});
      return outs;
    };
  };
  std::vector<Arg> args = {C::a("pred", pred)};
  auto outs = cv.b.create("cond", args, "", cond_blocks(branch(tg), branch(eg)));
  for (int i = 0; i < n.output_size(); ++i) cv.out(n, i, outs[static_cast<size_t>(i)]);
}

void loop_op(C& cv, const NodeProto& n) {
  const GraphProto& body = graph_attr(cv, n, "body");
  int nv = n.input_size() - 2;  // loop-carried values
  if (nv < 0) cv.fail(n, "needs the inputs M and cond (either may be empty)");
  int k_scan = body.output_size() - 1 - nv;
  if (k_scan < 0 || body.input_size() != nv + 2)
    cv.fail(n, "the body must take (iteration, cond, values...) and return (cond, values..., scan outputs...)");
  Var* m = C::has(n, 0) ? cv.cast(cv.in(n, 0), DataType::Int32) : nullptr;
  if (m && m->type()->rank() != 0) m = cv.op("reshape", {C::a("x", m), C::aints32("shape", {})});
  Var* cond0 = C::has(n, 1) ? scalar_bool(cv, cv.in(n, 1)) : cv.c(Value::scalar_bool(true));
  Var* i0 = cv.c(Value::scalar_int(DataType::Int32, 0));
  std::vector<Var*> loop_vars = {i0, cond0};
  for (int i = 0; i < nv; ++i) loop_vars.push_back(cv.in(n, 2 + i));
  // scan outputs: one list per output, written at index i
  std::vector<DataType> scan_dt;
  for (int k = 0; k < k_scan; ++k) {
    auto& o = body.output(1 + nv + k);
    auto dt = o.has_type() && o.type().has_tensor_type() ? mil_dtype(o.type().tensor_type().elem_type()) : std::nullopt;
    if (!dt || !o.type().tensor_type().has_shape()) cv.fail(n, "scan output '" + o.name() + "' needs a declared type and shape");
    // the elements' dims are symbols: the body may make them from run-time values
    std::vector<ArgItem> es;
    for (int d = 0; d < o.type().tensor_type().shape().dim_size(); ++d)
      es.push_back(ArgItem{nullptr, std::make_shared<const Value>(Value::scalar_string(cv.ctx().free_name("scan" + std::to_string(k) + "_d")))});
    std::vector<Arg> args = {C::a("init_length", Value::scalar_int(DataType::Int32, 0)), Arg{"elem_shape", es, true},
                             C::astr("dtype", std::string(dtype_name(*dt)))};
    loop_vars.push_back(cv.op("make_list", std::move(args)));
    scan_dt.push_back(*dt);
  }
  Arg lv{"loop_vars", {}, true};
  for (Var* v : loop_vars) lv.items.push_back(ArgItem{v, nullptr});
  BlockFn cond_fn = [&cv, m](const std::vector<Var*>& vs) -> std::vector<Var*> {
    Var* go = vs[1];
    if (m) go = cv.op("logical_and", {C::a("x", go), C::a("y", cv.op("less", {C::a("x", vs[0]), C::a("y", m)}))});
    else go = cv.op("identity", {C::a("x", go)});
    return {go};
  };
  BlockFn body_fn = [&cv, &body, nv, k_scan](const std::vector<Var*>& vs) -> std::vector<Var*> {
    std::vector<Var*> ins = {vs[0], vs[1]};
    for (int i = 0; i < nv; ++i) ins.push_back(vs[static_cast<size_t>(2 + i)]);
    auto outs = subgraph(cv, body, ins);
    std::vector<Var*> next = {cv.op("add", {C::a("x", vs[0]), C::a("y", Value::scalar_int(DataType::Int32, 1))}),
                              scalar_bool(cv, outs[0])};
    for (int i = 0; i < nv; ++i) next.push_back(outs[static_cast<size_t>(1 + i)]);
    for (int k = 0; k < k_scan; ++k)
      next.push_back(cv.op("list_write", {C::a("ls", vs[static_cast<size_t>(2 + nv + k)]), C::a("index", vs[0]),
                                          C::a("value", outs[static_cast<size_t>(1 + nv + k)])}));
    for (auto& v : next)
      if (!v->op() || v->input_of()) v = cv.op("identity", {C::a("x", v)});
    return next;
  };
  std::vector<Arg> args = {lv};
  auto outs = cv.b.create("while_loop", args, "", while_loop_blocks(cond_fn, body_fn));
  for (int i = 0; i < nv; ++i) cv.out(n, i, outs[static_cast<size_t>(2 + i)]);
  for (int k = 0; k < k_scan; ++k) {
    Var* ls = outs[static_cast<size_t>(2 + nv + k)];
    Var* len = cv.op("list_length", {C::a("ls", ls)});
    Var* idx = cv.op("range_1d", {C::a("start", Value::scalar_int(DataType::Int32, 0)), C::a("end", len),
                                  C::a("step", Value::scalar_int(DataType::Int32, 1))});
    cv.out(n, nv + k, cv.op("list_gather", {C::a("ls", ls), C::a("indices", idx)}));
  }
}

}  // namespace

void register_control_flow(OpTable& t) {
  t["If"] = if_op;
  t["Loop"] = loop_op;
}

}  // namespace onnx_detail
}  // namespace milkit

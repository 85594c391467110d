// ONNX control flow: If -> cond, Loop and Scan -> while_loop (scan outputs collected in lists).
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


void scan_op(C& cv, const NodeProto& n) {
  if (cv.opset < 9) cv.fail(n, "Scan before opset 9 (with a batch axis) is not supported");
  const GraphProto& body = graph_attr(cv, n, "body");
  int m = static_cast<int>(C::ai(n, "num_scan_inputs", 0));
  int nstate = n.input_size() - m;
  int k_out = body.output_size() - nstate;
  if (m <= 0 || nstate < 0 || k_out < 0 || body.input_size() != nstate + m)
    cv.fail(n, "the body must take (states..., scan slices...) and return (states..., scan outputs...)");
  auto in_axes = C::aints(n, "scan_input_axes", std::vector<int64_t>(static_cast<size_t>(m), 0));
  auto in_dirs = C::aints(n, "scan_input_directions", std::vector<int64_t>(static_cast<size_t>(m), 0));
  auto out_axes = C::aints(n, "scan_output_axes", std::vector<int64_t>(static_cast<size_t>(k_out), 0));
  auto out_dirs = C::aints(n, "scan_output_directions", std::vector<int64_t>(static_cast<size_t>(k_out), 0));
  std::vector<Var*> scans;
  for (int j = 0; j < m; ++j) {
    Var* x = cv.in(n, nstate + j);
    int64_t ax = cv.axis(n, in_axes[static_cast<size_t>(j)], cv.rank(n, x));
    if (ax != 0) {  // iterate along axis 0
      std::vector<int64_t> perm = {ax};
      for (int64_t i = 0; i < cv.rank(n, x); ++i)
        if (i != ax) perm.push_back(i);
      x = cv.op("transpose", {C::a("x", x), C::aints32("perm", perm)});
    }
    if (in_dirs[static_cast<size_t>(j)] != 0) x = cv.op("reverse", {C::a("x", x), C::aints32("axes", {0})});
    scans.push_back(x);
  }
  Var* len = cv.op("gather", {C::a("x", cv.op("shape", {C::a("x", scans[0])})), C::a("indices", Value::scalar_int(DataType::Int32, 0))});
  std::vector<Var*> loop_vars = {cv.c(Value::scalar_int(DataType::Int32, 0))};
  for (int i = 0; i < nstate; ++i) loop_vars.push_back(cv.in(n, i));
  for (int k = 0; k < k_out; ++k) {
    auto& o = body.output(nstate + k);
    auto dt = o.has_type() && o.type().has_tensor_type() ? mil_dtype(o.type().tensor_type().elem_type()) : std::nullopt;
    if (!dt || !o.type().tensor_type().has_shape()) cv.fail(n, "scan output '" + o.name() + "' needs a declared type and rank");
    std::vector<ArgItem> es;
    for (int d = 0; d < o.type().tensor_type().shape().dim_size(); ++d)
      es.push_back(ArgItem{nullptr, std::make_shared<const Value>(Value::scalar_string(cv.ctx().free_name("scan" + std::to_string(k) + "_d")))});
    loop_vars.push_back(cv.op("make_list", {C::a("init_length", Value::scalar_int(DataType::Int32, 0)), Arg{"elem_shape", es, true},
                                            C::astr("dtype", std::string(dtype_name(*dt)))}));
  }
  Arg lv{"loop_vars", {}, true};
  for (Var* v : loop_vars) lv.items.push_back(ArgItem{v, nullptr});
  BlockFn cond_fn = [&cv, len](const std::vector<Var*>& vs) -> std::vector<Var*> {
    return {cv.op("less", {C::a("x", vs[0]), C::a("y", len)})};
  };
  BlockFn body_fn = [&cv, &body, &scans, nstate, k_out, m](const std::vector<Var*>& vs) -> std::vector<Var*> {
    std::vector<Var*> ins;
    for (int i = 0; i < nstate; ++i) ins.push_back(vs[static_cast<size_t>(1 + i)]);
    for (int j = 0; j < m; ++j)
      ins.push_back(cv.op("gather", {C::a("x", scans[static_cast<size_t>(j)]), C::a("indices", vs[0]), C::ai32("axis", 0)}));
    auto outs = subgraph(cv, body, ins);
    std::vector<Var*> next = {cv.op("add", {C::a("x", vs[0]), C::a("y", Value::scalar_int(DataType::Int32, 1))})};
    for (int i = 0; i < nstate; ++i) next.push_back(outs[static_cast<size_t>(i)]);
    for (int k = 0; k < k_out; ++k)
      next.push_back(cv.op("list_write", {C::a("ls", vs[static_cast<size_t>(1 + nstate + k)]), C::a("index", vs[0]),
                                          C::a("value", outs[static_cast<size_t>(nstate + k)])}));
    for (auto& v : next)
      if (!v->op() || v->input_of()) v = cv.op("identity", {C::a("x", v)});
    return next;
  };
  std::vector<Arg> args = {lv};
  auto outs = cv.b.create("while_loop", args, "", while_loop_blocks(cond_fn, body_fn));
  for (int i = 0; i < nstate; ++i) cv.out(n, i, outs[static_cast<size_t>(1 + i)]);
  for (int k = 0; k < k_out; ++k) {
    Var* ls = outs[static_cast<size_t>(1 + nstate + k)];
    Var* idx = cv.op("range_1d", {C::a("start", Value::scalar_int(DataType::Int32, 0)), C::a("end", cv.op("list_length", {C::a("ls", ls)})),
                                  C::a("step", Value::scalar_int(DataType::Int32, 1))});
    Var* y = cv.op("list_gather", {C::a("ls", ls), C::a("indices", idx)});
    if (out_dirs[static_cast<size_t>(k)] != 0) y = cv.op("reverse", {C::a("x", y), C::aints32("axes", {0})});
    int r = cv.rank(n, y);
    int64_t ax = cv.axis(n, out_axes[static_cast<size_t>(k)], r);
    if (ax != 0) {
      std::vector<int64_t> perm;
      for (int64_t i = 1; i <= ax; ++i) perm.push_back(i);
      perm.push_back(0);
      for (int64_t i = ax + 1; i < r; ++i) perm.push_back(i);
      y = cv.op("transpose", {C::a("x", y), C::aints32("perm", perm)});
    }
    cv.out(n, nstate + k, y);
  }
}

}  // namespace

void register_control_flow(OpTable& t) {
  t["If"] = if_op;
  t["Loop"] = loop_op;
  t["Scan"] = scan_op;
}

}  // namespace onnx_detail
}  // namespace milkit

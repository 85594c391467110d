// ONNX operators: control flow (If, Loop, Scan).
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

const GraphProto& graph_attr(C& cv, const NodeProto& n, const char* name) {
  const GraphProto* g = C::attr_graph(n, name);
  if (!g) cv.fail(n, std::string("attribute '") + name + "' (a graph) is required");
  return *g;
}

std::vector<Var*> subgraph(C& cv, const GraphProto& g, const std::vector<Var*>& inputs) {
  return convert_subgraph(cv, g, inputs);
}

// Thrown by a probing body once it has learned the types of the scan outputs.
struct ProbeDone {};

// The element (dtype, rank) of each scan output: declared by the body graph's outputs
// [first, first + count), or learned by converting the body once in a loop that is then dropped.
std::vector<std::pair<DataType, int>> scan_elem_types(
    C& cv, const NodeProto& n, const GraphProto& body, int first, int count,
    const std::vector<Var*>& probe_vars, const BlockFn& probe_cond,
    const std::function<std::vector<Var*>(const std::vector<Var*>&)>& probe_body) {
  std::vector<std::pair<DataType, int>> r;
  bool all = true;
  for (int k = 0; k < count; ++k) {
    auto& o = body.output(first + k);
    auto dt = o.has_type() && o.type().has_tensor_type()
                  ? mil_dtype(o.type().tensor_type().elem_type())
                  : std::nullopt;
    if (!dt || !o.type().tensor_type().has_shape()) {
      all = false;
      break;
    }
    r.emplace_back(*dt, o.type().tensor_type().shape().dim_size());
  }
  if (all) return r;
  r.clear();
  Arg lv{"loop_vars", {}, true};
  for (Var* v : probe_vars) lv.items.push_back(ArgItem{v, nullptr});
  BlockFn body_fn = [&](const std::vector<Var*>& vs) -> std::vector<Var*> {
    auto outs = probe_body(vs);
    for (int k = 0; k < count; ++k) {
      Var* v = outs[static_cast<size_t>(first + k)];
      if (!v->type()->is_tensor() || !v->type()->has_rank())
        cv.fail(n, "the rank of scan output '" + body.output(first + k).name() + "' is not known");
      r.emplace_back(C::dtype(v), v->type()->rank());
    }
    throw ProbeDone{};
  };
  try {
    std::vector<Arg> args = {lv};
    cv.b.create("while_loop", args, "", while_loop_blocks(probe_cond, body_fn));
  } catch (const ProbeDone&) {
  }
  if (static_cast<int>(r.size()) != count)
    cv.fail(n, "the types of the scan outputs could not be learned");
  return r;
}

Var* scalar_bool(C& cv, Var* v) {
  if (C::dtype(v) != DataType::Bool) v = cv.cast(v, DataType::Bool);
  if (v->type()->has_rank() && v->type()->rank() == 0) return v;
  return cv.op("reshape", {C::arg("x", v), C::arg_ints32("shape", {})});
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
      for (auto& v : outs) v = cv.op("identity", {C::arg("x", v)});
      return outs;
    };
  };
  std::vector<Arg> args = {C::arg("pred", pred)};
  std::vector<Var*> outs;
  try {
    outs = cv.b.create("cond", args, "", cond_blocks(branch(tg), branch(eg)));
  } catch (const ValueError& e) {
    // branches whose outputs differ in rank or dtype: only a known condition can pick one
    if (std::string(e.what()).find("mismatch") == std::string::npos) throw;
    cv.fail(n, std::string(e.what()) + "; the condition (input '" + n.input(0) +
                   "') must be known at conversion time");
  }
  for (int i = 0; i < n.output_size(); ++i) cv.out(n, i, outs[static_cast<size_t>(i)]);
}

void loop_op(C& cv, const NodeProto& n) {
  const GraphProto& body = graph_attr(cv, n, "body");
  int nv = n.input_size() - 2;  // loop-carried values
  if (nv < 0) cv.fail(n, "needs the inputs M and cond (either may be empty)");
  int k_scan = body.output_size() - 1 - nv;
  if (k_scan < 0 || body.input_size() != nv + 2)
    cv.fail(n,
            "the body must take (iteration, cond, values...) and return (cond, values..., scan "
            "outputs...)");
  Var* m = C::has(n, 0) ? cv.cast(cv.in(n, 0), DataType::Int32) : nullptr;
  if (m && m->type()->rank() != 0)
    m = cv.op("reshape", {C::arg("x", m), C::arg_ints32("shape", {})});
  Var* cond0 = C::has(n, 1) ? scalar_bool(cv, cv.in(n, 1)) : cv.c(Value::scalar_bool(true));
  Var* i0 = cv.c(Value::scalar_int(DataType::Int32, 0));
  std::vector<Var*> loop_vars = {i0, cond0};
  for (int i = 0; i < nv; ++i) loop_vars.push_back(cv.in(n, 2 + i));
  BlockFn cond_fn = [&cv, m](const std::vector<Var*>& vs) -> std::vector<Var*> {
    Var* go = vs[1];
    if (m)
      go = cv.op("logical_and", {C::arg("x", go),
                                 C::arg("y", cv.op("less", {C::arg("x", vs[0]), C::arg("y", m)}))});
    else
      go = cv.op("identity", {C::arg("x", go)});
    return {go};
  };
  // scan outputs: one list per output, written at index i
  auto elems = scan_elem_types(cv, n, body, 1 + nv, k_scan, loop_vars, cond_fn,
                               [&](const std::vector<Var*>& vs) {
                                 std::vector<Var*> ins(vs.begin(), vs.end());
                                 return subgraph(cv, body, ins);
                               });
  for (int k = 0; k < k_scan; ++k) {
    // the elements' dims are symbols: the body may make them from run-time values
    std::vector<ArgItem> es;
    for (int d = 0; d < elems[static_cast<size_t>(k)].second; ++d)
      es.push_back(ArgItem{nullptr, std::make_shared<const Value>(Value::scalar_string(
                                        cv.ctx().free_name("scan" + std::to_string(k) + "_d")))});
    std::vector<Arg> args = {
        C::arg("init_length", Value::scalar_int(DataType::Int32, 0)), Arg{"elem_shape", es, true},
        C::arg_str("dtype", std::string(dtype_name(elems[static_cast<size_t>(k)].first)))};
    loop_vars.push_back(cv.op("make_list", std::move(args)));
  }
  Arg lv{"loop_vars", {}, true};
  for (Var* v : loop_vars) lv.items.push_back(ArgItem{v, nullptr});
  BlockFn body_fn = [&cv, &body, nv, k_scan](const std::vector<Var*>& vs) -> std::vector<Var*> {
    std::vector<Var*> ins = {vs[0], vs[1]};
    for (int i = 0; i < nv; ++i) ins.push_back(vs[static_cast<size_t>(2 + i)]);
    auto outs = subgraph(cv, body, ins);
    std::vector<Var*> next = {
        cv.op("add", {C::arg("x", vs[0]), C::arg("y", Value::scalar_int(DataType::Int32, 1))}),
        scalar_bool(cv, outs[0])};
    for (int i = 0; i < nv; ++i) next.push_back(outs[static_cast<size_t>(1 + i)]);
    for (int k = 0; k < k_scan; ++k)
      next.push_back(cv.op(
          "list_write", {C::arg("ls", vs[static_cast<size_t>(2 + nv + k)]), C::arg("index", vs[0]),
                         C::arg("value", outs[static_cast<size_t>(1 + nv + k)])}));
    for (auto& v : next)
      if (!v->op() || v->input_of()) v = cv.op("identity", {C::arg("x", v)});
    return next;
  };
  std::vector<Arg> args = {lv};
  auto outs = cv.b.create("while_loop", args, "", while_loop_blocks(cond_fn, body_fn));
  for (int i = 0; i < nv; ++i) cv.out(n, i, outs[static_cast<size_t>(2 + i)]);
  for (int k = 0; k < k_scan; ++k) {
    Var* ls = outs[static_cast<size_t>(2 + nv + k)];
    Var* len = cv.op("list_length", {C::arg("ls", ls)});
    Var* idx = cv.op("range_1d",
                     {C::arg("start", Value::scalar_int(DataType::Int32, 0)), C::arg("end", len),
                      C::arg("step", Value::scalar_int(DataType::Int32, 1))});
    cv.out(n, nv + k, cv.op("list_gather", {C::arg("ls", ls), C::arg("indices", idx)}));
  }
}

// One Scan over states and scan inputs (opset 9's form): returns the final states, then the scan
// outputs.
std::vector<Var*> run_scan(C& cv, const NodeProto& n, const GraphProto& body,
                           const std::vector<Var*>& state_in, const std::vector<Var*>& scan_in,
                           const std::vector<int64_t>& in_axes, const std::vector<int64_t>& in_dirs,
                           const std::vector<int64_t>& out_axes,
                           const std::vector<int64_t>& out_dirs) {
  int m = static_cast<int>(scan_in.size()), nstate = static_cast<int>(state_in.size());
  int k_out = body.output_size() - nstate;
  std::vector<Var*> result;
  std::vector<Var*> scans;
  for (int j = 0; j < m; ++j) {
    Var* x = scan_in[static_cast<size_t>(j)];
    int64_t ax = cv.axis(n, in_axes[static_cast<size_t>(j)], cv.rank(n, x));
    if (ax != 0) {  // iterate along axis 0
      std::vector<int64_t> perm = {ax};
      for (int64_t i = 0; i < cv.rank(n, x); ++i)
        if (i != ax) perm.push_back(i);
      x = cv.op("transpose", {C::arg("x", x), C::arg_ints32("perm", perm)});
    }
    if (in_dirs[static_cast<size_t>(j)] != 0)
      x = cv.op("reverse", {C::arg("x", x), C::arg_ints32("axes", {0})});
    scans.push_back(x);
  }
  Var* len = cv.op("gather", {C::arg("x", cv.op("shape", {C::arg("x", scans[0])})),
                              C::arg("indices", Value::scalar_int(DataType::Int32, 0))});
  std::vector<Var*> loop_vars = {cv.c(Value::scalar_int(DataType::Int32, 0))};
  for (int i = 0; i < nstate; ++i) loop_vars.push_back(state_in[static_cast<size_t>(i)]);
  BlockFn cond_fn = [&cv, len](const std::vector<Var*>& vs) -> std::vector<Var*> {
    return {cv.op("less", {C::arg("x", vs[0]), C::arg("y", len)})};
  };
  auto slices = [&cv, &scans, m](Var* i) {
    std::vector<Var*> r;
    for (int j = 0; j < m; ++j)
      r.push_back(cv.op("gather", {C::arg("x", scans[static_cast<size_t>(j)]), C::arg("indices", i),
                                   C::arg_i32("axis", 0)}));
    return r;
  };
  auto elems = scan_elem_types(cv, n, body, nstate, k_out, loop_vars, cond_fn,
                               [&](const std::vector<Var*>& vs) {
                                 std::vector<Var*> ins(vs.begin() + 1, vs.end());
                                 auto sl = slices(vs[0]);
                                 ins.insert(ins.end(), sl.begin(), sl.end());
                                 return subgraph(cv, body, ins);
                               });
  for (int k = 0; k < k_out; ++k) {
    std::vector<ArgItem> es;
    for (int d = 0; d < elems[static_cast<size_t>(k)].second; ++d)
      es.push_back(ArgItem{nullptr, std::make_shared<const Value>(Value::scalar_string(
                                        cv.ctx().free_name("scan" + std::to_string(k) + "_d")))});
    loop_vars.push_back(cv.op(
        "make_list",
        {C::arg("init_length", Value::scalar_int(DataType::Int32, 0)), Arg{"elem_shape", es, true},
         C::arg_str("dtype", std::string(dtype_name(elems[static_cast<size_t>(k)].first)))}));
  }
  Arg lv{"loop_vars", {}, true};
  for (Var* v : loop_vars) lv.items.push_back(ArgItem{v, nullptr});
  BlockFn body_fn = [&cv, &body, &slices, nstate,
                     k_out](const std::vector<Var*>& vs) -> std::vector<Var*> {
    std::vector<Var*> ins;
    for (int i = 0; i < nstate; ++i) ins.push_back(vs[static_cast<size_t>(1 + i)]);
    auto sl = slices(vs[0]);
    ins.insert(ins.end(), sl.begin(), sl.end());
    auto outs = subgraph(cv, body, ins);
    std::vector<Var*> next = {
        cv.op("add", {C::arg("x", vs[0]), C::arg("y", Value::scalar_int(DataType::Int32, 1))})};
    for (int i = 0; i < nstate; ++i) next.push_back(outs[static_cast<size_t>(i)]);
    for (int k = 0; k < k_out; ++k)
      next.push_back(cv.op("list_write", {C::arg("ls", vs[static_cast<size_t>(1 + nstate + k)]),
                                          C::arg("index", vs[0]),
                                          C::arg("value", outs[static_cast<size_t>(nstate + k)])}));
    for (auto& v : next)
      if (!v->op() || v->input_of()) v = cv.op("identity", {C::arg("x", v)});
    return next;
  };
  std::vector<Arg> args = {lv};
  auto outs = cv.b.create("while_loop", args, "", while_loop_blocks(cond_fn, body_fn));
  for (int i = 0; i < nstate; ++i) result.push_back(outs[static_cast<size_t>(1 + i)]);
  for (int k = 0; k < k_out; ++k) {
    Var* ls = outs[static_cast<size_t>(1 + nstate + k)];
    Var* idx = cv.op("range_1d", {C::arg("start", Value::scalar_int(DataType::Int32, 0)),
                                  C::arg("end", cv.op("list_length", {C::arg("ls", ls)})),
                                  C::arg("step", Value::scalar_int(DataType::Int32, 1))});
    Var* y = cv.op("list_gather", {C::arg("ls", ls), C::arg("indices", idx)});
    if (out_dirs[static_cast<size_t>(k)] != 0)
      y = cv.op("reverse", {C::arg("x", y), C::arg_ints32("axes", {0})});
    int r = cv.rank(n, y);
    int64_t ax = cv.axis(n, out_axes[static_cast<size_t>(k)], r);
    if (ax != 0) {
      std::vector<int64_t> perm;
      for (int64_t i = 1; i <= ax; ++i) perm.push_back(i);
      perm.push_back(0);
      for (int64_t i = ax + 1; i < r; ++i) perm.push_back(i);
      y = cv.op("transpose", {C::arg("x", y), C::arg_ints32("perm", perm)});
    }
    result.push_back(y);
  }
  return result;
}

// A Scan node's body and counts: scan inputs, states (inputs after the first `first`), outputs.
struct ScanShape {
  const GraphProto* body;
  int m, nstate, k_out;
};

ScanShape scan_shape(C& cv, const NodeProto& n, int first) {
  const GraphProto& body = graph_attr(cv, n, "body");
  int m = static_cast<int>(C::attr_int(n, "num_scan_inputs", 0));
  int nstate = n.input_size() - first - m;
  int k_out = body.output_size() - nstate;
  if (m <= 0 || nstate < 0 || k_out < 0 || body.input_size() != nstate + m)
    cv.fail(
        n,
        "the body must take (states..., scan slices...) and return (states..., scan outputs...)");
  return {&body, m, nstate, k_out};
}

// Scan from opset 9: no batch axis; axes and directions per scan input and output.
void scan_v9(C& cv, const NodeProto& n) {
  auto [body, m, nstate, k_out] = scan_shape(cv, n, 0);
  std::vector<Var*> st, sc;
  for (int i = 0; i < nstate; ++i) st.push_back(cv.in(n, i));
  for (int j = 0; j < m; ++j) sc.push_back(cv.in(n, nstate + j));
  auto outs = run_scan(
      cv, n, *body, st, sc,
      C::attr_ints(n, "scan_input_axes", std::vector<int64_t>(static_cast<size_t>(m), 0)),
      C::attr_ints(n, "scan_input_directions", std::vector<int64_t>(static_cast<size_t>(m), 0)),
      C::attr_ints(n, "scan_output_axes", std::vector<int64_t>(static_cast<size_t>(k_out), 0)),
      C::attr_ints(n, "scan_output_directions",
                   std::vector<int64_t>(static_cast<size_t>(k_out), 0)));
  for (size_t i = 0; i < outs.size(); ++i) cv.out(n, static_cast<int>(i), outs[i]);
}

// Scan-8: sequence_lens first, a batch axis 0 on states and scan inputs, sequences along axis 1;
// each batch entry scanned on its own, the results stacked.
void scan_v8(C& cv, const NodeProto& n) {
  auto [body, m, nstate, k_out] = scan_shape(cv, n, 1);
  if (C::has(n, 0))
    cv.fail(n,
            "sequence_lens of Scan-8 is not supported (every sequence must have the full length)");
  std::vector<Var*> st, sc;
  for (int i = 0; i < nstate; ++i) st.push_back(cv.in(n, 1 + i));
  for (int j = 0; j < m; ++j) sc.push_back(cv.in(n, 1 + nstate + j));
  const Dim& bd = C::shape(nstate ? st[0] : sc[0])[0];
  if (!bd->is_const()) cv.fail(n, "Scan-8 needs the batch size to be known");
  auto dirs = C::attr_ints(n, "directions", std::vector<int64_t>(static_cast<size_t>(m), 0));
  std::vector<std::vector<Var*>> per(static_cast<size_t>(nstate + k_out));
  for (int64_t b = 0; b < bd->value(); ++b) {
    auto pick = [&](Var* v) {
      return cv.op("gather",
                   {C::arg("x", v), C::arg("indices", Value::scalar_int(DataType::Int32, b)),
                    C::arg_i32("axis", 0)});
    };
    std::vector<Var*> sb, cb;
    for (Var* v : st) sb.push_back(pick(v));
    for (Var* v : sc) cb.push_back(pick(v));
    auto outs = run_scan(cv, n, *body, sb, cb, std::vector<int64_t>(static_cast<size_t>(m), 0),
                         dirs, std::vector<int64_t>(static_cast<size_t>(k_out), 0),
                         std::vector<int64_t>(static_cast<size_t>(k_out), 0));
    for (size_t i = 0; i < outs.size(); ++i)
      per[i].push_back(cv.op("expand_dims", {C::arg("x", outs[i]), C::arg_ints32("axes", {0})}));
  }
  for (size_t i = 0; i < per.size(); ++i) {
    Arg v{"values", {}, true};
    for (Var* x : per[i]) v.items.push_back(ArgItem{x, nullptr});
    cv.out(n, static_cast<int>(i),
           per[i].size() == 1 ? per[i][0] : cv.op("concat", {v, C::arg_i32("axis", 0)}));
  }
}

}  // namespace

std::vector<Var*> convert_subgraph(Converter& cv, const onnx::GraphProto& g,
                                   const std::vector<Var*>& inputs) {
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

void register_control_flow(OpTable& t) {
  t.on("If", 1, if_op);
  t.on("Loop", 1, loop_op);
  t.on("Scan", 8, scan_v8);
  t.on("Scan", 9, scan_v9);
}

}  // namespace onnx_detail
}  // namespace milkit

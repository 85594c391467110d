// Higher-order operators: cond, scan, while_loop, and the regions converted inline (wrap_with_set_grad_enabled, wrap_with_autocast).
#include <cmath>
#include <memory>

#include "milkit/compose/rnn.h"
#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// The node's subgraph converted inline with the operands after it, outputs bound.
void inline_subgraph(C& cv, const json& n) {
  auto [g, pos] = subgraph_of(n);
  if (!g) cv.fail(n, "the higher-order operator has no subgraph argument");
  std::vector<const json*> args;
  const json& ins = n.at("inputs");
  for (size_t k = pos + 1; k < ins.size(); ++k) args.push_back(&ins[k].at("arg"));
  cv.outs(n, cv.convert_subgraph(n, *g, args));
}

// ---- torch.ops.higher_order.scan
// -----------------------------------------------------------------
// The positional argument k of a higher-order op (their inputs have no names).
const json& pos_arg(C& cv, const json& n, size_t k) {
  auto& ins = n.at("inputs");
  if (k >= ins.size()) cv.fail(n, "expected at least " + std::to_string(k + 1) + " arguments");
  return ins[k].at("arg");
}

std::vector<std::string> names_of(C& cv, const json& n, const json& a) {
  std::vector<std::string> r;
  if (a.contains("as_tensors")) {
    for (auto& e : a["as_tensors"]) r.push_back(e.at("name").get<std::string>());
  } else if (a.contains("as_tensor")) {
    r.push_back(a["as_tensor"].at("name").get<std::string>());
  } else if (!a.contains("as_none")) {
    cv.fail(n, "expected a list of tensors, got " + a.dump());
  }
  return r;
}

// Converts the nodes of `g` (an as_graph's graph) with its inputs bound to `vars` and then to
// the outer tensors named `extra` (weights stay compile-time values inside); returns its outputs.
// The subgraph has its own names (and tensor_values); its vars are named with a prefix.
std::vector<Var*> subgraph(C& cv, const json& n, const json& g, const std::vector<Var*>& vars,
                           const std::vector<std::string>& extra, const std::string& prefix) {
  Converter sub(cv.b, g, cv.source);
  sub.sym_sources = cv.sym_sources;
  sub.name_prefix = prefix;
  auto& gin = g.at("inputs");
  if (gin.size() != vars.size() + extra.size())
    cv.fail(n, "the subgraph takes " + std::to_string(gin.size()) + " inputs, " +
                   std::to_string(vars.size() + extra.size()) + " are given");
  for (size_t k = 0; k < gin.size(); ++k) {
    if (!gin[k].contains("as_tensor"))
      cv.fail(n, "subgraph input " + std::to_string(k) + " is not a tensor");
    std::string name = gin[k]["as_tensor"].at("name").get<std::string>();
    if (k < vars.size()) {
      sub.vars[name] = vars[k];
      continue;
    }
    const std::string& outer = extra[k - vars.size()];
    auto ct = cv.consts.find(outer);
    if (ct != cv.consts.end())
      sub.consts[name] = ct->second;
    else
      sub.vars[name] = cv.var(outer);
  }
  for (auto& node : g.at("nodes"))
    if (!skip_node(node)) sub.convert_node(node);
  std::vector<Var*> outs;
  for (auto& o : g.at("outputs")) {
    if (!o.contains("as_tensor")) cv.fail(n, "subgraph output " + o.dump() + " is not a tensor");
    outs.push_back(sub.var(o["as_tensor"].at("name").get<std::string>()));
  }
  return outs;
}

// A block's results: made inside the block (not block inputs or outer vars).
std::vector<Var*> block_results(C& cv, std::vector<Var*> next) {
  for (auto& v : next)
    if (!v->op() || v->input_of() || v->op()->op_type() == "const" ||
        v->op()->parent() != cv.b.block())
      v = cv.op("identity", {C::a("x", v)});
  return next;
}

// scan(combine_graph, init, xs, additional_inputs) -> (final carries..., stacked outputs...): the
// combine graph takes (carries..., x slices..., additional inputs...) and returns (next carries...,
// step outputs...). torch's wrapper has already moved the scanned dim first and flipped reversed
// scans. A while_loop over the leading dim of xs; step outputs are gathered from lists.
void convert_scan(C& cv, const json& n) {
  const json& ga = pos_arg(cv, n, 0);
  if (!ga.contains("as_graph")) cv.fail(n, "argument 0 must be the combine graph");
  const json& g = ga["as_graph"].at("graph");
  auto init = names_of(cv, n, pos_arg(cv, n, 1));
  auto xs = names_of(cv, n, pos_arg(cv, n, 2));
  auto extra =
      n.at("inputs").size() > 3 ? names_of(cv, n, pos_arg(cv, n, 3)) : std::vector<std::string>{};
  if (xs.empty()) cv.fail(n, "scan needs at least one scanned tensor");
  const size_t nc = init.size();
  auto& gout = g.at("outputs");
  if (gout.size() < nc) cv.fail(n, "the combine graph returns fewer values than there are carries");
  const size_t ny = gout.size() - nc;
  std::vector<Var*> xv;
  for (auto& x : xs) xv.push_back(cv.var(x));
  Var* len = cv.op("gather", {C::a("x", cv.op("shape", {C::a("x", xv[0])})), C::ai32("indices", 0),
                              C::ai32("axis", 0)});
  // the carries, then the lists of step outputs typed from the subgraph's tensor_values
  std::vector<Var*> loop_vars;
  for (auto& c : init) loop_vars.push_back(cv.var(c));
  std::vector<std::vector<Dim>> yshape;
  for (size_t k = 0; k < ny; ++k) {
    const json& o = gout[nc + k];
    std::string name = o.contains("as_tensor") ? o["as_tensor"].at("name").get<std::string>() : "";
    auto& tv = g.at("tensor_values");
    auto it = tv.find(name);
    if (it == tv.end())
      cv.fail(n, "scan output '" + name + "' has no entry in the combine graph's tensor_values");
    auto dt = mil_dtype(it->value("dtype", 0));
    if (!dt) cv.fail(n, "scan output '" + name + "' has a dtype Core ML cannot hold");
    std::vector<Dim> dims;
    Arg es{"elem_shape", {}, true};
    for (auto& sz : it->at("sizes")) {
      Dim d = sz.contains("as_int")
                  ? cv.ctx().constant(sz["as_int"].get<int64_t>())
                  : parse_sym_expr(sz.at("as_expr").at("expr_str").get<std::string>(), cv.ctx());
      dims.push_back(d);
      es.items.push_back(elem_dim(cv, d));
    }
    yshape.push_back(dims);
    loop_vars.push_back(
        cv.op("make_list", {C::a("init_length", Value::scalar_int(DataType::Int32, 0)),
                            std::move(es), C::astr("dtype", std::string(dtype_name(*dt)))}));
  }
  std::string prefix = n.value("name", std::string("scan")) + "_";
  auto outs = compose::counted_loop(cv.e, len, loop_vars, [&](Var* t, const std::vector<Var*>& vs) {
    std::vector<Var*> ins(vs.begin(), vs.begin() + static_cast<int64_t>(nc));
    for (Var* x : xv)
      ins.push_back(cv.op("gather", {C::a("x", x), C::a("indices", t), C::ai32("axis", 0)}));
    auto so = subgraph(cv, n, g, ins, extra, prefix);
    std::vector<Var*> next;
    for (size_t k = 0; k < nc; ++k) next.push_back(cv.cast(so[k], C::dtype(vs[k])));
    for (size_t k = 0; k < ny; ++k)
      next.push_back(cv.op("list_write",
                           {C::a("ls", vs[nc + k]), C::a("index", t), C::a("value", so[nc + k])}));
    return next;
  });
  std::vector<Var*> results(outs.begin(), outs.begin() + static_cast<int64_t>(nc));
  Dim S = C::shape(xv[0]).at(0);
  for (size_t k = 0; k < ny; ++k) {
    Var* ls = outs[nc + k];
    Var* idx = cv.op("range_1d", {C::a("start", Value::scalar_int(DataType::Int32, 0)),
                                  C::a("end", cv.op("list_length", {C::a("ls", ls)})),
                                  C::a("step", Value::scalar_int(DataType::Int32, 1))});
    Var* y = cv.op("list_gather", {C::a("ls", ls), C::a("indices", idx)});
    // the stacked output keeps the sizes torch knows (the list's length is a run-time value)
    std::vector<Dim> full = {S};
    full.insert(full.end(), yshape[k].begin(), yshape[k].end());
    int unknown = 0;
    std::vector<int64_t> shp;
    for (Dim d : full) {
      if (d->is_const())
        shp.push_back(d->value());
      else {
        shp.push_back(-1);
        ++unknown;
      }
    }
    if (unknown <= 1) y = cv.op("reshape", {C::a("x", y), C::aints32("shape", shp)});
    results.push_back(y);
  }
  cv.outs(n, results);
}

// while_loop(cond_graph, body_graph, carried_inputs, additional_inputs) -> final carries: MIL's
// while_loop; both graphs take (carries..., additional inputs...), cond returns a bool scalar
// tensor, body the next carries.
void convert_while(C& cv, const json& n) {
  const json& ca = pos_arg(cv, n, 0);
  const json& ba = pos_arg(cv, n, 1);
  if (!ca.contains("as_graph") || !ba.contains("as_graph"))
    cv.fail(n, "arguments 0 and 1 must be the cond and body graphs");
  const json& cg = ca["as_graph"].at("graph");
  const json& bg = ba["as_graph"].at("graph");
  auto carried = names_of(cv, n, pos_arg(cv, n, 2));
  auto extra =
      n.at("inputs").size() > 3 ? names_of(cv, n, pos_arg(cv, n, 3)) : std::vector<std::string>{};
  if (carried.empty()) cv.fail(n, "while_loop needs at least one carried value");
  Arg lv{"loop_vars", {}, true};
  for (auto& c : carried) lv.items.push_back(ArgItem{cv.var(c), nullptr});
  std::string prefix = n.value("name", std::string("while_loop")) + "_";
  BlockFn cond_fn = [&](const std::vector<Var*>& vs) -> std::vector<Var*> {
    auto outs = subgraph(cv, n, cg, vs, extra, prefix + "cond_");
    if (outs.size() != 1) cv.fail(n, "the cond graph must return one value");
    Var* p = cv.cast(outs[0], DataType::Bool);
    if (C::shape(p).size() != 0) p = cv.op("reshape", {C::a("x", p), C::aints32("shape", {})});
    return block_results(cv, {p});
  };
  BlockFn body_fn = [&](const std::vector<Var*>& vs) -> std::vector<Var*> {
    auto outs = subgraph(cv, n, bg, vs, extra, prefix + "body_");
    if (outs.size() != vs.size())
      cv.fail(n, "the body graph returns " + std::to_string(outs.size()) + " values for " +
                     std::to_string(vs.size()) + " carried values");
    for (size_t k = 0; k < outs.size(); ++k) outs[k] = cv.cast(outs[k], C::dtype(vs[k]));
    return block_results(cv, outs);
  };
  std::vector<Arg> args = {lv};
  cv.outs(n, cv.b.create("while_loop", args, "", while_loop_blocks(cond_fn, body_fn)));
}

// (pred, true_graph, false_graph, operands): MIL cond, or the known branch
void cond_op(C& cv, const json& n) {
  const json& ins = n.at("inputs");
  if (ins.size() < 4) cv.fail(n, "cond: expected (pred, true_fn, false_fn, operands)");
  const json& pa = ins[0].at("arg");
  if (!pa.contains("as_tensor")) cv.fail(n, "the predicate must be a tensor (a Python bool is specialized away)");
  Var* pred = cv.var(pa["as_tensor"].at("name").get<std::string>());
  if (C::dtype(pred) != DataType::Bool) pred = cv.cast(pred, DataType::Bool);
  if (pred->type()->rank() != 0) pred = cv.op("reshape", {C::a("x", pred), C::aints32("shape", {})});
  const json& tg = ins[1].at("arg");
  const json& fg = ins[2].at("arg");
  if (!tg.contains("as_graph") || !fg.contains("as_graph")) cv.fail(n, "cond: the branches must be subgraphs");
  // the operands, one argument each, as the subgraphs' inputs take them
  auto operands = std::make_shared<std::vector<json>>();
  for (size_t k = 3; k < ins.size(); ++k) {
    const json& a = ins[k].at("arg");
    if (a.contains("as_tensors"))
      for (auto& e : a["as_tensors"]) operands->push_back(json{{"as_tensor", e}});
    else
      operands->push_back(a);
  }
  std::vector<const json*> args;
  for (auto& o : *operands) args.push_back(&o);
  const json& tgraph = tg["as_graph"].at("graph");
  const json& fgraph = fg["as_graph"].at("graph");
  if (pred->has_value() && !pred->value()->is_symbolic()) {
    cv.outs(n, cv.convert_subgraph(n, pred->value()->as_int(0) ? tgraph : fgraph, args));
    return;
  }
  auto branch = [&cv, &n, &args](const json& g) {
    return [&cv, &n, &args, &g](const std::vector<Var*>&) {
      auto outs = cv.convert_subgraph(n, g, args);
      // a block output must be made inside the block
      for (auto& v : outs) v = cv.op("identity", {C::a("x", v)});
      return outs;
    };
  };
  std::vector<Arg> cargs = {C::a("pred", pred)};
  cv.outs(n, cv.b.create("cond", cargs, "", cond_blocks(branch(tgraph), branch(fgraph))));
}

}  // namespace

void register_control_flow(OpTable& t) {
  t.on("higher_order.wrap_with_set_grad_enabled", inline_subgraph);
  t.on("higher_order.wrap_with_autocast", inline_subgraph);
  t.on("higher_order.cond", cond_op);
  t.on("higher_order.scan", convert_scan);
  t.on("higher_order.while_loop", convert_while);
}

}  // namespace torch_detail
}  // namespace milkit

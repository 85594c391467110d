// Higher-order operators that wrap a subgraph without changing its values: torch.no_grad /
// enable_grad regions (wrap_with_set_grad_enabled) and disabled autocast regions
// (wrap_with_autocast, as transformers' rotary embeddings use). Their subgraph is converted
// inline. cond becomes MIL cond.
#include <memory>

#include "converter.h"

namespace milkit {
namespace torch_detail {

namespace {

using C = Converter;

// The node's subgraph converted inline with the operands after it, outputs bound.
void inline_subgraph(C& cv, const json& n) {
  auto [g, pos] = subgraph_of(n);
  if (!g) cv.fail(n, "the higher-order operator has no subgraph argument");
  std::vector<const json*> args;
  const json& ins = n.at("inputs");
  for (size_t k = pos + 1; k < ins.size(); ++k) args.push_back(&ins[k].at("arg"));
  cv.outs(n, cv.convert_subgraph(n, *g, args));
}

}  // namespace

void register_hop(OpTable& t) {
  // (enabled, subgraph, *operands): gradients do not change forward values
  t["higher_order.wrap_with_set_grad_enabled"] = inline_subgraph;
  // (device_type, dtype, enabled, cache_enabled, subgraph, *operands): an enabled region computes
  // in the program's precision (Core ML's is set by convert(compute_precision=)), which is at
  // least as precise as the autocast dtype
  t["higher_order.wrap_with_autocast"] = inline_subgraph;
  // (pred, true_graph, false_graph, operands): MIL cond, or the known branch
  t["higher_order.cond"] = [](C& cv, const json& n) {
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
  };
}

}  // namespace torch_detail
}  // namespace milkit

// torch's higher-order ops: wrap_with_set_grad_enabled / wrap_with_autocast (their subgraph is
// inlined: gradients do not matter for inference, and autocast regions compute in the program's
// precision), and cond (MIL cond with one block per branch).
#include "converter.h"
#include "milkit/types/error.h"

namespace milkit {
namespace torch_detail {

namespace {

using C = Converter;

// The positional arguments of a higher-order op (their schema names are empty).
const json& positional(const json& n, size_t i, const C& cv) {
  auto& ins = n.at("inputs");
  if (i >= ins.size()) cv.fail(n, "expected at least " + std::to_string(i + 1) + " arguments");
  return ins[i].at("arg");
}

std::vector<Var*> tensors_from(C& cv, const json& n, size_t first) {
  std::vector<Var*> r;
  auto& ins = n.at("inputs");
  for (size_t i = first; i < ins.size(); ++i) {
    const json& a = ins[i].at("arg");
    if (a.contains("as_tensor")) {
      r.push_back(cv.var(a["as_tensor"].at("name").get<std::string>()));
    } else if (a.contains("as_tensors")) {
      for (auto& t : a["as_tensors"]) r.push_back(cv.var(t.at("name").get<std::string>()));
    } else {
      cv.fail(n, "operand " + std::to_string(i) + " is not a tensor");
    }
  }
  return r;
}

// wrap_with_*(..., graph, *operands): the graph is the first as_graph argument
void inline_wrapped(C& cv, const json& n) {
  auto& ins = n.at("inputs");
  size_t gi = ins.size();
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i].at("arg").contains("as_graph")) {
      gi = i;
      break;
    }
  if (gi == ins.size()) cv.fail(n, "no subgraph argument");
  auto outs = cv.inline_graph(ins[gi]["arg"]["as_graph"].at("graph"), tensors_from(cv, n, gi + 1));
  cv.outs(n, outs);
}

}  // namespace

void register_hop(OpTable& t) {
  t["higher_order.wrap_with_set_grad_enabled"] = inline_wrapped;
  t["higher_order.wrap_with_autocast"] = inline_wrapped;
  t["higher_order.cond"] = [](C& cv, const json& n) {
    const json& pa = positional(n, 0, cv);
    if (!pa.contains("as_tensor")) cv.fail(n, "the predicate must be a tensor (a Python bool is specialized away)");
    Var* pred = cv.var(pa["as_tensor"].at("name").get<std::string>());
    if (C::dtype(pred) != DataType::Bool) pred = cv.cast(pred, DataType::Bool);
    if (pred->type()->rank() != 0) pred = cv.op("reshape", {C::a("x", pred), C::aints32("shape", {})});
    const json& tg = positional(n, 1, cv);
    const json& fg = positional(n, 2, cv);
    if (!tg.contains("as_graph") || !fg.contains("as_graph")) cv.fail(n, "the branches must be subgraphs");
    std::vector<Var*> operands = tensors_from(cv, n, 3);
    const json& tgraph = tg["as_graph"].at("graph");
    const json& fgraph = fg["as_graph"].at("graph");
    if (pred->has_value() && !pred->value()->is_symbolic()) {
      cv.outs(n, cv.inline_graph(pred->value()->as_int(0) ? tgraph : fgraph, operands));
      return;
    }
    auto branch = [&cv, &operands](const json& g) {
      return [&cv, &operands, &g](const std::vector<Var*>&) {
        auto outs = cv.inline_graph(g, operands);
        // a block output must be made inside the block
        for (auto& v : outs) v = cv.op("identity", {C::a("x", v)});
        return outs;
      };
    };
    std::vector<Arg> args = {C::a("pred", pred)};
    auto outs = cv.b.create("cond", args, "", cond_blocks(branch(tgraph), branch(fgraph)));
    cv.outs(n, outs);
  };
}

}  // namespace torch_detail
}  // namespace milkit

// Higher-order operators that wrap a subgraph without changing its values: torch.no_grad /
// enable_grad regions (wrap_with_set_grad_enabled) and disabled autocast regions
// (wrap_with_autocast with enabled=False, as transformers' rotary embeddings use). Their subgraph
// is converted inline.
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
  // (device_type, dtype, enabled, cache_enabled, subgraph, *operands)
  t["higher_order.wrap_with_autocast"] = [](C& cv, const json& n) {
    const json& ins = n.at("inputs");
    if (ins.size() < 3 || !ins[2].at("arg").contains("as_bool"))
      cv.fail(n,
              "wrap_with_autocast: expected (device_type, dtype, enabled, cache_enabled, subgraph, "
              "...)");
    if (ins[2]["arg"]["as_bool"].get<bool>())
      cv.fail(n,
              "an enabled torch.autocast region computes in a lower precision chosen at run time; "
              "export the "
              "model without autocast (Core ML's compute precision is set by "
              "milkit.convert(compute_precision=))");
    inline_subgraph(cv, n);
  };
}

}  // namespace torch_detail
}  // namespace milkit

// pool ops: avg_pool, max_pool, l2_pool (coremltools iOS15/pool.py). Output sizes over symbolic
// spatial dims are exact (see milkit/ops/conv_util.h), ceil_mode included.
#include <algorithm>
#include <cctype>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"
#include "milkit/ops/conv_util.h"

namespace milkit {

namespace {

using ops::ints_str;

/// coremltools' Pooling.type_inference (plus l2_pool's rank check).
std::vector<const Type*> pool_infer(InferCtx& ic, bool l2) {
  Context& c = ic.ctx;
  const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
  if (xs.size() < 3)
    ic.fail_input("x", "must have rank >= 3 ([n, C, *D_in] with at least one spatial dim), got " +
                           ic.type("x")->str());
  const size_t nd = xs.size() - 2;
  if (l2 && nd > 2)
    ic.fail("l2_pool only supports 1 or 2 spatial dims, got " + std::to_string(nd) + " (x " +
            ic.type("x")->str() + ")");
  std::vector<int64_t> ksize = ops::int_list(ic, "kernel_sizes");
  std::vector<int64_t> strides =
      ic.has("strides") ? ops::int_list(ic, "strides") : std::vector<int64_t>(nd, 1);
  const std::string raw_pad_type = ic.str("pad_type");
  std::string pad_type = raw_pad_type;
  std::transform(pad_type.begin(), pad_type.end(), pad_type.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (pad_type != "valid" && pad_type != "same" && pad_type != "custom" && pad_type != "same_lower")
    ic.fail_input("pad_type", "has unrecognized value \"" + raw_pad_type +
                                  "\"; expected one of \"valid\", \"same\", \"custom\", "
                                  "\"same_lower\"");
  std::optional<std::vector<int64_t>> pad;
  if (ic.has("pad")) pad = ops::int_list(ic, "pad");
  bool ceil_mode = ic.bool_("ceil_mode");
  if (ceil_mode) {
    if (nd > 2)
      ic.fail_input("ceil_mode", "is only supported for 1D or 2D pooling, got " +
                                     std::to_string(nd) + " spatial dims");
    if (pad_type == "same") ic.fail_input("ceil_mode", "must be False when pad_type is \"same\"");
    if (pad) {
      if (pad->size() < 2 * nd)
        ic.fail_input("pad", "= " + ints_str(*pad) + " needs two values per spatial dim (" +
                                 std::to_string(nd) + ")");
      for (size_t i = 0; i < nd; ++i)
        if ((*pad)[2 * i] != (*pad)[2 * i + 1])
          ic.fail_input("pad", "= " + ints_str(*pad) +
                                   ": padding must be symmetric when ceil_mode is True");
    }
  }
  if (ic.opset == Target::iOS15 && raw_pad_type == "same_lower")
    ic.fail_input("pad_type", "= \"same_lower\" is not supported by the iOS15 version of " +
                                  ic.schema.name + " (use iOS16 or later)");
  std::vector<Dim> in(xs.begin() + 2, xs.end());
  std::vector<Dim> kernel;
  for (int64_t k : ksize) kernel.push_back(c.constant(k));
  std::vector<int64_t> dilations(kernel.size(), 1);
  std::vector<Dim> spatial = ops::spatial_output_shape(ic, pad_type, in, kernel, strides, dilations,
                                                       pad ? &*pad : nullptr, ceil_mode);
  std::vector<Dim> out{xs[0], xs[1]};
  out.insert(out.end(), spatial.begin(), spatial.end());
  return {c.tensor(ic.type("x")->dtype(), out)};
}

void add_pool(OpRegistry& r, const std::string& name) {
  OpSchema s;
  s.name = name;
  s.inputs = {in("x", dt::floats(), "T"),
              in_const("kernel_sizes", dt::int32()),
              in_opt_const("strides", dt::int32()),
              in_const("pad_type", dt::string()),
              in_opt_const("pad", dt::int32()),
              in_opt_const("ceil_mode", dt::boolean(), def_bool(false))};
  // coremltools declares exclude_padding_from_average first but materializes its default last;
  // milkit materializes defaults in input order, so it comes last here.
  if (name == "avg_pool")
    s.inputs.push_back(in_opt_const("exclude_padding_from_average", dt::boolean(), def_bool(false)));
  s.defaults = [](InferCtx& ic) {
    std::vector<std::pair<std::string, Value>> d;
    const Type* t = ic.type("x");
    if (!t->is_tensor() || !t->has_rank()) return d;
    size_t n = t->rank() >= 2 ? static_cast<size_t>(t->rank() - 2) : 0;
    d.emplace_back("strides", Value::int_list(std::vector<int64_t>(n, 1)));
    d.emplace_back("pad", Value::int_list(std::vector<int64_t>(2 * n, 0)));
    return d;
  };
  bool l2 = name == "l2_pool";
  s.infer = [l2](InferCtx& ic) { return pool_infer(ic, l2); };
  r.add(std::move(s));
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
  add_pool(r, "avg_pool");
  add_pool(r, "l2_pool");
  add_pool(r, "max_pool");
}

}  // namespace milkit

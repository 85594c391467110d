// const and select (coremltools iOS15/control_flow.py).
#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"
#include "milkit/types/error.h"

namespace milkit {

void register_control_flow_ops(OpRegistry& r) {
  {
    // const: its value lives on the output var (the 'val' attribute in the proto).
    OpSchema s;
    s.name = "const";
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      ic.fail("const ops are created with a value, not inferred");
    };
    r.add(std::move(s));
  }
  {
    OpSchema s;
    s.name = "select";
    s.inputs = {in("cond", DTypeSet::any()), in("a", DTypeSet::any(), "T"),
                in("b", DTypeSet::any(), "T")};
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      const Type* tc = ic.type("cond");
      const Type* ta = ic.type("a");
      const Type* tb = ic.type("b");
      if (!tc->has_rank() || !ta->has_rank() || !tb->has_rank())
        return {ic.ctx.tensor_unknown_rank(ta->dtype())};
      auto s1 = ops::broadcast_shapes(ic, ta->shape(), tb->shape(), "a", "b");
      auto s2 = ops::broadcast_shapes(ic, tc->shape(), s1, "cond", "broadcast(a, b)");
      return {ic.ctx.tensor(ta->dtype(), s2)};
    };
    s.value = [](InferCtx& ic, std::vector<std::shared_ptr<const Value>>& out) {
      if (!ic.known("cond") || !ic.known("a") || !ic.known("b")) return false;
      const Value& c = *ic.val("cond");
      const Value& a = *ic.val("a");
      const Value& b = *ic.val("b");
      DataType dt = a.dtype();
      Value ab = ops::fold_binary(a, b, DataType::Float64, [](double x, double) { return x; }, nullptr);
      Value bb = ops::fold_binary(a, b, DataType::Float64, [](double, double y) { return y; }, nullptr);
      Value res = ops::fold_binary(c, ab, DataType::Float64, [](double cc, double) { return cc; }, nullptr);
      // evaluate with full broadcast: choose per element
      std::vector<int64_t> shape = ops::broadcast_concrete(c.shape(), ab.shape());
      Value cb = ops::fold_binary(c, Value::from_doubles(DataType::Float64, shape,
                                                         std::vector<double>(shape_numel(shape), 0)),
                                  DataType::Float64, [](double x, double) { return x; }, nullptr);
      Value av = ops::fold_binary(ab, cb, DataType::Float64, [](double x, double) { return x; }, nullptr);
      Value bv = ops::fold_binary(bb, cb, DataType::Float64, [](double x, double) { return x; }, nullptr);
      std::vector<double> o(static_cast<size_t>(cb.numel()));
      for (int64_t k = 0; k < cb.numel(); ++k) o[k] = cb.as_double(k) != 0 ? av.as_double(k) : bv.as_double(k);
      (void)res;
      out.push_back(ops::share(Value::from_doubles(dt, shape, o)));
      return true;
    };
    r.add(std::move(s));
  }
}

}  // namespace milkit

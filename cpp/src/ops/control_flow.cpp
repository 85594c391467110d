// const and select (coremltools iOS15/control_flow.py).
#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"
#include "milkit/types/error.h"

#include <cstring>

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
    // select(cond, a, b): elements of a where cond is true, else of b, with numpy broadcasting
    // of all three. coremltools' type inference broadcasts only a and b (a cond of a larger
    // shape gives a wrong output shape there); milkit broadcasts cond too, as the op's
    // definition and its value inference (np.where) do.
    OpSchema s;
    s.name = "select";
    DTypeSet t = {DataType::Float16, DataType::Float32, DataType::Bool, DataType::Int32};
    s.inputs = {in("cond", dt::boolean()), in("a", t, "T"), in("b", t, "T")};
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      const Type* tc = ic.type("cond");
      const Type* ta = ic.type("a");
      const Type* tb = ic.type("b");
      if (!tc->has_rank() || !ta->has_rank() || !tb->has_rank())
        return {ic.ctx.tensor_unknown_rank(ta->dtype())};
      auto ab = ops::broadcast_shapes(ic, ta->shape(), tb->shape(), "a", "b");
      auto out = ops::broadcast_shapes(ic, tc->shape(), ab, "cond", "broadcast(a, b)");
      return {ic.ctx.tensor(ta->dtype(), out)};
    };
    s.value = [](InferCtx& ic, std::vector<std::shared_ptr<const Value>>& out) {
      // cond must be known; a and b may be symbolic (shape arithmetic) values
      if (!ic.known("cond")) return false;
      const Value* c = ic.val("cond");
      const Value* a = ic.val("a");
      const Value* b = ic.val("b");
      if (!a || !b) return false;
      std::vector<int64_t> shape;
      try {
        shape = ops::broadcast_concrete(c->shape(), ops::broadcast_concrete(a->shape(), b->shape()));
      } catch (const ValueError&) {
        return false;
      }
      auto ia = ops::broadcast_index(a->shape(), shape);
      auto ib = ops::broadcast_index(b->shape(), shape);
      auto ic_ = ops::broadcast_index(c->shape(), shape);
      DataType dt = a->dtype();
      size_t n = ia.size();
      if (a->is_symbolic() || b->is_symbolic()) {
        std::vector<Dim> d(n);
        for (size_t k = 0; k < n; ++k)
          d[k] = c->as_int(ic_[k]) ? a->as_dim(ic.ctx, ia[k]) : b->as_dim(ic.ctx, ib[k]);
        out.push_back(ops::share(Value::from_dims(dt, shape, std::move(d))));
        return true;
      }
      size_t w = static_cast<size_t>(dtype_storage_bytes(dt));
      std::vector<uint8_t> bytes(n * w);
      for (size_t k = 0; k < n; ++k) {
        bool pick_a = c->as_int(ic_[k]) != 0;
        const uint8_t* src = pick_a ? a->raw() + ia[k] * w : b->raw() + ib[k] * w;
        std::memcpy(bytes.data() + k * w, src, w);
      }
      out.push_back(ops::share(Value(dt, shape, Buffer::take(std::move(bytes)))));
      return true;
    };
    r.add(std::move(s));
  }
}

}  // namespace milkit

// const, select, cond, while_loop and the list ops (coremltools iOS15/control_flow.py).
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
  {
    // _const_symbolic: a const whose value may be symbolic (coremltools' internal op).
    OpSchema s;
    s.name = "_const_symbolic";
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      ic.fail("_const_symbolic ops are created with a value, not inferred");
    };
    r.add(std::move(s));
  }
  {
    // cond(pred): runs the true block (blocks[0]) or the false block (blocks[1]); both must
    // return the same number of vars of compatible types. The output types are the true
    // block's, as in coremltools, except where a dim differs between the branches: milkit
    // makes it a fresh symbol (coremltools keeps the true branch's dim, which the false branch
    // then contradicts at run time).
    OpSchema s;
    s.name = "cond";
    s.inputs = {in("pred", dt::boolean())};
    s.num_blocks = 2;
    s.num_outputs = -1;
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      const auto& tb = (*ic.blocks)[0]->outputs();
      const auto& fb = (*ic.blocks)[1]->outputs();
      if (tb.size() != fb.size())
        ic.fail("the true branch returns " + std::to_string(tb.size()) + " vars but the false branch returns " +
                std::to_string(fb.size()));
      std::vector<const Type*> out;
      for (size_t i = 0; i < tb.size(); ++i) {
        const Type* a = tb[i]->type();
        const Type* b = fb[i]->type();
        if (!is_compatible_type(a, b))
          ic.fail("true branch output " + tb[i]->name() + " type " + a->str() + " mismatch false branch output type " +
                  b->str());
        if (a != b && a->is_tensor() && b->is_tensor() && a->has_rank() && b->has_rank() && a->rank() == b->rank()) {
          std::vector<Dim> shape;
          for (int k = 0; k < a->rank(); ++k) {
            Dim x = a->shape()[k], y = b->shape()[k];
            shape.push_back(x == y ? x : ic.ctx.fresh());
          }
          out.push_back(ic.ctx.tensor(a->dtype(), shape));
        } else {
          out.push_back(a);
        }
      }
      return out;
    };
    s.value = [](InferCtx& ic, std::vector<std::shared_ptr<const Value>>& out) {
      if (!ic.known("pred")) return false;
      const Value* p = ic.val("pred");
      if (p->numel() != 1) return false;
      const Block* b = (*ic.blocks)[p->as_int(0) ? 0 : 1];
      for (Var* v : b->outputs()) out.push_back(v->value());
      return true;
    };
    r.add(std::move(s));
  }
  {
    // while_loop(loop_vars): blocks[0] (cond) and blocks[1] (body) share inputs typed as the
    // loop vars; the body returns the next values of the loop vars. The outputs are typed as the
    // blocks' inputs: the loop-carried type, which covers the initial values and every body
    // result (coremltools types them as the body's outputs, which can name a dim the initial
    // value does not have, e.g. (is1 + 1, 3) for a loop var that starts as (1, 3)). Building the blocks (and the rebuild when the body changes a loop var's
    // shape or value) is done by while_loop_blocks in the builder.
    OpSchema s;
    s.name = "while_loop";
    InputDef lv;
    lv.name = "loop_vars";
    lv.kind = InputKind::Tuple;
    lv.any_kind = true;
    s.inputs = {lv};
    s.num_blocks = 2;
    s.num_outputs = -1;
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      const Block* cb = (*ic.blocks)[0];
      const Block* bb = (*ic.blocks)[1];
      VarSpan lv = ic.vars("loop_vars");
      if (cb->outputs().size() != 1) ic.fail("the cond block must return one bool var");
      const Type* ct = cb->outputs()[0]->type();
      if (!ct->is_tensor() || ct->dtype() != DataType::Bool)
        ic.fail("the cond block must return a bool var, got " + ct->str());
      if (bb->outputs().size() != lv.size())
        ic.fail("the body block returns " + std::to_string(bb->outputs().size()) + " vars for " +
                std::to_string(lv.size()) + " loop_vars");
      if (cb->inputs().size() != lv.size() || bb->inputs().size() != lv.size())
        ic.fail("the cond and body blocks must take one input per loop var (" + std::to_string(lv.size()) + ")");
      std::vector<const Type*> out;
      for (size_t i = 0; i < lv.size(); ++i) {
        const Type* tin = bb->inputs()[i]->type();
        if (!is_subtype(lv[i]->type(), tin))
          ic.fail("loop var '" + lv[i]->name() + "' of type " + lv[i]->type()->str() +
                  " does not fit the block input '" + bb->inputs()[i]->name() + "' of type " + tin->str());
        if (!is_subtype(bb->outputs()[i]->type(), tin))
          ic.fail("body output '" + bb->outputs()[i]->name() + "' of type " + bb->outputs()[i]->type()->str() +
                  " does not fit the block input '" + bb->inputs()[i]->name() + "' of type " + tin->str());
        out.push_back(tin);
      }
      return out;
    };
    r.add(std::move(s));
  }
  const DTypeSet elem_t = {DataType::Float16, DataType::Float32, DataType::Bool, DataType::Int32};
  {
    OpSchema s;
    s.name = "make_list";
    InputDef es;
    es.name = "elem_shape";
    es.kind = InputKind::Tuple;
    es.dtypes = {DataType::Int32, DataType::String};
    s.inputs = {in_opt("init_length", dt::int32(), def_int(1)),
                in_opt_const("dynamic_length", dt::boolean(), def_bool(true)), es,
                in_opt_const("dtype", dt::string(), def_str("fp32"))};
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      std::string name = ic.str("dtype");
      auto d = dtype_from_name(name);
      if (!d) ic.fail_input("dtype", "Unsupported dtype " + name);
      std::vector<Dim> shape;
      for (Var* v : ic.vars("elem_shape")) {
        if (!v->has_value())
          ic.fail_input("elem_shape", "make_list elem_shape must be tuple of const. Tuple elem " + v->name() + " is not");
        const Value& val = *v->value();
        if (val.numel() != 1)
          ic.fail_input("elem_shape", "elements must be scalars, got '" + v->name() + "' of shape " +
                                          v->type()->str());
        if (val.dtype() == DataType::String)
          shape.push_back(ic.ctx.symbol_named(val.string_values()[0]));
        else
          shape.push_back(ic.ctx.constant(val.as_int(0)));
      }
      Dim len = ic.known("init_length") ? ic.ctx.constant(ic.int_("init_length")) : nullptr;
      return {ic.ctx.list(ic.ctx.tensor(*d, shape), len, ic.bool_("dynamic_length"))};
    };
    r.add(std::move(s));
  }
  {
    OpSchema s;
    s.name = "list_length";
    s.inputs = {in("ls", DTypeSet::any())};
    s.inputs[0].kind = InputKind::List;
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> { return {ic.ctx.scalar(DataType::Int32)}; };
    s.value = [](InferCtx& ic, std::vector<std::shared_ptr<const Value>>& out) {
      const Type* t = ic.type("ls");
      if (t->dynamic_length() || !t->length() || !t->length()->is_const()) return false;
      out.push_back(ops::share(Value::scalar_int(DataType::Int32, t->length()->value())));
      return true;
    };
    r.add(std::move(s));
  }
  {
    OpSchema s;
    s.name = "list_write";
    s.inputs = {in("ls", DTypeSet::any()), in("index", dt::int32()), in("value", elem_t, "T")};
    s.inputs[0].kind = InputKind::List;
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      const Type* ls = ic.type("ls");
      const Type* vt = ic.type("value");
      if (!ls->elem()) return {ic.ctx.list(vt, ls->length(), ls->dynamic_length())};
      if (!is_subtype(vt, ls->elem()))
        ic.fail("Elem type mismatch: ls elem type " + ls->elem()->str() + " vs value type " + vt->str());
      return {ls};
    };
    r.add(std::move(s));
  }
  {
    OpSchema s;
    s.name = "list_read";
    s.inputs = {in("ls", DTypeSet::any()), in("index", dt::int32())};
    s.inputs[0].kind = InputKind::List;
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      const Type* ls = ic.type("ls");
      if (!ls->elem()) ic.fail("Unknown element type. The List might not have been written to (" + ic.op_name + ")");
      return {ls->elem()};
    };
    r.add(std::move(s));
  }
  {
    OpSchema s;
    s.name = "list_gather";
    s.inputs = {in("ls", DTypeSet::any()), in("indices", dt::int32())};
    s.inputs[0].kind = InputKind::List;
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      const Type* ls = ic.type("ls");
      if (!ls->elem()) ic.fail("Unknown element type. The List might not have been written to (" + ic.op_name + ")");
      const auto& ish = ops::ranked_shape(ic, "indices");
      if (ish.size() != 1) ic.fail_input("indices", "must be rank 1, got " + ic.type("indices")->str());
      std::vector<Dim> shape = {ish[0]};
      const Type* e = ls->elem();
      if (!e->has_rank()) return {ic.ctx.tensor_unknown_rank(e->dtype())};
      shape.insert(shape.end(), e->shape().begin(), e->shape().end());
      return {ic.ctx.tensor(e->dtype(), shape)};
    };
    r.add(std::move(s));
  }
  {
    OpSchema s;
    s.name = "list_scatter";
    s.inputs = {in("ls", DTypeSet::any()), in("indices", dt::int32()), in("value", elem_t, "T")};
    s.inputs[0].kind = InputKind::List;
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      const auto& ish = ops::ranked_shape(ic, "indices");
      const auto& vsh = ops::ranked_shape(ic, "value");
      if (ish.size() != 1) ic.fail_input("indices", "must be rank 1, got " + ic.type("indices")->str());
      if (vsh.empty()) ic.fail_input("value", "must have rank >= 1, got a scalar");
      if (ish[0] != vsh[0])
        ic.fail("Cannot scatter " + vsh[0]->str() + " values to " + ish[0]->str() + " indices");
      const Type* ls = ic.type("ls");
      const Type* e = ic.ctx.tensor(ic.type("value")->dtype(), std::vector<Dim>(vsh.begin() + 1, vsh.end()));
      if (!ls->elem()) return {ic.ctx.list(e, ls->length(), ls->dynamic_length())};
      if (!is_subtype(e, ls->elem()))
        ic.fail("Elem type mismatch: ls elem type " + ls->elem()->str() + " vs value type " + e->str());
      return {ls};
    };
    r.add(std::move(s));
  }
}

}  // namespace milkit

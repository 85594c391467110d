// State ops (coremltools iOS18/states.py and coreml_dialect/ops.py): read_state,
// coreml_update_state (the `coreml` dialect op, available at every opset like coremltools'
// namespaced registration) and write_state (the iOS18 MIL op the writer lowers
// coreml_update_state into; registered so packages using it can be rebuilt).
//
// None of them has value inference: a state's content is only known at run time, and
// coreml_update_state / write_state must never be folded or removed (see
// pass_util::has_side_effects).
#include "milkit/ops/all_ops.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

InputDef state_in(std::string name) {
  InputDef d;
  d.name = std::move(name);
  d.kind = InputKind::State;
  return d;
}

/// The tensor type wrapped by the state input `name`; fails when it is not a tensor.
const Type* wrapped_tensor(InferCtx& ic, std::string_view name) {
  const Type* w = ic.type(name)->elem();
  if (!w || !w->is_tensor())
    ic.fail_input(name, "State only supports wrapped type of types.tensor. Got " +
                            (w ? w->str() : std::string("nothing")) + ".");
  return w;
}

/// coremltools' coreml_update_state domain T.
DTypeSet update_dtypes() {
  return {DataType::Float16, DataType::Float32, DataType::Int8,  DataType::Int16,
          DataType::Int32,   DataType::UInt8,   DataType::UInt16, DataType::Bool};
}

}  // namespace

void register_state_ops(OpRegistry& r) {
  {
    // read_state(input: state<ST>) -> ST: a copy of the state's content.
    OpSchema s;
    s.name = "read_state";
    s.since = Target::iOS18;
    s.inputs = {state_in("input")};
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> { return {wrapped_tensor(ic, "input")}; };
    r.add(std::move(s));
  }
  {
    // coreml_update_state(state: state<ST>, value: ST) -> ST: writes value into the state and
    // returns a copy of it. Like coremltools, the value's type must equal the wrapped type
    // exactly (dtype and every dim, symbols included).
    OpSchema s;
    s.name = "coreml_update_state";
    s.since = Target::iOS13;
    s.inputs = {state_in("state"), in("value", update_dtypes(), "T")};
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      const Type* w = wrapped_tensor(ic, "state");
      const Type* v = ic.type("value");
      if (w != v)
        ic.fail("State wrapped type " + w->str() + " not matched with the value's sym_type " + v->str() + ".");
      return {v};
    };
    r.add(std::move(s));
  }
  {
    // write_state(input: state<ST>, data: ST): the serialized form of coreml_update_state
    // (no outputs). milkit.load turns it back into coreml_update_state, as coremltools does.
    OpSchema s;
    s.name = "write_state";
    s.since = Target::iOS18;
    s.inputs = {state_in("input"), in("data", update_dtypes(), "T")};
    s.num_outputs = 0;
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      const Type* w = wrapped_tensor(ic, "input");
      const Type* v = ic.type("data");
      if (w != v)
        ic.fail("State wrapped type " + w->str() + " not matched with the data's type " + v->str() + ".");
      return {};
    };
    r.add(std::move(s));
  }
}

}  // namespace milkit

// classify (coremltools iOS15/classify.py): makes the model a classifier. From a tensor of
// probabilities and a const list of class labels (str or int64, coremltools' mil_list) it gives
// the predicted label (a str / int64 scalar) and the dictionary label -> probability
// (dict[str|int64, fp64]). No value inference: the probabilities are only known at run time.
#include "milkit/ops/all_ops.h"

namespace milkit {

void register_classify_ops(OpRegistry& r) {
  OpSchema s;
  s.name = "classify";
  InputDef classes;
  classes.name = "classes";
  classes.kind = InputKind::List;
  classes.is_const = true;
  classes.dtypes = {DataType::String, DataType::Int64};  // the element types (checked by inference)
  s.inputs = {in("probabilities", {DataType::Float32}), std::move(classes)};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    const Type* ct = ic.type("classes");
    if (ct->kind() != TypeKind::List)
      ic.fail_input("classes", "must be of type list. Instead it is " + ct->str() + ".");
    const Type* pt = ic.type("probabilities");
    if (pt->dtype() != DataType::Float32)
      ic.type_error("probabilities", "must be of type fp32. Instead it is of type " +
                                         std::string(dtype_name(pt->dtype())));
    const Type* e = ct->elem();
    if (!e || !e->is_scalar() || (e->dtype() != DataType::String && e->dtype() != DataType::Int64))
      ic.fail_input("classes", "elements must be either str or int64. Instead they are " +
                                  (e ? e->str() : std::string("unknown")) + ".");
    // the number of classes must match the size of a statically shaped probabilities tensor
    if (pt->has_rank() && pt->is_static()) {
      int64_t size = 1;
      for (Dim d : pt->shape()) size *= d->value();
      int64_t n = -1;
      if (const Value* v = ic.val("classes")) n = v->numel();
      else if (ct->length() && ct->length()->is_const()) n = ct->length()->value();
      if (n >= 0 && n != size)
        ic.fail("In op 'classify', number of classes must match the size of the tensor corresponding to "
                "'probabilities' (" + std::to_string(n) + " classes, probabilities " + pt->str() + " has " +
                std::to_string(size) + " elements).");
    }
    const Type* label = ic.ctx.scalar(e->dtype());
    return {label, ic.ctx.dict(label, ic.ctx.scalar(DataType::Float64))};
  };
  s.num_outputs = 2;
  r.add(std::move(s));
}

}  // namespace milkit

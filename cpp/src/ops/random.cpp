// random ops: random_bernoulli, random_categorical, random_normal, random_uniform (coremltools
// iOS15/random.py; one version for every opset). No value inference: the outputs are random.
//
// The output shape of bernoulli / normal / uniform is the value of `shape` (a run-time int32
// vector): its known (or symbolic) value, else one fresh symbol per element, else (a shape of
// unknown length) a tensor of unknown rank. coremltools accepts negative known dims there;
// milkit rejects them (no tensor has a negative dim). The output dtype is the dtype of the
// distribution parameters (fp32 by default). random_categorical draws `size` class indices
// (as floats) per distribution over x's last dim.
#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

namespace {

/// coremltools' RandomDistribution.type_inference.
std::vector<const Type*> random_shape_infer(InferCtx& ic, DataType dt) {
  Context& c = ic.ctx;
  const Type* st = ic.type("shape");
  if (!st->has_rank() || st->rank() != 1)
    ic.fail_input("shape", "must be a 1-D int32 tensor (the output shape), got " + st->str());
  Dim n = st->shape()[0];
  if (!n->is_const()) return {c.tensor_unknown_rank(dt)};
  std::optional<std::vector<Dim>> d = ic.dims("shape");
  if (!d) {
    std::vector<Dim> out;
    for (int64_t i = 0; i < n->value(); ++i) out.push_back(c.fresh());
    return {c.tensor(dt, out)};
  }
  for (size_t i = 0; i < d->size(); ++i)
    if ((*d)[i]->is_const() && (*d)[i]->value() < 0)
      ic.fail_input("shape", "= " + ops::shape_str(*d) + " has a negative dim at index " +
                                 std::to_string(i));
  return {c.tensor(dt, *d)};
}

/// Two parameters of one distribution must share a dtype (a given fp16 one against an fp32
/// default is the usual way to get this).
void same_dtype(InferCtx& ic, const char* a, const char* b) {
  DataType da = ic.type(a)->dtype(), db = ic.type(b)->dtype();
  if (da != db)
    ic.fail("incompatible primitive types: '" + std::string(a) + "' is " +
            std::string(dtype_name(da)) + " but '" + std::string(b) + "' is " +
            std::string(dtype_name(db)) + " (give both with the same dtype)");
}

void add_bernoulli(OpRegistry& r) {
  OpSchema s;
  s.name = "random_bernoulli";
  // coremltools declares prob before seed but materializes seed's default first; milkit
  // materializes defaults in input order, so seed comes first here.
  s.inputs = {in("shape", dt::int32()),
              in_opt_const("seed", dt::int32(), def_int(-1)),
              in_opt_const("prob", dt::floats(), def_float(0.5), "T")};
  s.infer = [](InferCtx& ic) { return random_shape_infer(ic, ic.type("prob")->dtype()); };
  r.add(std::move(s));
}

void add_normal(OpRegistry& r) {
  OpSchema s;
  s.name = "random_normal";
  s.inputs = {in("shape", dt::int32()),
              in_opt_const("mean", dt::floats(), def_float(0.0), "T"),
              in_opt_const("stddev", dt::floats(), def_float(1.0), "T"),
              in_opt_const("seed", dt::int32(), def_int(-1))};
  s.infer = [](InferCtx& ic) {
    same_dtype(ic, "mean", "stddev");
    return random_shape_infer(ic, ic.type("mean")->dtype());
  };
  r.add(std::move(s));
}

void add_uniform(OpRegistry& r) {
  OpSchema s;
  s.name = "random_uniform";
  s.inputs = {in("shape", dt::int32()),
              in_opt_const("low", dt::floats(), def_float(0.0), "T"),
              in_opt_const("high", dt::floats(), def_float(1.0), "T"),
              in_opt_const("seed", dt::int32(), def_int(-1))};
  s.infer = [](InferCtx& ic) {
    same_dtype(ic, "low", "high");
    return random_shape_infer(ic, ic.type("low")->dtype());
  };
  r.add(std::move(s));
}

void add_categorical(OpRegistry& r) {
  OpSchema s;
  s.name = "random_categorical";
  s.inputs = {in("x", dt::floats(), "T"),
              in_opt_const("mode", dt::string(), def_str("logits")),
              in_opt_const("size", dt::int32(), def_int(1)),
              in_opt_const("seed", dt::int32(), def_int(-1))};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    Context& c = ic.ctx;
    const Type* tx = ic.type("x");
    int64_t size = ic.int_("size");
    if (size < 0)
      ic.fail_input("size", "= " + std::to_string(size) + " must be non-negative (samples to draw)");
    if (!tx->has_rank()) return {c.tensor_unknown_rank(tx->dtype())};
    std::vector<Dim> out(tx->shape().begin(), tx->shape().end() - (tx->rank() ? 1 : 0));
    out.push_back(c.constant(size));
    return {c.tensor(tx->dtype(), out)};
  };
  r.add(std::move(s));
}

}  // namespace

void register_random_ops(OpRegistry& r) {
  add_bernoulli(r);
  add_categorical(r);
  add_normal(r);
  add_uniform(r);
}

}  // namespace milkit

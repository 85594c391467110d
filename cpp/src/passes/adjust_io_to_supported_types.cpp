// mil_backend::adjust_io_to_supported_types: gives the I/O of "main" dtypes Core ML accepts, as
// coremltools does.
//   - main inputs outside {fp32, int32} (+fp16 from iOS16, +int8 from iOS26) become int32 (integer
//     types) or fp32; when the old dtype is one the runtime computes in (fp16, fp32, int32, string,
//     bool; +int8, uint8, int16, uint16 from iOS17) a cast back to it ("cast_<n>") is inserted
//     before the first op and every user reads it. Each cast goes before the current first op, so
//     the casts of later inputs come first.
//   - main outputs outside that set (except outputs of classify) are renamed
//     "<name>__pre__output__<fp32|int32>__cast" and a cast appended at the end of the body takes
//     the output's place and name.
//   - inputs of other functions that the runtime cannot compute in change dtype, without casts.
#include <set>

#include "milkit/builder/builder.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

std::set<DataType> io_types(Target t) {
  std::set<DataType> s = {DataType::Float32, DataType::Int32};
  if (t >= Target::iOS16) s.insert(DataType::Float16);
  if (t >= Target::iOS26) s.insert(DataType::Int8);
  return s;
}

std::set<DataType> runtime_types(Target t) {
  std::set<DataType> s = {DataType::Float16, DataType::Float32, DataType::Int32, DataType::String,
                          DataType::Bool};
  if (t >= Target::iOS17)
    s.insert({DataType::Int8, DataType::UInt8, DataType::Int16, DataType::UInt16});
  return s;
}

DataType replacement(DataType t) { return is_int(t) ? DataType::Int32 : DataType::Float32; }

// Gives `v` dtype `to`; returns whether its type changed.
bool retype(Function& f, Var* v, DataType to) {
  const Type* t = v->type();
  if (t->dtype() == to) return false;
  v->set_type(t->has_rank() ? f.ctx().tensor(to, t->shape()) : f.ctx().tensor_unknown_rank(to));
  return true;
}

Var* add_cast(Builder& b, Var* x, DataType to) {
  std::vector<Arg> args{Builder::arg("x", x),
                        Builder::arg("dtype", Value::scalar_string(std::string(dtype_name(to))))};
  return b.create("cast", args).at(0);
}

// Returns whether it changed anything.
bool adjust_main(Function& f) {
  bool changed = false;
  const auto io = io_types(f.opset());
  const auto rt = runtime_types(f.opset());
  Builder b(f);
  for (Var* in : f.inputs()) {
    if (!in->type()->is_tensor()) continue;
    DataType dt = in->type()->dtype();
    if (io.count(dt)) continue;
    changed = retype(f, in, replacement(dt)) || changed;
    if (!rt.count(dt)) continue;
    b.set_insertion_point(&f.body(), f.body().front());
    Var* c = add_cast(b, in, dt);
    changed = true;
    // every use except the new cast's own
    std::vector<Use> uses = in->uses();
    for (const Use& u : uses)
      if (u.op != c->op()) u.op->set_arg(u.slot, c);
    if (pass_util::is_function_output(in)) {
      std::vector<Var*> outs = f.body().outputs();
      for (auto& o : outs)
        if (o == in) o = c;
      f.body().set_outputs(outs);
      c->set_name(in->name());
    }
  }
  std::vector<Var*> outs = f.body().outputs();
  b.set_insertion_point(&f.body(), nullptr);
  for (auto& o : outs) {
    if (!o->type()->is_tensor() || io.count(o->type()->dtype())) continue;
    if (o->op() && o->op()->op_type() == "classify") continue;
    DataType to = replacement(o->type()->dtype());
    std::string name = o->name();
    o->set_name(name + "__pre__output__" + std::string(dtype_name(to)) + "__cast");
    Var* c = add_cast(b, o, to);
    c->set_name(name);
    o = c;
    changed = true;
  }
  if (changed) f.body().set_outputs(outs);
  return changed;
}

class AdjustIoToSupportedTypes : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "mil_backend::adjust_io_to_supported_types", {});
    bool changed = false;
    for (auto& [name, f] : p.functions()) {
      if (name == "main") {
        changed = adjust_main(*f) || changed;
        continue;
      }
      const auto rt = runtime_types(f->opset());
      for (Var* in : f->inputs())
        if (in->type()->is_tensor() && !rt.count(in->type()->dtype()))
          changed = retype(*f, in, replacement(in->type()->dtype())) || changed;
    }
    return changed;
  }
};

}  // namespace

/// Registers mil_backend::adjust_io_to_supported_types.
void register_adjust_io_to_supported_types(PassRegistry& r) {
  r.add("mil_backend::adjust_io_to_supported_types",
        [] { return std::make_unique<AdjustIoToSupportedTypes>(); });
}

}  // namespace milkit

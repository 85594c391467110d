// common::add_int16_cast (coremltools' add_int16_cast, a CastTypeQuantization): gather,
// gather_along_axis, gather_nd, squeeze and topk run on 16-bit integers where they can.
//
// For each such op (nested blocks first, one sweep), its present inputs in schema order:
//   - a string input equal to "int32" (topk's output_indices_dtype) becomes "uint16" for topk,
//     "int16" otherwise;
//   - an int32 tensor input is cast unless the op's dtype set for it lacks the current target
//     dtype or the opset's cast does not support it (before iOS17), or it is the dynamic indices of
//     gather / gather_along_axis into a known dim beyond 32767. The target dtype is pass state,
//     as in coremltools: a const input sets it to uint16 when its values fit [0, 65535], int16
//     when they fit [-32768, 32767] (else the input is not cast), a cast of a uint16 value sets
//     uint16 and any other cast int16; any other input keeps the target the previous input or op
//     left (int16 at the start of the pass). The cast is "<var>_to_<dtype>", before the op; a var
//     with several uses is cast once per block and reused.
// If anything changed the op is rebuilt as "<op>_cast_<target>" before the old one; outputs that
// were int32 and no longer are get cast(out, "int32") named "<out>_to_int32"; users (and function
// outputs, which keep their names) read the new outputs and the old op goes.
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

const std::set<std::string> kOps = {"gather", "gather_along_axis", "gather_nd", "squeeze", "topk"};

bool is_int32(const Var* v) {
  return v->type()->is_tensor() && v->type()->dtype() == DataType::Int32;
}

bool is_string(const Var* v) {
  return v->type()->is_tensor() && v->type()->dtype() == DataType::String;
}

std::string string_of(const Var* v) {
  if (!v->has_value() || v->value()->string_values().empty()) return "";
  return v->value()->string_values()[0];
}

class AddInt16Cast : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::add_int16_cast", {});
    changed_ = false;
    target_ = DataType::Int16;
    for (auto& [name, f] : p.functions()) {
      // nothing can change before iOS17 (cast lacks int16 / uint16, topk lacks
      // output_indices_dtype), nor in a function without these ops (the target dtype changes
      // only while visiting them)
      if (f->opset() < Target::iOS17 ||
          !pass_util::has_op_type(*f,
                                  {"gather", "gather_along_axis", "gather_nd", "squeeze", "topk"}))
        continue;
      Builder b(*f);
      builder_ = &b;
      cast_ok_ = f->opset() >= Target::iOS17;  // cast supports int16 / uint16 from iOS17
      apply_block(f->body());
    }
    return changed_;
  }

 private:
  using Cache = std::unordered_map<std::string, Var*>;

  void apply_block(Block& blk) {
    Cache cache;
    for (Operation* op : blk.ops()) {
      for (Block* nb : op->blocks()) apply_block(*nb);
      if (kOps.count(op->op_type())) transform(op, cache);
    }
  }

  // coremltools' add_int16_cast.should_cast_parameter (updates the target dtype).
  bool should_cast(const Operation* op, size_t i) {
    const InputDef& d = op->schema().inputs[i];
    Var* v = op->input(i)[0];
    if (is_string(v)) return string_of(v) == "int32";
    if (!is_int32(v)) return false;
    if (const Operation* src = v->op()) {
      if (src->op_type() == "const") {
        if (!v->has_value()) return false;
        const Value& val = *v->value();
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (int64_t k = 0; k < val.numel(); ++k) {
          lo = std::min(lo, val.as_int(k));
          hi = std::max(hi, val.as_int(k));
        }
        if (lo >= 0 && hi <= 65535)
          target_ = DataType::UInt16;
        else if (lo >= -32768 && hi <= 32767)
          target_ = DataType::Int16;
        else
          return false;
      } else if (src->op_type() == "cast") {
        target_ = src->input1("x")->type()->dtype() == DataType::UInt16 ? DataType::UInt16
                                                                        : DataType::Int16;
      }
    }
    const std::string& t = op->op_type();
    if ((t == "gather" || t == "gather_along_axis") && d.name == "indices" && !v->has_value()) {
      const Type* xt = op->input1("x")->type();
      Var* ax = op->input1("axis");
      if (xt->has_rank() && ax && ax->has_value()) {
        int64_t a = ax->value()->as_int(0);
        int64_t r = xt->rank();
        if (a < 0) a += r;
        if (a >= 0 && a < r) {
          Dim dim = xt->shape()[static_cast<size_t>(a)];
          if (dim->is_const() && dim->value() > 32767) return false;
        }
      }
    }
    return d.dtypes.contains(target_) && cast_ok_;
  }

  void transform(Operation* op, Cache& cache) {
    const OpSchema& s = op->schema();
    std::vector<Arg> args;
    bool modified = false;
    builder_->set_location(op->location());
    for (size_t i = 0; i < op->num_inputs(); ++i) {
      VarSpan in = op->input(i);
      if (in.empty()) continue;
      const InputDef& d = s.inputs[i];
      Arg a;
      a.name = d.name;
      a.is_sequence = d.kind == InputKind::Tuple;
      for (Var* v : in) a.items.push_back(ArgItem{v, nullptr});
      if (should_cast(op, i)) {
        for (ArgItem& item : a.items) {
          Var* v = item.var;
          if (is_string(v)) {
            if (string_of(v) != "int32") continue;
            modified = true;
            item.var = nullptr;
            item.value = std::make_shared<const Value>(
                Value::scalar_string(op->op_type() == "topk" ? "uint16" : "int16"));
            continue;
          }
          if (!is_int32(v)) continue;
          modified = true;
          const std::string dt = target_ == DataType::UInt16 ? "uint16" : "int16";
          std::string cname = v->name() + "_to_" + dt;
          bool shared = v->uses().size() > 1;
          auto hit = cache.find(cname);
          if (shared && hit != cache.end()) {
            item.var = hit->second;
            continue;
          }
          builder_->set_insertion_point(op->parent(), op);
          std::vector<Arg> cargs{Builder::arg("x", v),
                                 Builder::arg("dtype", Value::scalar_string(dt))};
          Var* c = builder_->create("cast", cargs, cname).at(0);
          item.var = c;
          if (shared) cache[cname] = c;
        }
      }
      args.push_back(std::move(a));
    }
    if (!modified) return;
    changed_ = true;
    const std::string dt = target_ == DataType::UInt16 ? "uint16" : "int16";
    builder_->set_insertion_point(op->parent(), op);
    std::vector<Var*> outs = builder_->create(op->op_type(), args, op->name() + "_cast_" + dt);
    for (size_t k = 0; k < op->outputs().size() && k < outs.size(); ++k) {
      Var* old_out = op->output(k);
      Var* nv = outs[k];
      if (is_int32(old_out) && !is_int32(nv)) {
        builder_->set_insertion_point(op->parent(), op);
        std::vector<Arg> cargs{Builder::arg("x", nv),
                               Builder::arg("dtype", Value::scalar_string("int32"))};
        nv = builder_->create("cast", cargs, nv->name() + "_to_int32").at(0);
      }
      pass_util::replace_var(old_out, nv);
    }
    op->parent()->erase(op);
  }

  DataType target_ = DataType::Int16;
  bool cast_ok_ = false;
  Builder* builder_ = nullptr;
  bool changed_ = false;  // whether this run changed the program
};

}  // namespace

/// Registers common::add_int16_cast.
void register_add_int16_cast(PassRegistry& r) {
  r.add("common::add_int16_cast", [] { return std::make_unique<AddInt16Cast>(); });
}

}  // namespace milkit

// common::nullify_redundant_quantization_zero_point, as coremltools does it (zero point 0 is Core
// ML's fast path, and 0 is the same as no zero point):
// - quantize / dequantize with an all-zero zero point: rebuilt without it;
// - dequantize of a const with zero point -128 (int8) or 128 (uint8): the shift moves into the
//   const (now uint8 / int8) and the zero point goes;
// - quantize(zp=±128) whose only reader is dequantize(zp=±128): both rebuilt without the zero point
//   and with the other 8-bit dtype.
// Nested blocks first; the function body repeated until the last rule changes nothing.
#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

// All elements of a known zero point equal `v`.
bool zp_all(const Operation* op, double v) {
  Var* z = op->input1("zero_point");
  if (!z || !z->has_value()) return false;
  for (double x : z->value()->to_doubles())
    if (x != v) return false;
  return true;
}

Var* rebuild(Builder& b, Operation* before, const std::string& type, std::vector<Arg> args) {
  b.set_insertion_point(before->parent(), before);
  b.set_location(before->location());
  return b.create(type, args).at(0);
}

// The op's inputs to keep when rebuilding: `names` that are present.
std::vector<Arg> keep(const Operation* op, std::initializer_list<const char*> names) {
  std::vector<Arg> a;
  for (const char* n : names)
    if (Var* v = op->input1(n)) a.push_back(Builder::arg(n, v));
  return a;
}

bool replace_and_erase(Operation* op, Var* nv) {
  Var* old = op->output(0);
  if (pass_util::is_function_output(old) && pass_util::is_function_input(nv) &&
      nv->name() != old->name())
    return false;
  pass_util::replace_var(old, nv);
  op->parent()->erase(op);
  return true;
}

bool try_zp0(Function& f, Operation* op) {
  if ((op->op_type() != "quantize" && op->op_type() != "dequantize") || !zp_all(op, 0))
    return false;
  Builder b(f);
  Var* nv = op->op_type() == "quantize"
                ? rebuild(b, op, "quantize", keep(op, {"input", "scale", "axis", "output_dtype"}))
                : rebuild(b, op, "dequantize", keep(op, {"input", "scale", "axis"}));
  return replace_and_erase(op, nv);
}

bool try_zp128_const_dequantize(Function& f, Operation* op) {
  if (op->op_type() != "dequantize") return false;
  bool neg = zp_all(op, -128), pos = zp_all(op, 128);
  if (!neg && !pos) return false;
  Var* in = op->input1("input");
  if (!in->has_value()) return false;
  std::vector<int64_t> v;
  for (int64_t x : in->value()->to_ints()) v.push_back(neg ? x + 128 : x - 128);
  Value shifted = Value::from_ints(neg ? DataType::UInt8 : DataType::Int8, in->value()->shape(), v);
  std::vector<Arg> args = {Builder::arg("input", std::move(shifted))};
  for (Arg& a : keep(op, {"scale", "axis"})) args.push_back(std::move(a));
  Builder b(f);
  return replace_and_erase(op, rebuild(b, op, "dequantize", std::move(args)));
}

bool try_zp128_pair(Function& f, Operation* q) {
  if (q->op_type() != "quantize") return false;
  bool neg = zp_all(q, -128), pos = zp_all(q, 128);
  if (!neg && !pos) return false;
  Var* qo = q->output(0);
  if (qo->uses().size() != 1 || !qo->block_uses().empty()) return false;
  Operation* dq = qo->uses()[0].op;
  if (dq->op_type() != "dequantize" || !zp_all(dq, neg ? -128 : 128)) return false;
  Builder b(f);
  std::vector<Arg> qa = keep(q, {"input", "scale", "axis"});
  qa.push_back(Builder::arg("output_dtype", Value::scalar_string(neg ? "uint8" : "int8")));
  Var* nq = rebuild(b, dq, "quantize", std::move(qa));
  std::vector<Arg> da = {Builder::arg("input", nq)};
  for (Arg& a : keep(dq, {"scale", "axis"})) da.push_back(std::move(a));
  Var* nd = rebuild(b, dq, "dequantize", std::move(da));
  Var* old = dq->output(0);
  if (pass_util::is_function_output(old) && pass_util::is_function_input(nd) &&
      nd->name() != old->name())
    return false;
  pass_util::replace_var(old, nd);
  dq->parent()->erase(dq);
  q->parent()->erase(q);
  return true;
}

// Returns whether it rewrote an op.
bool nullify_block(Function& f, Block& b) {
  bool changed = false;
  bool again = true;
  while (again) {
    again = false;
    for (Operation* op : b.ops()) {
      if (op->erased()) continue;
      for (Block* nb : op->blocks()) changed = nullify_block(f, *nb) || changed;
      if (try_zp0(f, op) || try_zp128_const_dequantize(f, op)) {
        changed = true;
        continue;
      }
      if (try_zp128_pair(f, op)) again = changed = true;
    }
  }
  return changed;
}

class NullifyRedundantQuantizationZeroPoint : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::nullify_redundant_quantization_zero_point", {});
    bool changed = false;
    if (!pass_util::has_op_type(p, {"quantize", "dequantize"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) changed = nullify_block(*f, f->body()) || changed;
    return changed;
  }
};

}  // namespace

/// Registers common::nullify_redundant_quantization_zero_point.
void register_nullify_redundant_quantization_zero_point(PassRegistry& r) {
  r.add("common::nullify_redundant_quantization_zero_point",
        [] { return std::make_unique<NullifyRedundantQuantizationZeroPoint>(); });
}

}  // namespace milkit

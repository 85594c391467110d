// common::distributive_quantized_binary_op_scale_normalization, as coremltools does it: a quantized
// add / sub (optionally followed by relu) whose inputs come from dequantize ops and whose only
// reader is a quantize,
//
//     dequantize(scale=s_x) -|
//                            |-> add / sub (-> relu) -> quantize(scale=s_z)
//     dequantize(scale=s_y) -|
//
// becomes (s_y a scalar; when only s_x is, x and y swap roles)
//
//     dequantize(scale=s_x/s_y) -|
//                                |-> add / sub (-> relu) -> quantize(scale=s_z/s_y)
//     dequantize(scale=1)       -|
//
// so the backend can fuse the one remaining input scale into the op. The quotients are taken in
// fp32 and stored in each scale's own dtype; a quotient that overflows fp16 or underflows its
// smallest subnormal leaves the pattern alone. New dequantize ops go just before the op (the old
// ones stay for their other readers; dead_code_elimination removes them otherwise), the new
// quantize just before the old one, which goes. One sweep over each block (a rewritten pattern
// still matches, so it is not repeated), nested blocks first.
//
// Beyond coremltools (which would change the numbers or fail):
// - with the relu, the divisor must be > 0 (relu(z / s) == relu(z) / s only then), else the other
//   scalar scale is tried;
// - the add / sub and relu outputs must have no reader besides the pattern, nested blocks'
//   outputs included (coremltools only looks at the enclosing block's outputs);
// - the relu and quantize must be in the op's block.
#include <cmath>
#include <limits>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

const char* const kName = "common::distributive_quantized_binary_op_scale_normalization";

// The only reader of `v` when it has type `type` (coremltools' _check_child_op_type).
Operation* only_reader(Var* v, const char* type) {
  if (v->uses().size() != 1) return nullptr;
  Operation* r = v->uses()[0].op;
  return r->op_type() == type ? r : nullptr;
}

// An output of `op` is an output of block `b`.
bool feeds_outputs(const Operation* op, const Block* b) {
  for (Var* o : op->outputs())
    for (Var* v : b->outputs())
      if (o == v) return true;
  return false;
}

struct Match {
  Operation* dx;
  Operation* dy;
  Operation* relu;  // or nullptr
  Operation* qz;
};

bool match(Operation* op, Match& m) {
  if (op->op_type() != "add" && op->op_type() != "sub") return false;
  Var* z = op->output(0);
  Operation* relu = only_reader(z, "relu");
  Operation* tail = relu ? relu : op;
  Operation* dx = op->input1("x")->op();
  Operation* dy = op->input1("y")->op();
  if (!dx || !dy || dx->op_type() != "dequantize" || dy->op_type() != "dequantize") return false;
  Operation* qz = only_reader(tail->output(0), "quantize");
  if (!qz) return false;
  // the intermediate results must not leave the pattern (coremltools checks the op's block only)
  if (feeds_outputs(dx, op->parent()) || feeds_outputs(dy, op->parent())) return false;
  if (!z->block_uses().empty() || (relu && !relu->output(0)->block_uses().empty())) return false;
  if (tail->parent() != op->parent() || qz->parent() != op->parent()) return false;
  m = {dx, dy, relu, qz};
  return true;
}

// Known scale values as fp32 (coremltools: np.float32(scale.val)).
bool scale_of(const Operation* op, std::vector<float>& out) {
  Var* s = op->input1("scale");
  if (!s || !s->has_value()) return false;
  out.clear();
  for (double d : s->value()->to_doubles()) out.push_back(static_cast<float>(d));
  return true;
}

// numpy's np.max(np.abs(q)) > 65504 or np.min(np.abs(q)) < smallest fp16 subnormal (a NaN makes
// both comparisons false, as in numpy).
bool out_of_fp16(const std::vector<float>& q) {
  const float tiny = std::ldexp(1.0f, -24);
  float mx = 0, mn = std::numeric_limits<float>::infinity();
  for (float v : q) {
    if (std::isnan(v)) return false;
    mx = std::max(mx, std::fabs(v));
    mn = std::min(mn, std::fabs(v));
  }
  return mx > 65504.0f || mn < tiny;
}

// coremltools' try_to_divide: s_x / s_y and s_z / s_y, or false. s_y must be a scalar.
bool try_divide(const Operation* dx, const Operation* dy, const Operation* qz, bool relu,
                std::vector<float>& sx, std::vector<float>& sz) {
  if (dy->input1("axis")) return false;
  std::vector<float> sy;
  if (!scale_of(dx, sx) || !scale_of(dy, sy) || !scale_of(qz, sz) || sy.size() != 1) return false;
  if (relu && !(sy[0] > 0)) return false;
  for (float& v : sx) v = v / sy[0];
  for (float& v : sz) v = v / sy[0];
  return !out_of_fp16(sx) && !out_of_fp16(sz);
}

// The scale value `q` in the dtype and shape of `op`'s scale.
Value scale_value(const Operation* op, const std::vector<float>& q) {
  const Value& s = *op->input1("scale")->value();
  return Value::from_doubles(s.dtype(), s.shape(), std::vector<double>(q.begin(), q.end()));
}

void add_if(std::vector<Arg>& a, const Operation* op, const char* name) {
  if (Var* v = op->input1(name)) a.push_back(Builder::arg(name, v));
}

bool transform(Function& f, Operation* op, Match m) {
  std::vector<float> sx, sz;
  if (!try_divide(m.dx, m.dy, m.qz, m.relu, sx, sz)) {
    std::swap(m.dx, m.dy);
    if (!try_divide(m.dx, m.dy, m.qz, m.relu, sx, sz)) return false;
  }
  Builder b(f);
  b.set_insertion_point(op->parent(), op);
  b.set_location(op->location());
  std::vector<Arg> ax = {Builder::arg("input", m.dx->input1("input")),
                         Builder::arg("scale", scale_value(m.dx, sx))};
  add_if(ax, m.dx, "zero_point");
  add_if(ax, m.dx, "axis");
  Var* ndx = b.create("dequantize", ax).at(0);
  const DataType ydt = m.dy->input1("scale")->value()->dtype();
  std::vector<Arg> ay = {Builder::arg("input", m.dy->input1("input")),
                         Builder::arg("scale", Value::scalar_float(ydt, 1.0))};
  add_if(ay, m.dy, "zero_point");
  Var* ndy = b.create("dequantize", ay).at(0);

  b.set_insertion_point(m.qz->parent(), m.qz);
  b.set_location(m.qz->location());
  std::vector<Arg> aq = {Builder::arg("input", m.qz->input1("input")),
                         Builder::arg("scale", scale_value(m.qz, sz))};
  add_if(aq, m.qz, "zero_point");
  add_if(aq, m.qz, "axis");
  add_if(aq, m.qz, "output_dtype");
  Var* nqz = b.create("quantize", aq).at(0);

  // the op reads the new dequantize ops (x's first: when x and y are one var, both read it)
  for (auto [from, to] : {std::pair{m.dx->output(0), ndx}, std::pair{m.dy->output(0), ndy}})
    for (size_t i = 0; i < op->args().size(); ++i)
      if (op->args()[i] == from) op->set_arg(i, to);
  pass_util::replace_var(m.qz->output(0), nqz);
  m.qz->parent()->erase(m.qz);
  return true;
}

// Returns whether it rewrote a pattern.
bool normalize_block(Function& f, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks()) changed = normalize_block(f, *nb) || changed;
    Match m{};
    if (match(op, m) && transform(f, op, m)) changed = true;
  }
  return changed;
}

class DistributiveQuantizedBinaryOpScaleNormalization : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, kName, {});
    bool changed = false;
    if (!pass_util::has_op_type(p, {"quantize"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) changed = normalize_block(*f, f->body()) || changed;
    return changed;
  }
};

}  // namespace

/// Registers common::distributive_quantized_binary_op_scale_normalization.
void register_distributive_quantized_binary_op_scale_normalization(PassRegistry& r) {
  r.add(kName, [] { return std::make_unique<DistributiveQuantizedBinaryOpScaleNormalization>(); });
}

}  // namespace milkit

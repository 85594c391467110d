// common::canonicalize_quantized_lut_pattern, as coremltools does it. A palettized weight whose
// palette is quantized can be written two ways:
//   1. lut(int8) -> constexpr_blockwise_shift_scale -> lut(fp16) -> constexpr_lut_to_dense
//   2. lut(int8) -> constexpr_lut_to_dense -> dense(int8) -> constexpr_blockwise_shift_scale
// They agree when the scale is per tensor or per block of palettes. Before iOS26 the pass rewrites
// 2 into 1 (dequantize first); from iOS26 (where Core ML fixed pattern 2) it rewrites 1 into 2.
// The first op's output must have one reader, the second op. The new ops keep the old ops'
// names by position (the last one's output takes the old output's uses) unless a name contains
// its op type (a made-up name). Scale and offset gain / lose the two trailing palette dims; for a
// scale with more than one block the palette is repeated along any dim where the scale has more
// blocks (left alone when that is not a whole multiple, or the palette is not known). One sweep
// over each block, nested blocks first.
//
// Beyond coremltools (which raises, or builds a wrong op, in these cases):
// - 1 -> 2 takes the scale's leading dims (coremltools reshapes to the trailing (1, 1), which is
//   only right for a rank-2 weight with one scale) and is left alone when the scale varies along
//   a palette's entries or vector (its trailing two dims are not 1);
// - a vector palette (vector size > 1) keeps vector_axis (coremltools drops it);
// - the rewrite is left alone when its ops would not be valid (blocks of scales not made of
//   whole palettes, a sub-byte palette, an offset or scale that is not known) or the first op's
//   output is also a block's output.
#include <algorithm>
#include <optional>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

const char* const kName = "common::canonicalize_quantized_lut_pattern";
const char* const kLut = "constexpr_lut_to_dense";
const char* const kShift = "constexpr_blockwise_shift_scale";

// coremltools keeps a name unless it contains the op type (made up by the builder): "" = make one.
std::string kept_name(const Operation* op) {
  return op->name().find(op->op_type()) != std::string::npos ? std::string() : op->name();
}

// np.repeat(v, k, axis).
Value repeat(const Value& v, size_t axis, int64_t k) {
  std::vector<int64_t> shape = v.shape();
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[axis];
  std::vector<double> src = v.to_doubles(), dst;
  dst.reserve(src.size() * static_cast<size_t>(k));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t r = 0; r < k; ++r) {
        auto first = src.begin() + (o * n + i) * inner;
        dst.insert(dst.end(), first, first + inner);
      }
  shape[axis] *= k;
  return Value::from_doubles(v.dtype(), shape, dst);
}

// The known value of an optional input, reshaped; false when it is present but not known.
bool reshaped_input(const Operation* op, const char* name, const std::vector<int64_t>& shape,
                    std::optional<Value>& out) {
  Var* v = op->input1(name);
  if (!v) return true;
  if (!v->has_value()) return false;
  out = v->value()->reshaped(shape);
  return true;
}

// The new lut_to_dense's inputs: indices and `lut`, and vector_axis for a vector palette
// (coremltools drops it).
std::vector<Arg> lut_args(const Operation* lut_op, Var* lut) {
  std::vector<Arg> a = {Builder::arg("indices", lut_op->input1("indices")),
                        Builder::arg("lut", lut)};
  Var* va = lut_op->input1("vector_axis");
  if (va && lut_op->input1("lut")->type()->shape().back()->value() > 1)
    a.push_back(Builder::arg("vector_axis", va));
  return a;
}

Var* rebuild(Function& f, Operation* before, const std::string& type, std::vector<Arg> args,
             const std::string& name) {
  Builder b(f);
  b.set_insertion_point(before->parent(), before);
  b.set_location(before->location());
  return b.create(type, args, name).at(0);
}

// lut_to_dense -> shift_scale (pattern 2) into shift_scale -> lut_to_dense (pattern 1).
bool dequantize_first(Function& f, Operation* lut_op, Operation* sh) {
  Var* scale = sh->input1("scale");
  Var* lut = lut_op->input1("lut");
  if (!scale->has_value() || !lut->type()->is_static()) return false;
  std::vector<int64_t> sshape = scale->value()->shape();
  sshape.push_back(1);
  sshape.push_back(1);
  std::optional<Value> new_scale = scale->value()->reshaped(sshape), new_offset;
  if (!reshaped_input(sh, "offset", sshape, new_offset)) return false;
  std::vector<int64_t> lshape;
  for (const Dim& d : lut->type()->shape()) lshape.push_back(d->value());
  const std::vector<int64_t> ishape = [&] {
    std::vector<int64_t> s;
    for (const Dim& d : lut_op->input1("indices")->type()->shape()) s.push_back(d->value());
    return s;
  }();
  Arg lut_arg = Builder::arg("data", lut);
  if (std::any_of(sshape.begin(), sshape.end(), [](int64_t d) { return d != 1; })) {
    // palettes shared by several scale blocks are repeated, one per block (coremltools makes the
    // palette a new const whenever the scale has more than one block)
    if (!lut->has_value()) return false;
    Value v = *lut->value();
    for (size_t a = 0; a < sshape.size(); ++a)
      if (sshape[a] > lshape[a]) {
        if (sshape[a] % lshape[a] != 0) return false;
        v = repeat(v, a, sshape[a] / lshape[a]);
        lshape[a] = sshape[a];
      }
    lut_arg = Builder::arg("data", std::move(v));
  }
  // the new ops must be valid: whole palettes per scale block, palettes dividing the indices
  for (size_t a = 0; a < sshape.size(); ++a)
    if (lshape[a] % sshape[a] != 0 || (a < ishape.size() && ishape[a] % lshape[a] != 0))
      return false;
  std::vector<Arg> a1 = {std::move(lut_arg), Builder::arg("scale", std::move(*new_scale))};
  if (new_offset) a1.push_back(Builder::arg("offset", std::move(*new_offset)));
  Var* deq = rebuild(f, lut_op, kShift, std::move(a1), kept_name(lut_op));
  Var* dense = rebuild(f, lut_op, kLut, lut_args(lut_op, deq), kept_name(sh));
  pass_util::replace_var(sh->output(0), dense);
  return true;
}

// shift_scale -> lut_to_dense (pattern 1) into lut_to_dense -> shift_scale (pattern 2).
bool depalettize_first(Function& f, Operation* sh, Operation* lut_op) {
  Var* scale = sh->input1("scale");
  Var* data = sh->input1("data");
  if (!scale->has_value()) return false;
  const DataType ddt = data->type()->dtype();
  if (ddt != DataType::Int8 && ddt != DataType::UInt8 && ddt != DataType::Float16 &&
      ddt != DataType::Float32)
    return false;  // a sub-byte palette: lut_to_dense takes 8-bit and float palettes only
  std::vector<int64_t> sshape = scale->value()->shape();
  const size_t r = sshape.size();
  if (r < 3 || sshape[r - 1] != 1 || sshape[r - 2] != 1) return false;
  sshape.resize(sshape.size() - 2);
  std::optional<Value> new_scale = scale->value()->reshaped(sshape), new_offset;
  if (!reshaped_input(sh, "offset", sshape, new_offset)) return false;
  Var* dense = rebuild(f, lut_op, kLut, lut_args(lut_op, data), kept_name(sh));
  std::vector<Arg> a2 = {Builder::arg("data", dense), Builder::arg("scale", std::move(*new_scale))};
  if (new_offset) a2.push_back(Builder::arg("offset", std::move(*new_offset)));
  Var* deq = rebuild(f, lut_op, kShift, std::move(a2), kept_name(lut_op));
  pass_util::replace_var(lut_op->output(0), deq);
  return true;
}

bool canonicalize_block(Function& f, Block& blk) {
  bool changed = false;
  const bool to_dequantize_first = f.opset() < Target::iOS26;
  const char* first = to_dequantize_first ? kLut : kShift;
  const char* second = to_dequantize_first ? kShift : kLut;
  const char* slot = to_dequantize_first ? "data" : "lut";
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks()) changed = canonicalize_block(f, *nb) || changed;
    if (op->op_type() != first) continue;
    Var* out = op->output(0);
    if (out->uses().size() != 1 || !out->block_uses().empty()) continue;
    Operation* next = out->uses()[0].op;
    if (next->op_type() != second || next->input1(slot) != out || next->parent() != op->parent())
      continue;
    if (to_dequantize_first ? dequantize_first(f, op, next) : depalettize_first(f, op, next)) {
      blk.erase(next);
      blk.erase(op);
      changed = true;
    }
  }
  return changed;
}

class CanonicalizeQuantizedLutPattern : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, kName, {});
    bool changed = false;
    if (!pass_util::has_op_type(p, {"constexpr_lut_to_dense"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) changed = canonicalize_block(*f, f->body()) || changed;
    return changed;
  }
};

}  // namespace

/// Registers common::canonicalize_quantized_lut_pattern.
void register_canonicalize_quantized_lut_pattern(PassRegistry& r) {
  r.add(kName, [] { return std::make_unique<CanonicalizeQuantizedLutPattern>(); });
}

}  // namespace milkit

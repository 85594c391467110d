// common::concat_to_pixel_shuffle: two interleaved concats along axis 2 (H), each of two values,
// interleaved by a concat along axis 3 (W) become one interleaved concat of the four values along
// axis 1 followed by pixel_shuffle(upscale_factor=2), as coremltools does (FCRN up-convolution).
// The outer concat must read two rank-4 values (first one rank 4), axis exactly 3, interleave
// True, both produced by concats with two values, interleave True and axis exactly 2. The new
// concat of [a0, b0, a1, b1] ("concat_<n>") and pixel_shuffle ("pixel_shuffle_<n>") go before the
// first inner concat and take the outer concat output's uses (its name too when a function
// output); the three concats are removed. Only the function body is searched, one sweep. Where
// coremltools would fail or build an invalid order (a concat without an interleave input, both
// outer values from the same concat, an inner concat read elsewhere or a block output, a value of
// the second inner concat defined after the first) milkit leaves the pattern alone.
#include <algorithm>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::is_block_output;

bool const_int(const Operation* op, const char* name, int64_t& out) {
  Var* v = op->input1(name);
  if (!v || !v->has_value()) return false;
  out = v->value()->to_ints().at(0);
  return true;
}

std::vector<Var*> values_of(const Operation* op) {
  const auto span = op->input(0);
  return {span.begin(), span.end()};
}

bool is_interleaved_concat(const Operation* op, int64_t axis) {
  int64_t il = 0;
  int64_t ax = 0;
  return op && op->op_type() == "concat" && const_int(op, "interleave", il) && il != 0 &&
         values_of(op).size() == 2 && const_int(op, "axis", ax) && ax == axis;
}

bool try_replace(Builder& b, Block& blk, Operation* w) {
  if (!is_interleaved_concat(w, 3)) return false;
  std::vector<Var*> outer = values_of(w);
  if (outer[0]->type()->rank() != 4) return false;
  Operation* h0 = outer[0]->op();
  Operation* h1 = outer[1]->op();
  if (!is_interleaved_concat(h0, 2) || !is_interleaved_concat(h1, 2) || h0 == h1) return false;
  for (Operation* h : {h0, h1}) {
    if (h->parent() != &blk || is_block_output(h->output(0), &blk)) return false;
    for (const Use& u : h->output(0)->uses())
      if (u.op != w) return false;
  }
  std::vector<Var*> v0 = values_of(h0);
  std::vector<Var*> v1 = values_of(h1);
  std::vector<Var*> all = {v0[0], v1[0], v0[1], v1[1]};
  std::vector<Operation*> ops = blk.ops();
  const auto h0_pos = std::find(ops.begin(), ops.end(), h0) - ops.begin();
  for (Var* v : v1) {
    if (!v->op() || v->op()->parent() != &blk) continue;
    if (std::find(ops.begin(), ops.end(), v->op()) - ops.begin() > h0_pos) return false;
  }
  b.set_insertion_point(&blk, h0);
  b.set_location(h0->location());
  Arg vals;
  vals.name = "values";
  vals.is_sequence = true;
  for (Var* v : all) vals.items.push_back(ArgItem{v, nullptr});
  std::vector<Arg> cargs = {vals, Builder::arg("axis", Value::scalar_int(DataType::Int32, 1)),
                            Builder::arg("interleave", Value::scalar_bool(true))};
  Var* c = b.create("concat", cargs).at(0);
  std::vector<Arg> pargs = {Builder::arg("x", c),
                            Builder::arg("upscale_factor", Value::scalar_int(DataType::Int32, 2))};
  Var* ps = b.create("pixel_shuffle", pargs).at(0);
  pass_util::replace_var(w->output(0), ps);
  blk.erase(w);
  blk.erase(h1);
  blk.erase(h0);
  return true;
}

// One sweep over the function body (nested blocks are not looked at).
bool replace_in(Builder& b, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops())
    if (!op->erased() && try_replace(b, blk, op)) changed = true;
  return changed;
}

}  // namespace

/// Registers common::concat_to_pixel_shuffle.
void register_concat_to_pixel_shuffle(PassRegistry& r) {
  r.add("common::concat_to_pixel_shuffle",
        pass_util::block_pass("common::concat_to_pixel_shuffle", {"concat"}, replace_in));
}

}  // namespace milkit

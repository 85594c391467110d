// common::use_reflection_padding: concat(slices..., x, slices...) of single-element
// slice_by_index ops that mirror x along its last or second-to-last axis becomes
// pad(x, mode="reflect"), as coremltools does. The concat must have an odd number (>= 3) of
// values with x (the middle one) in the middle; every other value must be a slice_by_index of x
// that is not a block output. The axis is the first False entry of the first slice's end_mask
// (given, or inferred as end[i] == x.shape[i] when absent); each slice must take one element
// there, the left ones starting at p, p-1, ..., 1 and the right ones at -2, -3, ... (or those plus
// the dim when it is known). Only axes -1 and -2 (counted from the end_mask length) become a pad
// ("pad_<n>", before the concat, pad [p, p] or [p, p, 0, 0]); it takes the concat output's uses
// and the concat and slices are removed. Only the function body is searched, one sweep. Where
// coremltools would fail (non-constant begin / end, a slice read elsewhere or twice) milkit leaves
// the pattern alone.
#include <algorithm>
#include <optional>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::is_block_output;

std::optional<std::vector<bool>> resolve_end_mask(const Operation* s) {
  if (Var* m = s->input1("end_mask")) {
    if (!m->has_value()) return std::nullopt;
    std::vector<bool> r;
    for (int64_t v : m->value()->to_ints()) r.push_back(v != 0);
    return r;
  }
  Var* end = s->input1("end");
  if (!end || !end->has_value()) return std::nullopt;
  std::vector<int64_t> e = end->value()->to_ints();
  const Type* xt = s->input1("x")->type();
  std::vector<bool> r;
  if (!xt->has_rank()) return r;
  for (size_t i = 0; i < std::min(e.size(), xt->shape().size()); ++i) {
    Dim d = xt->shape()[i];
    r.push_back(d->is_const() && d->value() == e[i]);
  }
  return r;
}

bool try_replace(Builder& b, Block& blk, Operation* concat) {
  const auto span = concat->input(0);
  std::vector<Var*> values(span.begin(), span.end());
  if (values.size() % 2 != 1 || values.size() == 1) return false;
  Var* original = values[values.size() / 2];
  std::optional<size_t> axis;
  size_t mask_len = 0;
  auto begin_index = static_cast<int64_t>(values.size() / 2);
  std::vector<Operation*> slices;
  for (Var* v : values) {
    if (v == original) {
      begin_index -= 2;
      continue;
    }
    Operation* s = v->op();
    if (!s || s->op_type() != "slice_by_index" || s->input1("x") != original) return false;
    if (is_block_output(v, &blk)) return false;
    if (!axis) {
      std::optional<std::vector<bool>> mask = resolve_end_mask(s);
      if (!mask) return false;
      auto it = std::find(mask->begin(), mask->end(), false);
      if (it == mask->end()) return false;
      axis = static_cast<size_t>(it - mask->begin());
      mask_len = mask->size();
    }
    Var* bv = s->input1("begin");
    Var* ev = s->input1("end");
    if (!bv || !ev || !bv->has_value() || !ev->has_value()) return false;
    std::vector<int64_t> bg = bv->value()->to_ints();
    std::vector<int64_t> en = ev->value()->to_ints();
    if (*axis >= bg.size() || *axis >= en.size() || en[*axis] - bg[*axis] != 1) return false;
    const Type* xt = original->type();
    if (!xt->has_rank() || *axis >= xt->shape().size()) return false;
    Dim d = xt->shape()[*axis];
    if (bg[*axis] != begin_index && !(d->is_const() && bg[*axis] == begin_index + d->value()))
      return false;
    --begin_index;
    slices.push_back(s);
  }
  if (!axis) return false;
  for (Operation* s : slices) {
    if (std::count(slices.begin(), slices.end(), s) != 1) return false;
    for (const Use& u : s->output(0)->uses())
      if (u.op != concat) return false;
  }
  const int64_t rel = static_cast<int64_t>(*axis) - static_cast<int64_t>(mask_len);
  const auto p = static_cast<int64_t>(slices.size() / 2);
  std::vector<int64_t> pad;
  if (rel == -1)
    pad = {p, p};
  else if (rel == -2)
    pad = {p, p, 0, 0};
  else
    return false;
  b.set_insertion_point(&blk, concat);
  b.set_location(concat->location());
  std::vector<Arg> args = {Builder::arg("x", original), Builder::arg("pad", Value::int_list(pad)),
                           Builder::arg("mode", Value::scalar_string("reflect"))};
  Var* padded = b.create("pad", args).at(0);
  pass_util::replace_var(concat->output(0), padded);
  blk.erase(concat);
  for (Operation* s : slices) blk.erase(s);
  return true;
}

// One sweep over the function body (nested blocks are not looked at).
bool replace_in(Builder& b, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops())
    if (!op->erased() && op->op_type() == "concat" && try_replace(b, blk, op)) changed = true;
  return changed;
}

}  // namespace

/// Registers common::use_reflection_padding.
void register_use_reflection_padding(PassRegistry& r) {
  r.add("common::use_reflection_padding",
        pass_util::block_pass("common::use_reflection_padding", {"concat"}, replace_in));
}

}  // namespace milkit

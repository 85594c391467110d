// common::fuse_dilated_conv: space_to_batch -> conv (2D) -> batch_to_space becomes one conv with
// dilations, as coremltools does. The space_to_batch must feed only the conv (as its x), the conv
// only the batch_to_space; neither output may be a block output. Both block_shapes must be known
// and equal, paddings and crops known. When some padding is non-zero, it must be the "same"
// padding of the dilated kernel on the (known) input height and width, with crops [0, extra_h],
// [0, extra_w] (coremltools' _uses_same_padding); the new conv then gets pad_type "same". The new
// conv (an automatic name, before the old conv) has the old conv's inputs with x = the
// space_to_batch input, dilations = block_shape (a new const) and, when padded, pad_type "same"
// (a new const); it replaces the batch_to_space output unless that would drop a constexpr
// dependency, and the three ops go.
//
// Where coremltools would change the numbers, milkit leaves the pattern alone: the conv must have
// strides 1 and dilations 1, a "same" / "same_lower" conv must have odd kernel sizes, and the new
// conv's output type must equal the batch_to_space output's (non-zero crops with zero paddings,
// or a padded conv, make coremltools write a conv of another shape).
// Nested blocks are rewritten until stable before their op; the function is swept until nothing
// changes.
#include <string>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::only_child;

bool all_equal(const Var* v, int64_t x) {
  if (!v || !v->has_value()) return false;
  for (int64_t e : v->value()->to_ints())
    if (e != x) return false;
  return true;
}

std::string string_of(const Var* v) {
  if (!v || !v->has_value() || v->value()->dtype() != DataType::String) return "";
  return v->value()->string_values().at(0);
}

// coremltools' fuse_dilated_conv._uses_same_padding.
bool uses_same_padding(int64_t h, int64_t w, int64_t kh, int64_t kw, const std::vector<int64_t>& d,
                       const std::vector<int64_t>& pad, const std::vector<int64_t>& crop) {
  auto pymod = [](int64_t a, int64_t m) { return ((a % m) + m) % m; };
  int64_t dh = d[0] * (kh - 1) + 1, dw = d[1] * (kw - 1) + 1;
  int64_t start_h = (dh - 1) / 2, end_h0 = dh - 1 - (dh - 1) / 2;
  int64_t start_w = (dw - 1) / 2, end_w0 = dw - 1 - (dw - 1) / 2;
  int64_t extra_h = pymod(d[0] - pymod(h + start_h + end_h0, d[0]), d[0]);
  int64_t extra_w = pymod(d[1] - pymod(w + start_w + end_w0, d[1]), d[1]);
  return pad[0] == start_h && pad[1] == end_h0 + extra_h && pad[2] == start_w &&
         pad[3] == end_w0 + extra_w && crop[0] == 0 && crop[1] == extra_h && crop[2] == 0 &&
         crop[3] == extra_w;
}

// Whether the fused conv computes what the three ops compute (milkit's extra conditions).
bool keeps_numbers(const Operation* conv) {
  if (!all_equal(conv->input1("strides"), 1) || !all_equal(conv->input1("dilations"), 1))
    return false;
  std::string pt = string_of(conv->input1("pad_type"));
  if (pt == "same" || pt == "same_lower") {
    const Type* wt = conv->input1("weight")->type();
    for (size_t i = 2; i < wt->shape().size(); ++i) {
      Dim k = wt->shape()[i];
      if (!k->is_const() || k->value() % 2 == 0) return false;
    }
  }
  return true;
}

bool step(Builder& b, Block& blk, Operation* stb) {
  if (stb->op_type() != "space_to_batch") return false;
  Operation* conv = only_child(stb, "conv");
  if (!conv || conv->parent() != &blk || conv->input1("x") != stb->output(0)) return false;
  const Type* xt = conv->input1("x")->type();
  if (!xt->has_rank() || xt->rank() != 4) return false;
  Operation* bts = only_child(conv, "batch_to_space");
  if (!bts || bts->parent() != &blk) return false;
  if (!stb->output(0)->block_uses().empty() || !conv->output(0)->block_uses().empty()) return false;
  Var* bs1 = stb->input1("block_shape");
  Var* bs2 = bts->input1("block_shape");
  Var* paddings = stb->input1("paddings");
  Var* crops = bts->input1("crops");
  if (!bs1->has_value() || !bs2->has_value() || !paddings->has_value() || !crops->has_value())
    return false;
  std::vector<int64_t> d = bs1->value()->to_ints();
  if (d != bs2->value()->to_ints()) return false;
  std::vector<int64_t> pad = paddings->value()->to_ints();
  std::vector<int64_t> crop = crops->value()->to_ints();
  bool same = false;
  bool any_pad = false;
  for (int64_t p : pad) any_pad = any_pad || p != 0;
  if (any_pad) {
    const Type* it = stb->input1("x")->type();
    const Type* wt = conv->input1("weight")->type();
    if (!it->has_rank() || it->rank() != 4 || !wt->has_rank() || wt->rank() != 4) return false;
    Dim h = it->shape()[2], w = it->shape()[3], kh = wt->shape()[2], kw = wt->shape()[3];
    if (!h->is_const() || !w->is_const() || !kh->is_const() || !kw->is_const()) return false;
    if (d.size() != 2 || pad.size() != 4 || crop.size() != 4 || d[0] <= 0 || d[1] <= 0)
      return false;
    same = uses_same_padding(h->value(), w->value(), kh->value(), kw->value(), d, pad, crop);
    if (!same) return false;
  }
  if (!keeps_numbers(conv)) return false;

  std::vector<Arg> args;
  const OpSchema& s = conv->schema();
  for (size_t i = 0; i < conv->num_inputs(); ++i) {
    const std::string& n = s.inputs[i].name;
    if (n == "x") {
      args.push_back(Builder::arg("x", stb->input1("x")));
    } else if (n == "dilations") {
      args.push_back(Builder::arg("dilations", Value::int_list(d, bs1->value()->dtype())));
    } else if (n == "pad_type" && same) {
      args.push_back(Builder::arg("pad_type", Value::scalar_string("same")));
    } else if (!conv->input(i).empty()) {
      args.push_back(Builder::arg(n, conv->input(i)[0]));
    }
  }
  b.set_insertion_point(&blk, conv);
  b.set_location(conv->location());
  Var* out = b.create("conv", args).at(0);
  Var* old = bts->output(0);
  if (out->type() != old->type()) {  // milkit only: the fused conv would change the output
    Operation* made = out->op();
    std::vector<Operation*> consts;
    for (Var* a : made->args())
      if (a->op() && a->op()->op_type() == "const" && a->uses().size() == 1)
        consts.push_back(a->op());
    blk.erase(made);
    for (Operation* c : consts) blk.erase(c);
    return false;
  }
  // as coremltools, a conv that cannot replace the output stays (dead) in the block
  if (!pass_util::can_be_replaced(old, out)) return false;
  pass_util::replace_uses_after(conv, old, out);
  blk.erase(bts);
  blk.erase(conv);
  blk.erase(stb);
  return true;
}

}  // namespace

/// Registers common::fuse_dilated_conv.
void register_fuse_dilated_conv(PassRegistry& r) {
  r.add("common::fuse_dilated_conv",
        pass_util::rewrite_pass("common::fuse_dilated_conv", {"space_to_batch"}, step,
                                pass_util::OpScan::Function));
}

}  // namespace milkit

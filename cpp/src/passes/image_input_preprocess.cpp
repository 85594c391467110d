// common::image_input_preprocess, as coremltools does it: an image input whose program reads it
// channel last (ImageType(channel_first=False), shape (..., H, W, C)) becomes channel first
// (..., C, H, W), the way Core ML hands images over; a transpose "<input>__transpose_from_nchw__"
// (perm (..., -2, -1, -3)) before the first op of the function gives every former user the NHWC
// tensor back. The input's enumerated shapes and default shape are permuted the same way, and the
// input is marked channel first. Each transpose goes before the current first op, so those of
// later inputs come first.
#include "milkit/builder/builder.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

template <class T>
std::vector<T> to_channel_first(const std::vector<T>& s) {
  const size_t r = s.size();
  std::vector<T> out(s.begin(), s.end() - 3);
  out.push_back(s[r - 1]);
  out.push_back(s[r - 3]);
  out.push_back(s[r - 2]);
  return out;
}

// Every use of `from` (ops anywhere in the function, block outputs) except by `skip` reads `to`.
void redirect_uses(Var* from, Var* to, const Operation* skip) {
  std::vector<Use> uses = from->uses();
  for (const Use& u : uses)
    if (u.op != skip) u.op->set_arg(u.slot, to);
  std::vector<Block*> blocks = from->block_uses();
  for (Block* b : blocks)
    for (size_t i = 0; i < b->outputs().size(); ++i)
      if (b->outputs()[i] == from) b->set_output(i, to);
}

class ImageInputPreprocess : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::image_input_preprocess", {});
    bool changed = false;
    for (auto& [fname, f] : p.functions()) {
      for (ImageInput& im : f->image_inputs()) {
        if (im.channel_first || im.input >= f->inputs().size()) continue;
        Var* in = f->inputs()[im.input];
        const Type* t = in->type();
        if (!t->is_tensor() || !t->has_rank() || t->rank() < 3)
          throw ValueError("common::image_input_preprocess: image input '" + in->name() +
                           "' must be a tensor of rank 3 or more (..., H, W, C), got " + t->str());
        const std::vector<Dim> nhwc = t->shape();
        in->set_type(f->ctx().tensor(t->dtype(), to_channel_first(nhwc)));
        for (auto& s : im.enumerated_shapes)
          if (s.size() == nhwc.size()) s = to_channel_first(s);
        if (im.default_shape.size() == nhwc.size())
          im.default_shape = to_channel_first(im.default_shape);
        im.channel_first = true;

        const int64_t r = static_cast<int64_t>(nhwc.size());
        std::vector<int64_t> perm;
        for (int64_t i = 0; i < r - 3; ++i) perm.push_back(i);
        perm.insert(perm.end(), {r - 2, r - 1, r - 3});
        Builder b(*f);
        b.set_insertion_point(&f->body(), f->body().front());
        std::vector<Arg> args{Builder::arg("x", in), Builder::arg("perm", Value::int_list(perm))};
        Var* nhwc_var = b.create("transpose", args, in->name() + "__transpose_from_nchw__").at(0);
        redirect_uses(in, nhwc_var, nhwc_var->op());
        changed = true;
      }
    }
    return changed;
  }
};

}  // namespace

/// Registers common::image_input_preprocess.
void register_image_input_preprocess(PassRegistry& r) {
  r.add("common::image_input_preprocess", [] { return std::make_unique<ImageInputPreprocess>(); });
}

}  // namespace milkit

// mil_backend::insert_image_preprocessing_ops, as coremltools does it: for each image input (in
// the order they were given) with a scale other than 1, a mul "<input>__scaled__" by the scale;
// then, when a bias value is not 0, an add "<input>__biased__" of the bias (a scalar for grayscale,
// shape (3, 1, 1) or (1, 3, 1, 1) for RGB / BGR inputs of rank 3 / 4). The consts take the
// input's dtype; all of them go before the function's first op (a function without ops is left
// alone), and every other reader of the input reads the last of them instead. Once inserted, the
// input is marked scale 1 and no bias, so running the pass again changes nothing.
#include "milkit/builder/builder.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

class InsertImagePreprocessingOps : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "mil_backend::insert_image_preprocessing_ops", {});
    bool changed = false;
    for (auto& [fname, f] : p.functions()) {
      Operation* first = f->body().front();
      if (!first) continue;
      Builder b(*f);
      for (ImageInput& im : f->image_inputs()) {
        if (im.input >= f->inputs().size()) continue;
        Var* in = f->inputs()[im.input];
        bool has_bias = false;
        for (double v : im.bias) has_bias |= v != 0;
        if (im.scale == 1 && !has_bias) continue;
        const Type* t = in->type();
        if (!t->is_tensor())
          throw ValueError("mil_backend::insert_image_preprocessing_ops: image input '" +
                           in->name() + "' must be a tensor, got " + t->str());
        const DataType dt = t->dtype();
        b.set_insertion_point(&f->body(), first);
        Var* last = in;
        Operation* reader = nullptr;  // the new op that reads the input itself
        if (im.scale != 1) {
          std::vector<Arg> args{Builder::arg("x", last),
                                Builder::arg("y", Value::scalar_float(dt, im.scale))};
          last = b.create("mul", args, in->name() + "__scaled__").at(0);
          reader = last->op();
        }
        if (has_bias) {
          Value bias = Value::scalar_float(dt, 0);
          if (color_channels(im.color_layout) == 1) {
            if (im.bias.size() != 1)
              throw ValueError("image input '" + in->name() +
                               "': a grayscale image takes one bias value, got " +
                               std::to_string(im.bias.size()));
            bias = Value::scalar_float(dt, im.bias[0]);
          } else {
            if (im.bias.size() != 3)
              throw ValueError("image input '" + in->name() +
                               "': an RGB / BGR image takes three bias values, got " +
                               std::to_string(im.bias.size()));
            if (t->rank() == 3)
              bias = Value::from_doubles(dt, {3, 1, 1}, im.bias);
            else if (t->rank() == 4)
              bias = Value::from_doubles(dt, {1, 3, 1, 1}, im.bias);
            else
              throw ValueError("image input '" + in->name() + "': unsupported rank " +
                               std::to_string(t->rank()) +
                               " for an RGB / BGR image input (3 or 4)");
          }
          std::vector<Arg> args{Builder::arg("x", last), Builder::arg("y", std::move(bias))};
          last = b.create("add", args, in->name() + "__biased__").at(0);
          if (!reader) reader = last->op();
        }
        // every other reader (ops anywhere, block outputs) reads the preprocessed input
        std::vector<Use> uses = in->uses();
        for (const Use& u : uses)
          if (u.op != reader) u.op->set_arg(u.slot, last);
        std::vector<Block*> blocks = in->block_uses();
        for (Block* blk : blocks)
          for (size_t i = 0; i < blk->outputs().size(); ++i)
            if (blk->outputs()[i] == in) blk->set_output(i, last);
        im.scale = 1;
        im.bias.clear();
        changed = true;
      }
    }
    return changed;
  }
};

}  // namespace

/// Registers mil_backend::insert_image_preprocessing_ops.
void register_insert_image_preprocessing_ops(PassRegistry& r) {
  r.add("mil_backend::insert_image_preprocessing_ops",
        [] { return std::make_unique<InsertImagePreprocessingOps>(); });
}

}  // namespace milkit

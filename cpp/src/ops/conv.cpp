// conv ops: conv, conv_transpose, conv_quantized (coremltools iOS15/conv.py, iOS17/conv.py), and
// the spatial output-size helpers shared with the pool ops (milkit/ops/conv_util.h).
//
// Output sizes over symbolic spatial dims are exact expressions (coremltools makes a fresh
// symbol): conv / pool "valid" and "custom" give (n + pad - ek) // s + 1, "same" and
// "same_lower" give ceil(n / s); conv_transpose gives s * (n - 1) + ek - pad, or s * n.
#include <algorithm>
#include <cctype>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"
#include "milkit/ops/conv_util.h"

namespace milkit {

namespace {

int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

bool is_same(const std::string& pad_type) {
  return pad_type == "same" || pad_type == "same_lower";
}

}  // namespace

namespace ops {

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::vector<int64_t> int_list(const InferCtx& ic, std::string_view name) {
  std::vector<int64_t> v = ic.ints(name);
  if (ic.val(name)->rank() != 1)
    ic.fail_input(name, "must be a list (rank-1 tensor), got " + ic.type(name)->str());
  return v;
}

Dim effective_kernel(Context& ctx, Dim k, int64_t dilation) {
  return ctx.add(ctx.mul(ctx.sub(k, ctx.constant(1)), ctx.constant(dilation)), ctx.constant(1));
}

Dim same_total_pad(Context& ctx, Dim n, Dim ek, int64_t stride) {
  Dim s = ctx.constant(stride);
  // s * ceil(n / s) - n + ek - s, clamped at 0
  Dim p = ctx.sub(ctx.add(ctx.sub(ctx.mul(s, ctx.ceildiv(n, s)), n), ek), s);
  return ctx.max(ctx.constant(0), p);
}

int64_t same_total_pad(int64_t n, int64_t ek, int64_t stride) {
  return std::max<int64_t>(0, (py_floordiv(n + stride - 1, stride) - 1) * stride + ek - n);
}

int64_t same_pad_before(const std::string& pad_type, int64_t total_pad) {
  return pad_type == "same_lower" ? total_pad - total_pad / 2 : total_pad / 2;
}

int64_t spatial_out_size(int64_t n, int64_t total_pad, int64_t ek, int64_t stride, bool ceil_mode) {
  if (!ceil_mode) return py_floordiv(n + total_pad - ek, stride) + 1;
  int64_t out = py_floordiv(n + total_pad - ek + stride - 1, stride) + 1;
  // (out - 1) * s >= n + pad / 2 and pad > 0  ->  drop the last window
  if (total_pad > 0 && 2 * (out - 1) * stride >= 2 * n + total_pad) out -= 1;
  return out;
}

Dim spatial_out_dim(const InferCtx& ic, size_t dim, const std::string& pad_type, Dim n, Dim ek,
                    int64_t stride, Dim total_pad, bool ceil_mode) {
  Context& c = ic.ctx;
  if (stride <= 0)
    ic.fail_input("strides", "must be positive, got " + std::to_string(stride) +
                                 " for spatial dimension " + std::to_string(dim));
  if (n->is_const() && ek->is_const() && total_pad->is_const()) {
    // coremltools' arithmetic, exactly
    const int64_t in = n->value(), k = ek->value(), p = total_pad->value(), s = stride;
    int64_t out = spatial_out_size(in, p, k, s, ceil_mode);
    if (out <= 0)
      ic.fail("spatial dimension " + std::to_string(dim) + " has invalid output size " +
              std::to_string(out) + ": the effective kernel size " + std::to_string(k) +
              " is larger than the padded input size " + std::to_string(in + p) + " (input " +
              std::to_string(in) + " + padding " + std::to_string(p) + ", stride " +
              std::to_string(s) + ")");
    return c.constant(out);
  }
  Dim one = c.constant(1);
  Dim S = c.constant(stride);
  if (!ceil_mode) {
    // same / same_lower: (n + pad - ek) // s + 1 with pad = max(0, s*ceil(n/s) - n + ek - s)
    // is ceil(n / s) whichever side of the max wins.
    if (is_same(pad_type)) return c.ceildiv(n, S);
    return c.add(c.floordiv(c.sub(c.add(n, total_pad), ek), S), one);
  }
  // ceil mode: A = (n + pad - ek + s - 1) // s, out = A + 1 - [pad > 0 and A*s >= n + pad/2]
  Dim numA = c.add(c.sub(c.add(n, total_pad), ek), c.constant(stride - 1));
  Dim A = c.floordiv(numA, S);
  Dim out0 = c.add(A, one);
  if (total_pad->is_const() && total_pad->value() <= 0) return out0;
  // A*s >= n + pad/2  <=>  A >= ceil((2n + pad) / (2s)) =: C  (for even pad: ceil((n + pad/2) / s))
  Dim C, numA2, numC2;  // numerators over the common divisor 2s, to prove A <= C
  if (total_pad->is_const() && total_pad->value() % 2 == 0) {
    Dim half = c.constant(total_pad->value() / 2);
    C = c.ceildiv(c.add(n, half), S);
    numA2 = numA;
    numC2 = c.add(c.add(n, half), c.constant(stride - 1));
  } else {
    Dim S2 = c.constant(2 * stride);
    Dim num = c.add(c.mul(c.constant(2), n), total_pad);
    C = c.ceildiv(num, S2);
    numA2 = c.mul(c.constant(2), numA);
    numC2 = c.add(num, c.constant(2 * stride - 1));
  }
  bool a_le_c = c.le(numA2, numC2) == Tri::True;  // floor is monotone: A <= C
  bool pad_pos = total_pad->is_const() || c.lt(c.constant(0), total_pad) == Tri::True;
  if (a_le_c && pad_pos) return c.min(out0, C);  // A + 1 - [A == C]
  // general form: out0 - [pad > 0] * [A - C + 1 >= 1]
  Dim ind = c.min(c.max(c.add(c.sub(A, C), one), c.constant(0)), one);
  if (!pad_pos) ind = c.mul(c.min(total_pad, one), ind);  // pad >= 0, so [pad > 0] = min(pad, 1)
  return c.sub(out0, ind);
}

std::vector<Dim> spatial_output_shape(const InferCtx& ic, const std::string& pad_type,
                                      const std::vector<Dim>& input,
                                      const std::vector<Dim>& kernel,
                                      const std::vector<int64_t>& strides,
                                      const std::vector<int64_t>& dilations,
                                      const std::vector<int64_t>* custom_pad, bool ceil_mode) {
  Context& c = ic.ctx;
  const size_t nd = kernel.size();
  const size_t np = custom_pad ? custom_pad->size() : 2 * nd;
  if (!(input.size() == nd && strides.size() == nd && dilations.size() == nd && np == 2 * nd))
    ic.fail("input spatial shape " + shape_str(input) + " (length " + std::to_string(input.size()) +
            "), kernel_shape (length " + std::to_string(nd) + "), strides " + ints_str(strides) +
            " (length " + std::to_string(strides.size()) + "), dilations " + ints_str(dilations) +
            " (length " + std::to_string(dilations.size()) + ") and pad (length " +
            std::to_string(np) + ") divided by two must all be the same length");
  if (!(pad_type == "valid" || pad_type == "custom" || is_same(pad_type)))
    ic.fail_input("pad_type", "has invalid padding pad_type \"" + pad_type +
                                  "\"; expected one of \"valid\", \"same\", \"same_lower\", "
                                  "\"custom\"");
  for (size_t r = 0; r < nd; ++r)
    if (strides[r] <= 0)
      ic.fail_input("strides", "must be positive, got " + ints_str(strides));
  std::vector<Dim> ek(nd), pad(nd);
  for (size_t r = 0; r < nd; ++r) {
    ek[r] = effective_kernel(c, kernel[r], dilations[r]);
    if (is_same(pad_type)) pad[r] = same_total_pad(c, input[r], ek[r], strides[r]);
    else if (pad_type == "valid") pad[r] = c.constant(0);
    else pad[r] = c.constant(custom_pad ? (*custom_pad)[2 * r] + (*custom_pad)[2 * r + 1] : 0);
  }
  std::vector<Dim> out(nd);
  for (size_t r = 0; r < nd; ++r)
    out[r] = spatial_out_dim(ic, r, pad_type, input[r], ek[r], strides[r], pad[r], ceil_mode);
  return out;
}

}  // namespace ops

namespace {

using ops::ints_str;
using ops::shape_str;

/// Defaults depending on the number of spatial dims (x rank - 2).
std::vector<std::pair<std::string, Value>> spatial_defaults(InferCtx& ic, bool dilations) {
  const Type* t = ic.type("x");
  if (!t->is_tensor() || !t->has_rank()) return {};
  size_t n = t->rank() >= 2 ? static_cast<size_t>(t->rank() - 2) : 0;
  std::vector<std::pair<std::string, Value>> d;
  d.emplace_back("strides", Value::int_list(std::vector<int64_t>(n, 1)));
  d.emplace_back("pad", Value::int_list(std::vector<int64_t>(2 * n, 0)));
  if (dilations) d.emplace_back("dilations", Value::int_list(std::vector<int64_t>(n, 1)));
  return d;
}

const std::vector<Dim>& spatial_input(const InferCtx& ic) {
  const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
  if (xs.size() < 3)
    ic.fail_input("x", "must have rank >= 3 ([n, C_in, *D_in] with at least one spatial dim), got " +
                           ic.type("x")->str());
  return xs;
}

/// conv and conv_quantized (coremltools iOS15 conv.type_inference).
std::vector<const Type*> conv_infer(InferCtx& ic) {
  Context& c = ic.ctx;
  const std::vector<Dim>& xs = spatial_input(ic);
  const std::vector<Dim>& ws = ops::ranked_shape(ic, "weight");
  if (ws.size() < 2)
    ic.fail_input("weight", "must have rank >= 2 ([C_out, C_in / groups, *K]), got " +
                                ic.type("weight")->str());
  Dim c_out = ws[0];
  Dim c_in = xs[1];
  int64_t groups = ic.int_("groups");
  if (ic.has("bias")) {
    const std::vector<Dim>& bs = ops::ranked_shape(ic, "bias");
    if (bs.size() != 1 || bs[0] != c_out)
      ic.fail_input("bias", "has shape " + shape_str(bs) + ": # of bias values " +
                                (bs.empty() ? std::string("(scalar)") : bs[0]->str()) +
                                " not equal to # output channels " + c_out->str());
  }
  if (c_in->is_const()) {
    int64_t ci = c_in->value();
    if (groups == 0)
      ic.fail_input("groups", "must be non-zero: C_in / groups = " + std::to_string(ci) + "/0 != weight[1] (" +
                                  ws[1]->str() + ")");
    if (py_mod(ci, groups) != 0)
      ic.fail("# of input channels " + std::to_string(ci) + " not divisible by groups " +
              std::to_string(groups));
    if (c.constant(py_floordiv(ci, groups)) != ws[1])
      ic.fail("C_in / groups = " + std::to_string(ci) + "/" + std::to_string(groups) +
              " != weight[1] (" + ws[1]->str() + "): weight " + ic.type("weight")->str() +
              " does not match x " + ic.type("x")->str());
  }
  std::vector<int64_t> strides = ops::int_list(ic, "strides");
  std::vector<int64_t> dilations = ops::int_list(ic, "dilations");
  std::string pad_type = ic.str("pad_type");
  if (ic.opset == Target::iOS15 && pad_type == "same_lower")
    ic.fail_input("pad_type", "= \"same_lower\" is not supported by the iOS15 version of " +
                                  ic.schema.name + " (use iOS16 or later)");
  std::optional<std::vector<int64_t>> custom_pad;
  if (pad_type == "custom" && ic.has("pad")) custom_pad = ops::int_list(ic, "pad");
  if (!is_descendant_of_const(ic.var("weight")) &&
      std::any_of(dilations.begin(), dilations.end(), [](int64_t d) { return d > 1; }))
    ic.fail("convolution with dynamic (non-const) weights does not support dilations " +
            ints_str(dilations));
  std::vector<Dim> in(xs.begin() + 2, xs.end());
  std::vector<Dim> kernel(ws.begin() + 2, ws.end());
  std::vector<Dim> spatial = ops::spatial_output_shape(
      ic, pad_type, in, kernel, strides, dilations, custom_pad ? &*custom_pad : nullptr, false);
  std::vector<Dim> out{xs[0], c_out};
  out.insert(out.end(), spatial.begin(), spatial.end());
  return {c.tensor(ic.type("x")->dtype(), out)};
}

/// conv_transpose (coremltools iOS15 conv_transpose.type_inference).
std::vector<const Type*> conv_transpose_infer(InferCtx& ic) {
  Context& c = ic.ctx;
  const std::vector<Dim>& xs = spatial_input(ic);
  const std::vector<Dim>& ws = ops::ranked_shape(ic, "weight");
  if (ws.size() < 2)
    ic.fail_input("weight", "must have rank >= 2 ([C_in, C_out / groups, *K]), got " +
                                ic.type("weight")->str());
  const size_t nd = xs.size() - 2;
  Dim n = xs[0];
  int64_t groups = ic.int_("groups");
  if (groups < 0) ic.fail_input("groups", "must be >= 0, got " + std::to_string(groups));
  Dim c_out = c.mul(ws[1], c.constant(groups));
  if (ic.has("bias")) {
    const Value* b = ic.val("bias");
    if (!b || b->is_symbolic())
      ic.fail_input("bias", "must be a compile-time constant (its length is checked against the "
                            "output channels), got non-const var '" + ic.var("bias")->name() + "'");
    if (b->rank() == 0 || c.constant(b->shape()[0]) != c_out)
      ic.fail_input("bias", "# of bias values " +
                                (b->rank() == 0 ? std::string("(scalar)") : std::to_string(b->shape()[0])) +
                                " not equal to # output channels " + c_out->str() +
                                " (weight[1] * groups)");
  }
  DataType dt = ic.type("x")->dtype();
  if (ic.has("output_shape")) {
    std::vector<int64_t> os = ops::int_list(ic, "output_shape");
    if (os.size() < 2)
      ic.fail_input("output_shape", "= " + ints_str(os) + " must start with [n, C_out]");
    if (c.constant(os[0]) != n)
      ic.fail_input("output_shape", "= " + ints_str(os) + ": output_shape[0] must equal the batch dim " +
                                        n->str() + " of x");
    if (c.constant(os[1]) != c_out)
      ic.fail_input("output_shape", "= " + ints_str(os) + ": output_shape[1] must equal C_out = " +
                                        c_out->str());
    for (int64_t d : os)
      if (d < 0) ic.fail_input("output_shape", "= " + ints_str(os) + " has a negative dim");
    return {c.tensor(dt, os)};
  }
  std::vector<int64_t> strides = ops::int_list(ic, "strides");
  std::vector<int64_t> dilations = ops::int_list(ic, "dilations");
  if (strides.size() < nd)
    ic.fail_input("strides", "= " + ints_str(strides) + " needs one value per spatial dim (" +
                                 std::to_string(nd) + ")");
  if (dilations.size() < nd)
    ic.fail_input("dilations", "= " + ints_str(dilations) + " needs one value per spatial dim (" +
                                   std::to_string(nd) + ")");
  if (ws.size() - 2 < nd)
    ic.fail_input("weight", "has shape " + shape_str(ws) + ": needs one kernel size per spatial dim (" +
                                std::to_string(nd) + ")");
  std::string pad_type = ic.str("pad_type");
  std::vector<int64_t> pad;
  if (pad_type == "custom") {
    pad = ops::int_list(ic, "pad");
    if (pad.size() < 2 * nd)
      ic.fail_input("pad", "= " + ints_str(pad) + " needs two values per spatial dim (" +
                               std::to_string(nd) + ")");
  } else if (pad_type != "same" && pad_type != "valid") {
    ic.fail_input("pad_type", "has invalid value \"" + pad_type +
                                  "\"; expected one of \"valid\", \"same\", \"custom\"");
  }
  std::vector<Dim> out{n, c_out};
  for (size_t r = 0; r < nd; ++r) {
    Dim d = xs[2 + r];
    Dim s = c.constant(strides[r]);
    Dim o;
    if (pad_type == "same") {
      o = c.mul(s, d);
    } else {
      Dim ek = ops::effective_kernel(c, ws[2 + r], dilations[r]);
      o = c.add(c.mul(s, c.sub(d, c.constant(1))), ek);
      if (pad_type == "custom") o = c.sub(o, c.constant(pad[2 * r] + pad[2 * r + 1]));
    }
    if (o->is_const() && o->value() < 0)
      ic.fail("spatial dimension " + std::to_string(r) + " has invalid output size " +
              o->str());
    out.push_back(o);
  }
  return {c.tensor(dt, out)};
}

OpSchema conv_schema(Target since, bool mixed) {
  OpSchema s;
  s.name = "conv";
  s.since = since;
  const char* wd = mixed ? "U" : "T";
  s.inputs = {in("x", dt::floats(), "T"),
              in("weight", dt::floats(), wd),
              in_opt("bias", dt::floats(), nullptr, /*is_const=*/!mixed, wd),
              in_opt_const("strides", dt::int32()),
              in_opt_const("pad_type", dt::string(), def_str("valid")),
              in_opt_const("pad", dt::int32()),
              in_opt_const("dilations", dt::int32()),
              in_opt_const("groups", dt::int32(), def_int(1))};
  s.defaults = [](InferCtx& ic) { return spatial_defaults(ic, true); };
  s.infer = conv_infer;
  return s;
}

OpSchema conv_transpose_schema(Target since, bool mixed) {
  OpSchema s;
  s.name = "conv_transpose";
  s.since = since;
  const char* wd = mixed ? "U" : "T";
  s.inputs = {in("x", dt::floats(), "T"),
              mixed ? in("weight", dt::floats(), wd) : in_const("weight", dt::floats(), wd),
              in_opt("bias", dt::floats(), nullptr, /*is_const=*/!mixed, wd),
              in_opt_const("pad", dt::int32()),
              in_opt_const("output_shape", dt::int32()),
              in_opt_const("pad_type", dt::string(), def_str("valid")),
              in_opt_const("strides", dt::int32()),
              in_opt_const("dilations", dt::int32()),
              in_opt_const("groups", dt::int32(), def_int(1))};
  s.defaults = [](InferCtx& ic) { return spatial_defaults(ic, true); };
  s.infer = conv_transpose_infer;
  return s;
}

}  // namespace

void register_conv_ops(OpRegistry& r) {
  r.add(conv_schema(Target::iOS13, false));
  r.add(conv_schema(Target::iOS17, true));
  r.add(conv_transpose_schema(Target::iOS13, false));
  r.add(conv_transpose_schema(Target::iOS17, true));

  // conv_quantized (iOS15 conv.py, experimental): a uint8 weight with a quantization scale and
  // bias; conv's inference. Inputs are ordered so that the defaults materialize in coremltools'
  // order (strides, pad_type, pad, dilations, groups, nbits).
  OpSchema q;
  q.name = "conv_quantized";
  q.inputs = {in("x", dt::floats(), "T"),
              in("weight", DTypeSet{DataType::UInt8}, "U"),
              in_opt("bias", DTypeSet{DataType::UInt8}, nullptr, /*is_const=*/true, "U"),
              in_const("quantization_type", dt::string()),
              in_const("quant_scale", dt::floats(), "T"),
              in_const("quant_bias", dt::floats(), "T"),
              in_opt_const("strides", dt::int32()),
              in_opt_const("pad_type", dt::string(), def_str("valid")),
              in_opt_const("pad", dt::int32()),
              in_opt_const("dilations", dt::int32()),
              in_opt_const("groups", dt::int32(), def_int(1)),
              in_opt_const("nbits", dt::int32(), def_int(8))};
  q.defaults = [](InferCtx& ic) { return spatial_defaults(ic, true); };
  q.infer = conv_infer;
  r.add(std::move(q));
}

}  // namespace milkit

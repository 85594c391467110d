// linear ops: linear, matmul, einsum (coremltools iOS15/linear.py, iOS17/linear.py).
//
// linear(x: T, weight: const U[D_out, D_in], bias: const U[D_out] = zeros) -> T[*D, D_out]
// matmul(x: T, y: U, transpose_x = False, transpose_y = False) -> numpy matmul semantics
// einsum(values: (T, T), equation: const string) -> the two supported batched equations
// Up to iOS16 U is T; from iOS17 weight/bias (linear) and y (matmul) may have another dtype.
// linear and matmul fold when every input is known.
#include <algorithm>
#include <map>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

namespace {

// Whether two dims cannot be equal: different known ints, or provably different expressions.
bool dims_differ(Context& ctx, Dim a, Dim b) {
  if (a->is_const() && b->is_const()) return a->value() != b->value();
  return ctx.eq(a, b) == Tri::False;
}

std::string dim_str(Dim d) { return d->str(); }

// Batched matrix product of concrete values with numpy's matmul semantics (rank-1 operands are
// promoted and the inserted dims dropped by the caller's out_shape). Integer inputs use exact
// integer math (wrapped to the output dtype), floats are computed in double and rounded.
Value matmul_values(const Value& x, const Value& y, bool tx, bool ty, DataType out,
                    const std::vector<int64_t>& out_shape) {
  std::vector<int64_t> xs = x.shape(), ys = y.shape();
  if (xs.size() == 1) xs = {1, xs[0]}, tx = false;
  if (ys.size() == 1) ys = {ys[0], 1}, ty = false;
  size_t xr = xs.size(), yr = ys.size();
  int64_t M = tx ? xs[xr - 1] : xs[xr - 2];
  int64_t K = tx ? xs[xr - 2] : xs[xr - 1];
  int64_t N = ty ? ys[yr - 2] : ys[yr - 1];
  std::vector<int64_t> xb(xs.begin(), xs.end() - 2), yb(ys.begin(), ys.end() - 2);
  std::vector<int64_t> ob = ops::broadcast_concrete(xb, yb);
  int64_t nb = shape_numel(ob);
  // batch offsets (in matrices) of x and y for each output batch index
  auto offsets = [&](const std::vector<int64_t>& b) {
    std::vector<int64_t> st = ops::strides_of(b), r(static_cast<size_t>(nb));
    size_t off = ob.size() - b.size();
    std::vector<int64_t> ctr(ob.size(), 0);
    for (int64_t k = 0; k < nb; ++k) {
      int64_t f = 0;
      for (size_t d = 0; d < b.size(); ++d)
        if (b[d] != 1) f += ctr[d + off] * st[d];
      r[k] = f;
      for (int d = static_cast<int>(ob.size()) - 1; d >= 0; --d) {
        if (++ctr[d] < ob[d]) break;
        ctr[d] = 0;
      }
    }
    return r;
  };
  std::vector<int64_t> xo = offsets(xb), yo = offsets(yb);
  bool int_math = !is_float(x.dtype()) && !is_float(y.dtype()) && !is_float(out);
  int64_t n = nb * M * N;
  std::vector<double> rd(int_math ? 0 : static_cast<size_t>(n));
  std::vector<int64_t> ri(int_math ? static_cast<size_t>(n) : 0);
  for (int64_t b = 0; b < nb; ++b) {
    int64_t xbase = xo[b] * M * K, ybase = yo[b] * K * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < N; ++j) {
        double ad = 0;
        uint64_t ai = 0;
        for (int64_t k = 0; k < K; ++k) {
          int64_t xi = xbase + (tx ? k * M + m : m * K + k);
          int64_t yi = ybase + (ty ? j * K + k : k * N + j);
          if (int_math) ai += static_cast<uint64_t>(x.as_int(xi)) * static_cast<uint64_t>(y.as_int(yi));
          else ad += x.as_double(xi) * y.as_double(yi);
        }
        int64_t o = (b * M + m) * N + j;
        if (int_math) ri[o] = static_cast<int64_t>(ai);
        else rd[o] = ad;
      }
  }
  if (int_math) return Value::from_ints(out, out_shape, ri);
  return Value::from_doubles(out, out_shape, rd);
}

bool is_const_op(const Var* v) { return v->op() && v->op()->op_type() == "const"; }

// ------------------------------------------------------------------------------------------
// linear

void add_linear(OpRegistry& r, Target since, const std::string& wdom) {
  OpSchema s;
  s.name = "linear";
  s.since = since;
  s.inputs = {in("x", dt::numeric(), "T"), in_const("weight", dt::numeric(), wdom),
              in_opt_const("bias", dt::numeric(), nullptr, wdom)};
  // coremltools: bias = zeros(weight.shape[0]) with weight's dtype
  s.defaults = [](InferCtx& ic) {
    std::vector<std::pair<std::string, Value>> d;
    if (ic.has("bias")) return d;  // (the zero bias is only made when it is used)
    const Type* tw = ic.type("weight");
    if (tw->has_rank() && tw->rank() >= 1 && tw->shape()[0]->is_const()) {
      int64_t n = tw->shape()[0]->value();
      d.emplace_back("bias", Value::from_ints(tw->dtype(), {n}, std::vector<int64_t>(n, 0)));
    }
    return d;
  };
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    const Type* tx = ic.type("x");
    const Type* tw = ic.type("weight");
    if (!tw->has_rank() || tw->rank() != 2)
      ic.fail_input("weight", "must have rank 2 ([D_out, D_in]), got shape " +
                                  (tw->has_rank() ? ops::shape_str(tw->shape()) : "of unknown rank"));
    const auto& ws = tw->shape();
    if (ic.has("bias")) {
      const Type* tb = ic.type("bias");
      if (!tb->has_rank() || tb->rank() != 1)
        ic.fail_input("bias", "must have rank 1 ([D_out]), got shape " +
                                  (tb->has_rank() ? ops::shape_str(tb->shape()) : "of unknown rank"));
      if (dims_differ(ic.ctx, tb->shape()[0], ws[0]))
        ic.fail_input("bias", "has size " + dim_str(tb->shape()[0]) +
                                  " but weight (shape " + ops::shape_str(ws) + ") has D_out = " +
                                  dim_str(ws[0]));
    }
    if (!tx->has_rank()) return {ic.ctx.tensor_unknown_rank(tx->dtype())};
    const auto& xs = tx->shape();
    if (xs.empty()) ic.fail_input("x", "must have rank >= 1, got a scalar");
    if (dims_differ(ic.ctx, xs.back(), ws[1]))
      ic.fail("the last dim of x (shape " + ops::shape_str(xs) + ") is " + dim_str(xs.back()) +
              " but the last dim of weight (shape " + ops::shape_str(ws) + ") is " +
              dim_str(ws[1]) + "; they must match");
    std::vector<Dim> out = xs;
    out.back() = ws[0];
    return {ic.ctx.tensor(tx->dtype(), out)};
  };
  s.value = [](InferCtx& ic, std::vector<std::shared_ptr<const Value>>& out) {
    if (!ic.known("x") || !ic.known("weight")) return false;
    if (ic.has("bias") && !ic.known("bias")) return false;
    const Value& x = *ic.val("x");
    const Value& w = *ic.val("weight");
    DataType dt = ic.type("x")->dtype();
    std::vector<int64_t> shape = x.shape();
    shape.back() = w.shape()[0];
    Value res = matmul_values(x, w, false, true, dt, shape);
    if (ic.has("bias")) res = ops::fold_binary(res, *ic.val("bias"), dt,
                                               [](double a, double b) { return a + b; },
                                               [](int64_t a, int64_t b) { return a + b; });
    out.push_back(ops::share(std::move(res)));
    return true;
  };
  r.add(std::move(s));
}

// ------------------------------------------------------------------------------------------
// matmul

void add_matmul(OpRegistry& r, Target since) {
  bool v17 = since >= Target::iOS17;
  OpSchema s;
  s.name = "matmul";
  s.since = since;
  s.inputs = {in("x", dt::numeric(), "T"), in("y", dt::numeric(), v17 ? "U" : "T"),
              in_opt_const("transpose_x", dt::boolean(), def_bool(false)),
              in_opt_const("transpose_y", dt::boolean(), def_bool(false))};
  // The output dtype: x's; from iOS17 x and y may differ when exactly one is a const op, and
  // the output takes the non-const one's dtype.
  auto out_dtype = [v17](const InferCtx& ic) {
    DataType dx = ic.type("x")->dtype(), dy = ic.type("y")->dtype();
    if (!v17) return dx;
    bool cx = is_const_op(ic.var("x")), cy = is_const_op(ic.var("y"));
    if (cx == cy && dx != dy)
      ic.fail(std::string("when x and y are both ") + (cx ? "const" : "non-const") +
              ", their dtypes must match, got x as " + std::string(dtype_name(dx)) + " and y as " +
              std::string(dtype_name(dy)));
    return cx != cy && cx ? dy : dx;
  };
  s.infer = [out_dtype](InferCtx& ic) -> std::vector<const Type*> {
    DataType odt = out_dtype(ic);
    const Type* tx = ic.type("x");
    const Type* ty = ic.type("y");
    bool trx = ic.bool_("transpose_x"), tr_y = ic.bool_("transpose_y");
    if (!tx->has_rank() || !ty->has_rank()) return {ic.ctx.tensor_unknown_rank(odt)};
    std::vector<Dim> xs = tx->shape(), ys = ty->shape();
    if (xs.empty()) ic.fail_input("x", "must have rank >= 1, got a scalar");
    if (ys.empty()) ic.fail_input("y", "must have rank >= 1, got a scalar");
    size_t xr = xs.size(), yr = ys.size();
    if (xr == 1 && trx) ic.fail("x is rank 1, but transpose_x is True, which is not allowed");
    if (yr == 1 && tr_y) ic.fail("y is rank 1, but transpose_y is True, which is not allowed");
    if (trx) std::swap(xs[xr - 1], xs[xr - 2]);
    if (tr_y) std::swap(ys[yr - 1], ys[yr - 2]);
    Dim one = ic.ctx.constant(1);
    if (xr == 1) xs.insert(xs.begin(), one);
    if (yr == 1) ys.push_back(one);
    Dim k1 = xs.back(), k2 = ys[ys.size() - 2];
    if (dims_differ(ic.ctx, k1, k2))
      ic.fail("x with shape " + ops::shape_str(tx->shape()) + (trx ? " (transposed)" : "") +
              " and y with shape " + ops::shape_str(ty->shape()) + (tr_y ? " (transposed)" : "") +
              " cannot be multiplied: the inner dims differ (x: " + dim_str(k1) + ", y: " +
              dim_str(k2) + ")");
    std::vector<Dim> xb(xs.begin(), xs.end() - 2), yb(ys.begin(), ys.end() - 2);
    std::vector<Dim> out = ops::broadcast_shapes(ic, xb, yb, "x (batch dims)", "y (batch dims)");
    if (xr != 1) out.push_back(xs[xs.size() - 2]);
    if (yr != 1) out.push_back(ys.back());
    return {ic.ctx.tensor(odt, out)};
  };
  s.value = [out_dtype](InferCtx& ic, std::vector<std::shared_ptr<const Value>>& out) {
    if (!ic.known("x") || !ic.known("y")) return false;
    const Value& x = *ic.val("x");
    const Value& y = *ic.val("y");
    bool trx = ic.bool_("transpose_x"), tr_y = ic.bool_("transpose_y");
    std::vector<int64_t> xs = x.shape(), ys = y.shape();
    size_t xr = xs.size(), yr = ys.size();
    if (xr >= 2 && trx) std::swap(xs[xr - 1], xs[xr - 2]);
    if (yr >= 2 && tr_y) std::swap(ys[yr - 1], ys[yr - 2]);
    if (xr == 1) xs.insert(xs.begin(), 1);
    if (yr == 1) ys.push_back(1);
    std::vector<int64_t> shape = ops::broadcast_concrete(
        std::vector<int64_t>(xs.begin(), xs.end() - 2), std::vector<int64_t>(ys.begin(), ys.end() - 2));
    if (xr != 1) shape.push_back(xs[xs.size() - 2]);
    if (yr != 1) shape.push_back(ys.back());
    out.push_back(ops::share(matmul_values(x, y, trx, tr_y, out_dtype(ic), shape)));
    return true;
  };
  r.add(std::move(s));
}

// ------------------------------------------------------------------------------------------
// einsum

// coremltools' parse_einsum_equation: each letter gets the next integer in order of first
// appearance over input 1, input 2, output.
bool parse_einsum(const std::string& eq, std::vector<std::vector<int>>& vecs) {
  size_t arrow = eq.find("->");
  if (arrow == std::string::npos || eq.find("->", arrow + 1) != std::string::npos) return false;
  std::string lhs = eq.substr(0, arrow), rhs = eq.substr(arrow + 2);
  std::vector<std::string> parts;
  size_t st = 0;
  for (size_t c; (c = lhs.find(',', st)) != std::string::npos; st = c + 1) parts.push_back(lhs.substr(st, c - st));
  parts.push_back(lhs.substr(st));
  parts.push_back(rhs);
  std::map<char, int> ids;
  for (auto& p : parts) {
    std::vector<int> v;
    for (char ch : p) {
      auto it = ids.find(ch);
      if (it == ids.end()) it = ids.emplace(ch, static_cast<int>(ids.size())).first;
      v.push_back(it->second);
    }
    vecs.push_back(v);
  }
  return vecs.size() == 3;
}

void add_einsum(OpRegistry& r) {
  OpSchema s;
  s.name = "einsum";
  InputDef values = in("values", DTypeSet::any());
  values.kind = InputKind::Tuple;
  s.inputs = {values, in_const("equation", dt::string())};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    VarSpan vs = ic.vars("values");
    if (vs.size() != 2)
      ic.fail_input("values", "must hold 2 tensors, got " + std::to_string(vs.size()));
    const Type* tx = vs[0]->type();
    const Type* ty = vs[1]->type();
    if (tx->dtype() != ty->dtype())
      ic.type_error("values", "must share one dtype, got " + std::string(dtype_name(tx->dtype())) +
                                  " and " + std::string(dtype_name(ty->dtype())));
    if (!tx->has_rank() || !ty->has_rank())
      ic.fail_input("values", "must have known ranks");
    const auto& xs = tx->shape();
    const auto& ys = ty->shape();
    int rank = static_cast<int>(xs.size());
    std::string shapes = " (shapes " + ops::shape_str(xs) + " and " + ops::shape_str(ys) + ")";
    if (xs.size() != ys.size()) ic.fail("the inputs must have the same rank" + shapes);
    if (rank != 3 && rank != 4) ic.fail("the inputs must have rank 3 or 4" + shapes);
    Dim k1 = xs[rank - 1], k2 = ys[rank - 3];
    if (k1->is_const() && k2->is_const() && k1 != k2)
      ic.fail("the contracted dims differ: x dim -1 is " + k1->str() + ", y dim -3 is " + k2->str() + shapes);
    // coremltools: dims -2 (and -4) must be equal unless one is 1 (structural equality)
    Dim one = ic.ctx.constant(1);
    auto bdim = [&](int d) {
      Dim a = xs[rank + d], b = ys[rank + d];
      if (a != one && b != one && a != b)
        ic.fail("dim " + std::to_string(d) + " differs: " + a->str() + " vs " + b->str() +
                " and neither is 1" + shapes);
      if (!a->is_const()) return a;
      if (!b->is_const()) return b;
      return a->value() >= b->value() ? a : b;
    };
    std::string eq = ic.str("equation");
    std::vector<std::vector<int>> v;
    bool ok = parse_einsum(eq, v);
    bool ok4 = ok && v[0] == std::vector<int>{0, 1, 2, 3} && v[1] == std::vector<int>{0, 3, 2, 4} &&
               v[2] == std::vector<int>{0, 1, 2, 4};
    bool ok3 = ok && v[0] == std::vector<int>{0, 1, 2} && v[1] == std::vector<int>{2, 1, 3} &&
               v[2] == std::vector<int>{0, 1, 3};
    if (!(ok4 && rank == 4) && !(ok3 && rank == 3))
      ic.fail_input("equation", "\"" + eq + "\" is not supported for rank " + std::to_string(rank) +
                                    " inputs; supported: \"nchw,nwhu->nchu\", \"chw,whr->chr\" and their renamings");
    std::vector<Dim> out(static_cast<size_t>(rank), one);
    out[rank - 1] = ys[rank - 1];
    out[rank - 3] = xs[rank - 3];
    out[rank - 2] = bdim(-2);
    if (rank == 4) out[0] = bdim(-4);
    return {ic.ctx.tensor(tx->dtype(), out)};
  };
  s.value = [](InferCtx& ic, std::vector<std::shared_ptr<const Value>>& out) {
    VarSpan vs = ic.vars("values");
    if (!vs[0]->has_value() || !vs[1]->has_value()) return false;
    const Value& x = *vs[0]->value();
    const Value& y = *vs[1]->value();
    // x [B, C, H, K], y [B, K, H, W] -> [B, C, H, W] with B and H broadcast (B = 1 for rank 3)
    std::vector<int64_t> xs = x.shape(), ys = y.shape();
    bool r3 = xs.size() == 3;
    if (r3) xs.insert(xs.begin(), 1), ys.insert(ys.begin(), 1);
    int64_t B = std::max(xs[0], ys[0]), C = xs[1], H = std::max(xs[2], ys[2]), K = xs[3], W = ys[3];
    bool int_math = !is_float(x.dtype());
    std::vector<double> rd;
    std::vector<int64_t> ri;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) {
            double ad = 0;
            uint64_t ai = 0;
            for (int64_t k = 0; k < K; ++k) {
              int64_t xi = (((xs[0] == 1 ? 0 : b) * C + c) * xs[2] + (xs[2] == 1 ? 0 : h)) * K + k;
              int64_t yi = (((ys[0] == 1 ? 0 : b) * K + k) * ys[2] + (ys[2] == 1 ? 0 : h)) * W + w;
              if (int_math) ai += static_cast<uint64_t>(x.as_int(xi)) * static_cast<uint64_t>(y.as_int(yi));
              else ad += x.as_double(xi) * y.as_double(yi);
            }
            if (int_math) ri.push_back(static_cast<int64_t>(ai));
            else rd.push_back(ad);
          }
    std::vector<int64_t> shape = {B, C, H, W};
    if (r3) shape.erase(shape.begin());
    if (int_math) out.push_back(ops::share(Value::from_ints(x.dtype(), shape, ri)));
    else out.push_back(ops::share(Value::from_doubles(x.dtype(), shape, rd)));
    return true;
  };
  r.add(std::move(s));
}

}  // namespace

void register_linear_ops(OpRegistry& r) {
  add_linear(r, Target::iOS13, "T");
  add_linear(r, Target::iOS17, "U");
  add_matmul(r, Target::iOS13);
  add_matmul(r, Target::iOS17);
  add_einsum(r);
}

}  // namespace milkit

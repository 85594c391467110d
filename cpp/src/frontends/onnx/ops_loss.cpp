// ONNX losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (weights, ignore_index,
// reductions none / sum / mean).
#include "converter.h"

namespace milkit {
namespace onnx_detail {

namespace {

using onnx::NodeProto;
using C = Converter;

Var* binary(C& cv, const char* type, Var* x, Var* y) { return cv.op(type, {C::a("x", x), C::a("y", y)}); }

// -input[n, target[n, ...], ...] * weight[target], reduced; input is (N, C, d...).
Var* nll(C& cv, const NodeProto& n, Var* input, Var* target, Var* weight) {
  std::string red = C::as(n, "reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean") cv.fail(n, "reduction '" + red + "' is not supported");
  DataType dt = C::dtype(input);
  target = cv.cast(target, DataType::Int32);
  Var* mask = nullptr;
  if (auto* ig = C::attr(n, "ignore_index")) {
    mask = binary(cv, "not_equal", target, cv.cs(static_cast<double>(ig->i()), DataType::Int32));
    target = cv.op("select", {C::a("cond", mask), C::a("a", target), C::a("b", cv.cs(0, DataType::Int32))});
  }
  Var* idx = cv.op("expand_dims", {C::a("x", target), C::aints32("axes", {1})});
  Var* picked = cv.op("gather_along_axis", {C::a("x", input), C::a("indices", idx), C::ai32("axis", 1)});
  picked = cv.op("squeeze", {C::a("x", picked), C::aints32("axes", {1})});
  Var* w = nullptr;
  if (weight) w = cv.op("gather", {C::a("x", weight), C::a("indices", target), C::ai32("axis", 0)});
  if (mask) {
    Var* mw = cv.cast(mask, dt);
    w = w ? binary(cv, "mul", w, mw) : mw;
  }
  Var* loss = binary(cv, "mul", picked, cv.cs(-1, dt));
  if (w) loss = binary(cv, "mul", loss, w);
  if (red == "none") return loss;
  Var* total = cv.op("reduce_sum", {C::a("x", loss), C::abool("keep_dims", false)});
  if (red == "sum") return total;
  if (!w) return cv.op("reduce_mean", {C::a("x", loss), C::abool("keep_dims", false)});
  return binary(cv, "real_div", total, cv.op("reduce_sum", {C::a("x", w), C::abool("keep_dims", false)}));
}

}  // namespace

void register_loss(OpTable& t) {
  t["NegativeLogLikelihoodLoss"] = [](C& cv, const NodeProto& n) {
    cv.out(n, 0, nll(cv, n, cv.in(n, 0), cv.in(n, 1), C::has(n, 2) ? cv.in(n, 2) : nullptr));
  };
  t["SoftmaxCrossEntropyLoss"] = [](C& cv, const NodeProto& n) {
    Var* x = cv.in(n, 0);
    Var* lse = cv.op("reduce_log_sum_exp", {C::a("x", x), C::aints32("axes", {1}), C::abool("keep_dims", true)});
    Var* logp = binary(cv, "sub", x, lse);
    cv.out(n, 0, nll(cv, n, logp, cv.in(n, 1), C::has(n, 2) ? cv.in(n, 2) : nullptr));
    cv.out(n, 1, logp);
  };
}

}  // namespace onnx_detail
}  // namespace milkit

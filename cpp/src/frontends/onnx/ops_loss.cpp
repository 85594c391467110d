// ONNX operators: losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// -input[n, target[n, ...], ...] * weight[target], reduced; input is (N, C, d...).
Var* nll(C& cv, const NodeProto& n, Var* input, Var* target, Var* weight) {
  std::string red = C::attr_string(n, "reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean")
    cv.fail(n, "reduction '" + red + "' is not supported");
  DataType dt = C::dtype(input);
  target = cv.cast(target, DataType::Int32);
  Var* mask = nullptr;
  if (C::has_attr(n, "ignore_index")) {
    auto ig = static_cast<double>(C::attr_int(n, "ignore_index", 0));
    mask = binary(cv, "not_equal", target, cv.cs(ig, DataType::Int32));
    target = cv.op("select", {C::arg("cond", mask), C::arg("a", target),
                              C::arg("b", cv.cs(0, DataType::Int32))});
  }
  Var* idx = cv.op("expand_dims", {C::arg("x", target), C::arg_ints32("axes", {1})});
  Var* picked = cv.op("gather_along_axis",
                      {C::arg("x", input), C::arg("indices", idx), C::arg_i32("axis", 1)});
  picked = cv.op("squeeze", {C::arg("x", picked), C::arg_ints32("axes", {1})});
  Var* w = nullptr;
  if (weight)
    w = cv.op("gather", {C::arg("x", weight), C::arg("indices", target), C::arg_i32("axis", 0)});
  if (mask) {
    Var* mw = cv.cast(mask, dt);
    w = w ? binary(cv, "mul", w, mw) : mw;
  }
  Var* loss = binary(cv, "mul", picked, cv.cs(-1, dt));
  if (w) loss = binary(cv, "mul", loss, w);
  if (red == "none") return loss;
  Var* total = cv.op("reduce_sum", {C::arg("x", loss), C::arg_bool("keep_dims", false)});
  if (red == "sum") return total;
  if (!w) return cv.op("reduce_mean", {C::arg("x", loss), C::arg_bool("keep_dims", false)});
  return binary(cv, "real_div", total,
                cv.op("reduce_sum", {C::arg("x", w), C::arg_bool("keep_dims", false)}));
}

void negative_log_likelihood_loss(C& cv, const NodeProto& n) {
  cv.out(n, 0, nll(cv, n, cv.in(n, 0), cv.in(n, 1), C::has(n, 2) ? cv.in(n, 2) : nullptr));
}

void softmax_cross_entropy_loss(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* lse = cv.op("reduce_log_sum_exp",
                   {C::arg("x", x), C::arg_ints32("axes", {1}), C::arg_bool("keep_dims", true)});
  Var* logp = binary(cv, "sub", x, lse);
  cv.out(n, 0, nll(cv, n, logp, cv.in(n, 1), C::has(n, 2) ? cv.in(n, 2) : nullptr));
  cv.out(n, 1, logp);
}

}  // namespace

void register_loss(OpTable& t) {
  t.on("NegativeLogLikelihoodLoss", 1, negative_log_likelihood_loss);
  t.on("SoftmaxCrossEntropyLoss", 1, softmax_cross_entropy_loss);
}

}  // namespace onnx_detail
}  // namespace milkit

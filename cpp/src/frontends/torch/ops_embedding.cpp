// ATen embeddings: embedding, embedding_bag.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// ---- embedding_bag ---------------------------------------------------------------------------
// embedding_bag / _embedding_bag / _embedding_bag_forward_only with 1-D indices and offsets
// (F.embedding_bag flattens 2-D input, with offsets 0, L, 2L, ...). Bag b holds the entries
// offsets[b] <= k < offsets[b + 1] (the last: to the end, or offsets[B] with
// include_last_offset, which torch documents as the number of indices); entries equal to
// padding_idx are skipped. sum: a [B, N] weight matrix
// (per_sample_weights) times the gathered rows; mean: divided by the bag's count; max: the
// masked max. Empty bags give 0. Only the first output (the bags) is produced.
void embedding_bag(C& cv, const json& n) {
  static const char* const names[] = {"", "offset2bag", "bag_size", "max_indices"};
  for (size_t k = 1; k < 4; ++k)
    if (output_used(cv, n, k))
      cv.fail(n, std::string("output ") + std::to_string(k) + " (" + names[k] + ") is used; only the first output (the bags) is supported");
  Var* w = cv.tensor(n, "weight");
  Var* idx = cv.cast(cv.tensor(n, "indices"), DataType::Int32);
  Var* off = cv.cast(cv.tensor(n, "offsets"), DataType::Int32);
  int64_t mode = cv.i(n, "mode", 0);
  Var* psw = cv.opt_tensor(n, "per_sample_weights");
  bool last = cv.bo(n, "include_last_offset", false);
  if (cv.rank(n, idx) != 1 || cv.rank(n, off) != 1) cv.fail(n, "indices and offsets must be 1-D");
  if (mode < 0 || mode > 2) cv.fail(n, "mode " + std::to_string(mode) + " is not sum (0), mean (1) or max (2)");
  if (psw && mode != 0) cv.fail(n, "per_sample_weights need mode 'sum'");
  // the padding_idx overload wraps a negative index (F.embedding_bag passes it wrapped);
  // _embedding_bag takes -1 (or any negative) for none
  int64_t pad = cv.opt_i(n, "padding_idx").value_or(-1);
  if (pad < 0 && C::has(n, "padding_idx") && n.value("target", std::string()).find(".padding_idx") != std::string::npos)
    pad += known_dim(cv, n, w, 0, "the number of embeddings");
  if (!is_float(C::dtype(w))) w = cv.cast(w, DataType::Float32);
  DataType dt = C::dtype(w);
  Var* rows = cv.op("gather", {C::a("x", w), C::a("indices", idx), C::ai32("axis", 0)});  // [N, D]
  Var* N = cv.dim_var(C::shape(idx)[0]);
  Var* k = cv.op("range_1d", {C::a("end", N), C::a("start", Value::scalar_int(DataType::Int32, 0)),
                              C::a("step", Value::scalar_int(DataType::Int32, 1))});
  auto sl = [&](int64_t b, bool bm, int64_t e, bool em) {
    return cv.op("slice_by_index", {C::a("x", off), C::aints32("begin", {b}), C::aints32("end", {e}),
                                    C::a("begin_mask", Value::from_ints(DataType::Bool, {1}, {bm ? 1 : 0})),
                                    C::a("end_mask", Value::from_ints(DataType::Bool, {1}, {em ? 1 : 0}))});
  };
  Var* start = last ? sl(0, true, -1, false) : off;
  Var* end = sl(1, false, 0, true);
  if (!last) {
    Var* nn = cv.op("expand_dims", {C::a("x", N), C::aints32("axes", {0})});
    end = cv.op("concat", {Arg{"values", {ArgItem{end, nullptr}, ArgItem{nn, nullptr}}, true}, C::ai32("axis", 0)});
  }
  auto col = [&](Var* v) { return cv.op("expand_dims", {C::a("x", v), C::aints32("axes", {1})}); };
  Var* mask = cv.op("logical_and", {C::a("x", bin(cv, "greater_equal", k, col(start))), C::a("y", bin(cv, "less", k, col(end)))});  // [B, N]
  if (pad >= 0) mask = cv.op("logical_and", {C::a("x", mask), C::a("y", bin(cv, "not_equal", idx, cv.cs(static_cast<double>(pad), DataType::Int32)))});
  Var* m = cv.cast(mask, dt);
  Var* cnt = reduce_op(cv, "reduce_sum", m, {1}, true);  // [B, 1]
  Var* y;
  if (mode == 2) {
    Var* big = cv.op("select", {C::a("cond", cv.op("expand_dims", {C::a("x", mask), C::aints32("axes", {2})})),
                                C::a("a", cv.op("expand_dims", {C::a("x", rows), C::aints32("axes", {0})})),
                                C::a("b", cv.cs(-std::numeric_limits<double>::infinity(), dt))});
    y = reduce_op(cv, "reduce_max", big, {1}, false);
    y = cv.op("select", {C::a("cond", bin(cv, "greater", cnt, cv.cs(0, dt))), C::a("a", y), C::a("b", cv.cs(0, dt))});
  } else {
    if (psw) m = bin(cv, "mul", m, cv.cast(psw, dt));
    y = matmul(cv, m, rows);
    if (mode == 1) y = bin(cv, "real_div", y, bin(cv, "maximum", cnt, cv.cs(1, dt)));
  }
  cv.out(n, y);
}

void embedding_op(C& cv, const json& n) {
  Var* w = cv.tensor(n, "weight");
  Var* idx = cv.cast(cv.tensor(n, "indices"), DataType::Int32);
  cv.out(n, cv.op("gather", {C::a("x", w), C::a("indices", idx), C::ai32("axis", 0)}));
}

}  // namespace

void register_embedding(OpTable& t) {
  t.on("aten.embedding", embedding_op);
  t.on("aten.embedding_bag", embedding_bag);
  t.on("aten._embedding_bag", embedding_bag);
  t.on("aten._embedding_bag_forward_only", embedding_bag);
}

}  // namespace torch_detail
}  // namespace milkit

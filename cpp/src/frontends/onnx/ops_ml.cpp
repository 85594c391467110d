// ONNX operators: the ai.onnx.ml domain (TreeEnsemble, Binarizer, ArrayFeatureExtractor).
#include <cmath>
#include <limits>

#include "milkit/compose/attention.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

Var* fconst_d(C& cv, double v) { return cv.cs(v, DataType::Float32); }

// Column i of a [S, N] tensor, as [S, 1].
Var* slice_cols(C& cv, Var* t, int64_t i) {
  return cv.op("gather",
               {C::arg("x", t), C::arg("indices", Value::int_list({i})), C::arg_i32("axis", 1)});
}

// ---- ai.onnx.ml --------------------------------------------------------------------------------

// A tensor attribute's values as doubles (empty when absent).
std::vector<double> tensor_attr(C& cv, const NodeProto& n, const char* name) {
  const onnx::TensorProto* t = C::attr_tensor(n, name);
  if (!t) return {};
  return decode_tensor(*t, cv.ext, cv.keep, std::string("attribute '") + name + "'").to_doubles();
}

// TreeEnsemble: every node's test computed for every sample at once ([S, nodes]); a leaf is
// reached when every test on its path (known here) goes its way; the leaves' weights go to their
// targets by a constant matrix, and the trees are aggregated.
void tree_ensemble(C& cv, const NodeProto& n) {
  Var* x = cv.cast(cv.in(n, 0), DataType::Float32);
  auto feat = C::attr_ints(n, "nodes_featureids"), tn = C::attr_ints(n, "nodes_truenodeids"),
       fn = C::attr_ints(n, "nodes_falsenodeids");
  auto tl = C::attr_ints(n, "nodes_trueleafs"), fl = C::attr_ints(n, "nodes_falseleafs"),
       roots = C::attr_ints(n, "tree_roots");
  auto miss =
      C::attr_ints(n, "nodes_missing_value_tracks_true", std::vector<int64_t>(feat.size(), 0));
  auto modes = tensor_attr(cv, n, "nodes_modes"), splits = tensor_attr(cv, n, "nodes_splits");
  auto members = tensor_attr(cv, n, "membership_values"),
       weights = tensor_attr(cv, n, "leaf_weights");
  auto targets = C::attr_ints(n, "leaf_targetids");
  int64_t nt = C::attr_int(n, "n_targets", 1), agg = C::attr_int(n, "aggregate_function", 1);
  size_t N = feat.size();
  if (tn.size() != N || fn.size() != N || tl.size() != N || fl.size() != N || modes.size() != N ||
      splits.size() != N || targets.size() != weights.size())
    cv.fail(n, "the node and leaf attributes must have matching lengths");
  if (C::attr_int(n, "post_transform", 0) != 0) cv.fail(n, "post_transform is not supported");
  DataType f32 = DataType::Float32;
  // each node's test: [S, 1] per node, concatenated to [S, N]
  std::vector<ArgItem> tests;
  size_t member_pos = 0;
  for (size_t i = 0; i < N; ++i) {
    Var* v = cv.op("gather", {C::arg("x", x), C::arg("indices", Value::int_list({feat[i]})),
                              C::arg_i32("axis", 1)});  // [S, 1]
    Var* sp = fconst_d(cv, splits[i]);
    Var* t;
    switch (static_cast<int>(modes[i])) {
      case 0:
        t = binary(cv, "less_equal", v, sp);
        break;
      case 1:
        t = binary(cv, "less", v, sp);
        break;
      case 2:
        t = binary(cv, "greater_equal", v, sp);
        break;
      case 3:
        t = binary(cv, "greater", v, sp);
        break;
      case 4:
        t = binary(cv, "equal", v, sp);
        break;
      case 5:
        t = binary(cv, "not_equal", v, sp);
        break;
      case 6: {
        std::vector<double> set;
        while (member_pos < members.size() && !std::isnan(members[member_pos]))
          set.push_back(members[member_pos++]);
        ++member_pos;       // the NaN closing the set
        if (set.empty()) {  // an empty set holds nothing: never true
          t = binary(cv, "less", v, fconst_d(cv, -std::numeric_limits<double>::infinity()));
          break;
        }
        Var* eq = binary(cv, "equal", v,
                         cv.c(Value::from_doubles(f32, {static_cast<int64_t>(set.size())}, set)));
        t = binary(cv, "greater",
                   cv.op("reduce_sum", {C::arg("x", cv.cast(eq, f32)), C::arg_ints32("axes", {1}),
                                        C::arg_bool("keep_dims", true)}),
                   fconst_d(cv, 0));
        break;
      }
      default:
        cv.fail(n, "node mode " + std::to_string(static_cast<int>(modes[i])) + " is not supported");
    }
    if (miss[i])
      t = binary(cv, "logical_or", t,
                 binary(cv, "not_equal", v, v));  // a missing (NaN) feature goes true
    tests.push_back(ArgItem{cv.cast(t, f32), nullptr});
  }
  Var* T = N == 1 ? tests[0].var
                  : cv.op("concat",
                          {Arg{"values", tests, true}, C::arg_i32("axis", 1)});  // [S, N] of 0 / 1
  // per tree: the leaves with their paths (node, went true)
  std::vector<Var*> per_tree;
  for (int64_t root : roots) {
    std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, bool>>>> leaves;
    std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, bool>>>> todo = {{root, {}}};
    while (!todo.empty()) {
      auto [node, path] = todo.back();
      todo.pop_back();
      if (node < 0 || static_cast<size_t>(node) >= N || path.size() > N)
        cv.fail(n, "a tree's node ids are out of range or cyclic");
      for (int br = 0; br < 2; ++br) {
        auto p = path;
        p.emplace_back(node, br == 0);
        int64_t next = br == 0 ? tn[static_cast<size_t>(node)] : fn[static_cast<size_t>(node)];
        bool leaf = br == 0 ? tl[static_cast<size_t>(node)] : fl[static_cast<size_t>(node)];
        if (leaf)
          leaves.emplace_back(next, p);
        else
          todo.emplace_back(next, p);
      }
    }
    // reached[s, leaf] = prod over the path of (test or 1 - test); [S, leaves] @ [leaves, targets]
    std::vector<ArgItem> reach;
    std::vector<double> w(leaves.size() * static_cast<size_t>(nt), 0.0);
    for (size_t l = 0; l < leaves.size(); ++l) {
      Var* r = nullptr;
      for (auto [node, tr] : leaves[l].second) {
        Var* c = slice_cols(cv, T, node);
        if (!tr) c = binary(cv, "sub", fconst_d(cv, 1), c);
        r = r ? binary(cv, "mul", r, c) : c;
      }
      reach.push_back(ArgItem{r, nullptr});
      int64_t leaf = leaves[l].first;
      if (leaf < 0 || static_cast<size_t>(leaf) >= weights.size())
        cv.fail(n, "a leaf id is out of range");
      int64_t tg = targets[static_cast<size_t>(leaf)];
      if (tg < 0 || tg >= nt) cv.fail(n, "a leaf's target id is out of range");
      w[l * static_cast<size_t>(nt) + static_cast<size_t>(tg)] +=
          weights[static_cast<size_t>(leaf)];
    }
    Var* R = reach.size() == 1
                 ? reach[0].var
                 : cv.op("concat", {Arg{"values", reach, true}, C::arg_i32("axis", 1)});
    per_tree.push_back(cv.op(
        "matmul",
        {C::arg("x", R), C::arg("y", cv.c(Value::from_doubles(
                                         f32, {static_cast<int64_t>(leaves.size()), nt}, w)))}));
  }
  if (per_tree.empty()) cv.fail(n, "tree_roots is empty");
  Var* y = per_tree[0];
  for (size_t i = 1; i < per_tree.size(); ++i)
    y = binary(cv, agg == 2 ? "minimum" : agg == 3 ? "maximum" : "add", y, per_tree[i]);
  if (agg == 0)
    y = binary(cv, "real_div", y, fconst_d(cv, static_cast<double>(per_tree.size())));
  else if (agg < 0 || agg > 3)
    cv.fail(n, "aggregate_function must be AVERAGE, SUM, MIN or MAX");
  cv.out(n, 0, cv.cast(y, C::dtype(cv.in(n, 0))));
}

void binarizer(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  DataType dt = C::dtype(x);
  Var* gt = binary(cv, "greater", x, cv.cs(C::attr_float(n, "threshold", 0.0f), dt));
  cv.out(
      n, 0,
      cv.op("select", {C::arg("cond", gt), C::arg("a", cv.cs(1, dt)), C::arg("b", cv.cs(0, dt))}));
}

void array_feature_extractor(C& cv, const NodeProto& n) {
  // x[..., indices] along the last axis
  Var* x = cv.in(n, 0);
  Var* idx = cv.op("reshape", {C::arg("x", cv.cast(cv.in(n, 1), DataType::Int32)),
                               C::arg_ints32("shape", {-1})});
  cv.out(n, 0, cv.op("gather", {C::arg("x", x), C::arg("indices", idx), C::arg_i32("axis", -1)}));
}

}  // namespace

void register_ml(OpTable& t) {
  t.on("ai.onnx.ml", "TreeEnsemble", 1, tree_ensemble);
  t.on("ai.onnx.ml", "Binarizer", 1, binarizer);
  t.on("ai.onnx.ml", "ArrayFeatureExtractor", 1, array_feature_extractor);
}

}  // namespace onnx_detail
}  // namespace milkit

// ONNX operators: text (TfIdfVectorizer).
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "milkit/compose/sampling.h"
#include "milkit/compose/scan.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// TfIdfVectorizer over integer tokens: each pool n-gram of length k counted at every start
// whose k tokens, skip_distance apart (1 .. max_skip_count + 1; unigrams once), match it.
void tfidf(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  auto xs = C::static_shape(x);
  if (!xs || xs->empty() || xs->size() > 2) cv.fail(n, "needs a 1-D or 2-D input of known shape");
  if (!C::has_attr(n, "pool_int64s"))
    cv.fail(n, "string pools are not supported (Core ML has no string tensors)");
  auto pool = C::attr_ints(n, "pool_int64s");
  auto counts = C::attr_ints(n, "ngram_counts");
  auto indexes = C::attr_ints(n, "ngram_indexes");
  auto weights = C::attr_floats(n, "weights");
  int64_t minl = C::attr_int(n, "min_gram_length", 1), maxl = C::attr_int(n, "max_gram_length", 1),
          skips = C::attr_int(n, "max_skip_count", 0);
  std::string mode = C::attr_string(n, "mode", "TF");
  int64_t out = 0;
  for (auto v : indexes) out = std::max(out, v + 1);
  int r = static_cast<int>(xs->size());
  int64_t L = xs->back();
  DataType f32 = DataType::Float32;
  Var* xf = cv.cast(x, f32);
  Var* y = nullptr;
  int64_t id = 0;  // n-gram number (into ngram_indexes)
  for (size_t lvl = 0; lvl < counts.size(); ++lvl) {
    int64_t k = static_cast<int64_t>(lvl) + 1;
    int64_t begin = counts[lvl],
            end = lvl + 1 < counts.size() ? counts[lvl + 1] : static_cast<int64_t>(pool.size());
    int64_t grams = (end - begin) / k;
    if (grams <= 0) continue;
    int64_t first_id = id;
    id += grams;
    if (k < minl || k > maxl) continue;
    // [grams, out]: where each n-gram's count goes
    std::vector<double> to(static_cast<size_t>(grams * out), 0.0);
    for (int64_t g = 0; g < grams; ++g) {
      if (first_id + g >= static_cast<int64_t>(indexes.size()))
        cv.fail(n, "ngram_indexes is shorter than the pool");
      to[static_cast<size_t>(g * out + indexes[static_cast<size_t>(first_id + g)])] = 1.0;
    }
    Var* tom = cv.c(Value::from_doubles(f32, {grams, out}, to));
    for (int64_t d = 1; d <= (k == 1 ? 1 : skips + 1); ++d) {
      int64_t span = d * (k - 1), len = L - span;
      if (len <= 0) break;
      Var* match = nullptr;
      for (int64_t j = 0; j < k; ++j) {
        std::vector<double> tok(static_cast<size_t>(grams));
        for (int64_t g = 0; g < grams; ++g)
          tok[static_cast<size_t>(g)] =
              static_cast<double>(pool[static_cast<size_t>(begin + g * k + j)]);
        Var* sl =
            cv.op("expand_dims", {C::arg("x", cv.em.slice_axis(xf, r - 1, d * j, d * j + len)),
                                  C::arg_ints32("axes", {-1})});
        Var* eq =
            cv.cast(binary(cv, "equal", sl, cv.c(Value::from_doubles(f32, {grams}, tok))), f32);
        match = match ? binary(cv, "mul", match, eq) : eq;
      }
      Var* c = cv.op("reduce_sum", {C::arg("x", match), C::arg_ints32("axes", {r - 1}),
                                    C::arg_bool("keep_dims", false)});  // [.., grams]
      Var* part = cv.op(
          "matmul",
          {C::arg("x",
                  r == 1 ? cv.op("expand_dims", {C::arg("x", c), C::arg_ints32("axes", {0})}) : c),
           C::arg("y", tom)});
      if (r == 1) part = cv.op("squeeze", {C::arg("x", part), C::arg_ints32("axes", {0})});
      y = y ? binary(cv, "add", y, part) : part;
    }
  }
  std::vector<int64_t> oshape =
      r == 1 ? std::vector<int64_t>{out} : std::vector<int64_t>{(*xs)[0], out};
  if (!y)
    y = cv.c(Value::from_doubles(
        f32, oshape, std::vector<double>(static_cast<size_t>(r == 1 ? out : (*xs)[0] * out), 0.0)));
  if (mode == "IDF" || mode == "TFIDF") {
    Var* w = weights.empty()
                 ? fconst(cv, 1)
                 : cv.c(Value::from_doubles(f32, {out},
                                            std::vector<double>(weights.begin(), weights.end())));
    if (mode == "IDF")
      y = binary(cv, "mul", cv.cast(binary(cv, "greater", y, fconst(cv, 0)), f32), w);
    else
      y = binary(cv, "mul", y, w);
  } else if (mode != "TF") {
    cv.fail(n, "mode must be TF, IDF or TFIDF");
  }
  cv.out(n, 0, y);
}

}  // namespace

void register_text(OpTable& t) { t.on("TfIdfVectorizer", 1, tfidf); }

}  // namespace onnx_detail
}  // namespace milkit

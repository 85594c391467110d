// Einsum: parsing, per-operand diagonals and reductions, pairwise contraction by matmul.
#include "milkit/compose/einsum.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

namespace milkit {
namespace compose {

namespace {

// Labels: letters as their codes + 256; the dims of an ellipsis as 0..E-1 (right-aligned).
using Labels = std::vector<int>;

struct Operand {
  Var* v;
  Labels l;
};

int64_t pos(const Labels& ls, int lab) { return std::find(ls.begin(), ls.end(), lab) - ls.begin(); }

bool has(const Labels& ls, int lab) { return std::find(ls.begin(), ls.end(), lab) != ls.end(); }

Var* transpose_to(Emitter& e, Var* v, const Labels& from, const Labels& to) {
  std::vector<int64_t> perm;
  bool id = true;
  for (int lab : to) {
    perm.push_back(pos(from, lab));
    id = id && perm.back() == static_cast<int64_t>(perm.size() - 1);
  }
  return id ? v : e.transpose(v, perm);
}

Var* reduce_sum(Emitter& e, Var* v, const std::vector<int64_t>& axes) {
  return e.op("reduce_sum", {Builder::arg("x", v), Builder::arg("axes", Value::int_list(axes)),
                             Builder::arg("keep_dims", Value::scalar_bool(false))});
}

// Sums out the labels of `o` not in `keep`.
void sum_out(Emitter& e, Operand& o, const std::set<int>& keep) {
  std::vector<int64_t> axes;
  Labels rest;
  for (size_t i = 0; i < o.l.size(); ++i) {
    if (keep.count(o.l[i]))
      rest.push_back(o.l[i]);
    else
      axes.push_back(static_cast<int64_t>(i));
  }
  if (axes.empty()) return;
  o.v = reduce_sum(e, o.v, axes);
  o.l = rest;
}

// The diagonal of each label repeated within one operand (x * eye summed over the second axis).
void diagonals(Emitter& e, Operand& o) {
  for (size_t a = 0; a < o.l.size(); ++a) {
    size_t b = static_cast<size_t>(
        std::find(o.l.begin() + static_cast<int64_t>(a) + 1, o.l.end(), o.l[a]) - o.l.begin());
    if (b == o.l.size()) continue;
    const auto& sh = o.v->type()->shape();
    if (!sh[a]->is_const() || sh[a] != sh[b])
      fail("a repeated subscript needs equal known sizes, got " + o.v->type()->str());
    const int64_t d = sh[a]->value();
    std::vector<int64_t> es(sh.size(), 1);
    es[a] = es[b] = d;
    std::vector<double> eye(static_cast<size_t>(d * d), 0.0);
    for (int64_t i = 0; i < d; ++i) eye[static_cast<size_t>(i * d + i)] = 1.0;
    Var* m = e.bin("mul", o.v, e.c(Value::from_doubles(Emitter::dtype(o.v), es, eye)));
    o.v = reduce_sum(e, m, {static_cast<int64_t>(b)});
    o.l.erase(o.l.begin() + static_cast<int64_t>(b));
    --a;
  }
}

// A shape made of groups of axes of vars, each group's sizes multiplied (an empty group is 1):
// a const when every size is known, else read at run time.
using Group = std::pair<Var*, std::vector<int64_t>>;
Var* shape_of(Emitter& e, const std::vector<Group>& groups) {
  std::vector<int64_t> known;
  bool all = true;
  for (auto& [v, axes] : groups) {
    int64_t p = 1;
    for (int64_t a : axes) {
      const Dim& d = v->type()->shape()[static_cast<size_t>(a)];
      all = all && d->is_const();
      if (d->is_const()) p *= d->value();
    }
    known.push_back(p);
  }
  if (all) return e.ci(known);
  std::vector<Var*> parts;
  for (auto& [v, axes] : groups) {
    if (axes.empty()) {
      parts.push_back(e.ci({1}));
      continue;
    }
    Var* g = e.op("gather", {Builder::arg("x", e.op("shape", {Builder::arg("x", v)})),
                             Builder::arg("indices", Value::int_list(axes)),
                             Builder::arg("axis", Value::scalar_int(DataType::Int32, 0))});
    parts.push_back(
        e.op("reduce_prod", {Builder::arg("x", g), Builder::arg("axes", Value::int_list({0})),
                             Builder::arg("keep_dims", Value::scalar_bool(true))}));
  }
  return e.concat(parts, 0);
}

Var* reshape_to(Emitter& e, Var* v, Var* shape) {
  return e.op("reshape", {Builder::arg("x", v), Builder::arg("shape", shape)});
}

// The operand placed at the positions of `outl` (transposed, then expanded where it lacks one).
Var* place(Emitter& e, const Operand& o, const Labels& outl) {
  Labels have;
  std::vector<int64_t> axes;
  for (size_t i = 0; i < outl.size(); ++i) {
    if (has(o.l, outl[i]))
      have.push_back(outl[i]);
    else
      axes.push_back(static_cast<int64_t>(i));
  }
  Var* v = transpose_to(e, o.v, o.l, have);
  return axes.empty() ? v : e.expand_dims(v, axes);
}

// Contracts two operands; `needed` are the labels used after them.
Operand contract(Emitter& e, Operand A, Operand B, const std::set<int>& needed) {
  std::set<int> keep_a = needed, keep_b = needed;
  keep_a.insert(B.l.begin(), B.l.end());
  keep_b.insert(A.l.begin(), A.l.end());
  sum_out(e, A, keep_a);
  sum_out(e, B, keep_b);
  Labels batch, aonly, bonly, con;
  for (int l : A.l) (has(B.l, l) ? (needed.count(l) ? batch : con) : aonly).push_back(l);
  for (int l : B.l)
    if (!has(A.l, l)) bonly.push_back(l);
  Labels outl = batch;
  outl.insert(outl.end(), aonly.begin(), aonly.end());
  outl.insert(outl.end(), bonly.begin(), bonly.end());
  if (con.empty()) return {e.bin("mul", place(e, A, outl), place(e, B, outl)), outl};
  // [batch..., M, K] x [batch..., K, N]
  Labels ta = batch, tb = batch;
  ta.insert(ta.end(), aonly.begin(), aonly.end());
  ta.insert(ta.end(), con.begin(), con.end());
  tb.insert(tb.end(), con.begin(), con.end());
  tb.insert(tb.end(), bonly.begin(), bonly.end());
  Var* a = transpose_to(e, A.v, A.l, ta);
  Var* b = transpose_to(e, B.v, B.l, tb);
  auto span = [](size_t from, size_t n) {
    std::vector<int64_t> r;
    for (size_t i = 0; i < n; ++i) r.push_back(static_cast<int64_t>(from + i));
    return r;
  };
  size_t nb = batch.size(), na = aonly.size(), nc = con.size(), nbo = bonly.size();
  std::vector<Group> ga, gb, go;
  for (size_t i = 0; i < nb; ++i) {
    ga.push_back({a, {static_cast<int64_t>(i)}});
    gb.push_back({b, {static_cast<int64_t>(i)}});
  }
  ga.push_back({a, span(nb, na)});
  ga.push_back({a, span(nb + na, nc)});
  gb.push_back({b, span(nb, nc)});
  gb.push_back({b, span(nb + nc, nbo)});
  // already [batch..., M, K] / [batch..., K, N] when each group is one dim
  Var* am = na == 1 && nc == 1 ? a : reshape_to(e, a, shape_of(e, ga));
  Var* bm = nc == 1 && nbo == 1 ? b : reshape_to(e, b, shape_of(e, gb));
  Var* y = e.op("matmul", {Builder::arg("x", am), Builder::arg("y", bm),
                           Builder::arg("transpose_x", Value::scalar_bool(false)),
                           Builder::arg("transpose_y", Value::scalar_bool(false))});
  // the batch dims as matmul broadcast them (a size-1 dim of one operand meets the other's)
  for (size_t i = 0; i < nb; ++i) go.push_back({y, {static_cast<int64_t>(i)}});
  for (int64_t i : span(nb, na)) go.push_back({a, {i}});
  for (int64_t i : span(nb + nc, nbo)) go.push_back({b, {i}});
  if (na != 1 || nbo != 1) y = reshape_to(e, y, shape_of(e, go));
  return {y, outl};
}

// The labels of one term; *ell tells whether it has an ellipsis (as label -1).
Labels letters(const std::string& t, const std::string& eq, bool* ell) {
  Labels r;
  *ell = false;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t.compare(i, 3, "...") == 0) {
      if (*ell) fail("more than one ellipsis in '" + t + "'");
      *ell = true;
      r.push_back(-1);
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(t[i]))) {
      r.push_back(static_cast<unsigned char>(t[i]) + 256);
    } else {
      fail("invalid subscript '" + std::string(1, t[i]) + "' in the equation '" + eq + "'");
    }
  }
  return r;
}

// The output labels: the explicit right-hand side, or the implicit one.
Labels output_labels(const std::string& eq, size_t arrow, int E, const std::map<int, int>& count) {
  Labels outl;
  if (arrow == std::string::npos) {
    for (int i = 0; i < E; ++i) outl.push_back(i);
    for (auto& [lab, c] : count)
      if (lab >= 256 && c == 1) outl.push_back(lab);
    return outl;
  }
  bool ell = false;
  for (int lab : letters(eq.substr(arrow + 2), eq, &ell)) {
    if (lab == -1) {
      for (int i = 0; i < E; ++i) outl.push_back(i);
      continue;
    }
    std::string c(1, static_cast<char>(lab - 256));
    if (!count.count(lab)) fail("output subscript '" + c + "' is not in any input");
    if (has(outl, lab)) fail("output subscript '" + c + "' appears more than once");
    outl.push_back(lab);
  }
  return outl;
}

}  // namespace

Var* einsum(Emitter& e, const std::string& equation, const std::vector<Var*>& operands) {
  std::string eq = equation;
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  auto arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t p = 0;;) {
    size_t q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  if (terms.size() != operands.size())
    fail("the equation '" + eq + "' has " + std::to_string(terms.size()) + " operands, " +
         std::to_string(operands.size()) + " tensors are given");
  int E = 0;
  std::vector<Labels> raw;
  for (size_t k = 0; k < operands.size(); ++k) {
    bool ell = false;
    raw.push_back(letters(terms[k], eq, &ell));
    int r = Emitter::rank(operands[k]);
    int named = static_cast<int>(raw[k].size()) - (ell ? 1 : 0);
    if ((ell && r < named) || (!ell && r != named))
      fail("operand " + std::to_string(k) + " has rank " + std::to_string(r) +
           ", the subscripts '" + terms[k] + "' need " + std::to_string(named));
    if (ell) E = std::max(E, r - named);
  }
  std::map<int, int> count;
  std::vector<Operand> os;
  for (size_t k = 0; k < operands.size(); ++k) {
    int r = Emitter::rank(operands[k]);
    Labels l;
    for (int lab : raw[k]) {
      if (lab != -1) {
        l.push_back(lab);
        continue;
      }
      int n = r - (static_cast<int>(raw[k].size()) - 1);
      for (int i = E - n; i < E; ++i) l.push_back(i);
    }
    for (int lab : l) ++count[lab];
    os.push_back({operands[k], l});
  }
  Labels outl = output_labels(eq, arrow, E, count);
  std::set<int> outs(outl.begin(), outl.end());
  for (auto& o : os) diagonals(e, o);
  Operand cur = os[0];
  for (size_t k = 1; k < os.size(); ++k) {
    std::set<int> needed = outs;
    for (size_t j = k + 1; j < os.size(); ++j) needed.insert(os[j].l.begin(), os[j].l.end());
    cur = contract(e, cur, os[k], needed);
  }
  sum_out(e, cur, outs);
  Var* y = transpose_to(e, cur.v, cur.l, outl);
  return y == operands[0] ? e.un("identity", y) : y;
}

}  // namespace compose
}  // namespace milkit

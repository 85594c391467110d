// Activation calibration: the function runs with the vars to observe as extra outputs (a group of
// them at a time), and each output's min / max is merged into its range.
#include "milkit/exec/calibrate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "milkit/exec/plan.h"

namespace milkit::calibration {

namespace {

bool valid_dtype(const Var* v) {
  const Type* t = v->type();
  if (!t || !t->is_tensor()) return false;
  const DataType d = t->dtype();
  return d == DataType::Float16 || d == DataType::Float32 || d == DataType::Float64 ||
         d == DataType::Int32;
}

/// Top-level ops of the body that a body output depends on, in program order.
std::vector<const Operation*> reachable_ops(const Function& fn) {
  const Block& body = fn.body();
  std::unordered_set<const Operation*> seen;
  std::vector<const Operation*> stack;
  auto visit = [&](const Var* v) {
    const Operation* op = v->op();
    if (op && op->parent() == &body && seen.insert(op).second) stack.push_back(op);
  };
  for (const Var* v : body.outputs()) visit(v);
  while (!stack.empty()) {
    const Operation* op = stack.back();
    stack.pop_back();
    for (const Var* in : op->args()) visit(in);
  }
  std::vector<const Operation*> r;
  for (const Operation* op : body.ops())
    if (seen.count(op)) r.push_back(op);
  return r;
}

std::unordered_set<std::string> output_names(const Function& fn) {
  std::unordered_set<std::string> r;
  for (const Var* v : fn.body().outputs()) r.insert(v->name());
  return r;
}

/// min / max of a tensor's elements (NaN when one is NaN); false for an empty or non-numeric one.
bool tensor_range(const Tensor& t, Range& r) {
  if (t.is_dict() || t.numel() == 0 || t.dtype() == DataType::String) return false;
  double lo = INFINITY, hi = -INFINITY;
  bool nan = false;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get(i);
    if (std::isnan(v)) {
      nan = true;
      break;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  r = nan ? Range{NAN, NAN} : Range{lo, hi};
  return true;
}

void merge(std::map<std::string, Range>& stats, const std::string& name, const Tensor& t) {
  Range r;
  if (!tensor_range(t, r)) return;
  auto [it, fresh] = stats.emplace(name, r);
  if (fresh) return;
  Range& s = it->second;
  s.min = std::isnan(s.min) || std::isnan(r.min) ? NAN : std::min(s.min, r.min);
  s.max = std::isnan(s.max) || std::isnan(r.max) ? NAN : std::max(s.max, r.max);
}

/// Restores a body's outputs when it goes out of scope.
class OutputsGuard {
 public:
  explicit OutputsGuard(Block& b) : b_(b), saved_(b.outputs()) {}
  ~OutputsGuard() { b_.set_outputs(saved_); }
  OutputsGuard(const OutputsGuard&) = delete;
  OutputsGuard& operator=(const OutputsGuard&) = delete;
  const std::vector<Var*>& saved() const { return saved_; }

 private:
  Block& b_;
  std::vector<Var*> saved_;
};

// Union-find over names.
struct Groups {
  std::unordered_map<std::string, std::string> parent;
  std::string find(const std::string& s) {
    auto it = parent.find(s);
    if (it == parent.end()) return parent[s] = s;
    if (it->second == s) return s;
    std::string root = find(it->second);
    parent[s] = root;
    return root;
  }
  void unite(const std::string& a, const std::string& b) {
    std::string ra = find(a), rb = find(b);
    if (ra != rb) parent[rb] = ra;
  }
};

}  // namespace

std::vector<Var*> calibrated_vars(const Function& fn) {
  const auto outs = output_names(fn);
  std::vector<Var*> r;
  for (const Operation* op : reachable_ops(fn)) {
    if (op->op_type() == "const") continue;
    for (Var* v : op->outputs())
      if (!outs.count(v->name()) && valid_dtype(v)) r.push_back(v);
  }
  return r;
}

std::vector<std::vector<std::string>> concat_groups(const Function& fn) {
  const auto outs = output_names(fn);
  Groups g;
  std::vector<std::string> order;
  for (const Operation* op : reachable_ops(fn)) {
    if (op->op_type() != "concat" || outs.count(op->output(0)->name())) continue;
    const std::string& out = op->output(0)->name();
    if (!g.parent.count(out)) order.push_back(out);
    g.find(out);
    for (const Var* v : op->input("values")) {
      if (!g.parent.count(v->name())) order.push_back(v->name());
      g.unite(out, v->name());
    }
  }
  std::map<std::string, std::vector<std::string>> by_root;
  std::vector<std::string> roots;
  for (const std::string& n : order) {
    const std::string root = g.find(n);
    if (!by_root.count(root)) roots.push_back(root);
    by_root[root].push_back(n);
  }
  std::vector<std::vector<std::string>> r;
  for (const std::string& root : roots) r.push_back(by_root[root]);
  return r;
}

std::map<std::string, Range> calibrate(const std::shared_ptr<Function>& fn,
                                       const std::vector<std::map<std::string, Tensor>>& samples,
                                       int64_t group_size) {
  std::map<std::string, Range> stats, extra;
  for (const auto& sample : samples)
    for (const auto& [name, t] : sample) merge(stats, name, t);
  const std::vector<Var*> vars = calibrated_vars(*fn);
  std::unordered_set<std::string> computed;  // function outputs an op computes
  for (const Var* v : fn->body().outputs())
    if (v->op() && v->op()->op_type() != "const" && valid_dtype(v)) computed.insert(v->name());
  const size_t n = vars.size();
  const size_t step = group_size > 0 ? static_cast<size_t>(group_size) : std::max<size_t>(n, 1);
  for (size_t start = 0; start < std::max<size_t>(n, 1); start += step) {
    OutputsGuard guard(fn->body());
    std::vector<Var*> outs = guard.saved();
    outs.insert(outs.end(), vars.begin() + static_cast<std::ptrdiff_t>(std::min(start, n)),
                vars.begin() + static_cast<std::ptrdiff_t>(std::min(start + step, n)));
    fn->body().set_outputs(outs);
    Plan plan(std::const_pointer_cast<const Function>(fn));
    for (const auto& sample : samples)
      for (const auto& [name, t] : plan.run(sample))
        merge(computed.count(name) ? extra : stats, name, t);
  }
  for (const auto& group : concat_groups(*fn)) {
    Range r{INFINITY, -INFINITY};
    bool any = false;
    for (const std::string& name : group) {
      auto it = stats.find(name);
      if (it == stats.end()) continue;
      any = true;
      r.min = std::min(r.min, it->second.min);
      r.max = std::max(r.max, it->second.max);
    }
    if (!any) continue;
    for (const std::string& name : group)
      if (auto it = stats.find(name); it != stats.end()) it->second = r;
  }
  for (const auto& [name, r] : extra) stats.emplace(name, r);
  return stats;
}

}  // namespace milkit::calibration

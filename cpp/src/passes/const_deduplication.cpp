// common::const_deduplication: merges const ops of one block that hold the same tensor, as
// coremltools does. A const takes part when it has at least `const_threshold` elements (option,
// default 100) and is not a string. Candidates share dtype, shape and the bytes of their first 100
// elements (coremltools' hash key); they are then equal when every element is within a per-dtype
// absolute tolerance (np.allclose, rtol 0: fp16 6e-8, anything else 1e-12). The first const in
// block order survives (with its name); later duplicates are replaced by it and removed, except a
// duplicate that is an output of the block. Nested blocks are handled first, each on its own.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "milkit/passes/const_sharing.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"
#include "milkit/types/datatype.h"

namespace milkit {

namespace {

constexpr int64_t kHashElems = 100;

// Element i of a float dtype's bytes as a double (nullopt for dtypes read another way).
bool float_at(DataType dt, const uint8_t* p, size_t i, double* out) {
  uint16_t h;
  switch (dt) {
    case DataType::Float16:
      std::memcpy(&h, p + 2 * i, 2);
      *out = half_to_float(h);
      return true;
    case DataType::BFloat16:
      std::memcpy(&h, p + 2 * i, 2);
      *out = bf16_to_float(h);
      return true;
    case DataType::Float32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      *out = f;
      return true;
    }
    case DataType::Float64:
      std::memcpy(out, p + 8 * i, 8);
      return true;
    default:
      return false;
  }
}

bool close(double x, double y, double atol) {
  if (std::isnan(x) || std::isnan(y)) return false;
  if (std::isinf(x) || std::isinf(y)) return x == y;
  return std::fabs(x - y) <= atol;
}

// np.allclose(a, b, rtol=0, atol) of two values of one dtype and shape, read in chunks from their
// buffers: a lazily converted weight (fp16 of an fp32 or bf16 checkpoint) is never materialized.
bool all_close(const Value& a, const Value& b, double atol) {
  const size_t elem = static_cast<size_t>(dtype_storage_bytes(a.dtype()));
  const size_t n = static_cast<size_t>(a.numel());
  const size_t per = std::max<size_t>(1, (size_t{1} << 20) / elem);
  std::vector<uint8_t> x(std::min(per, n) * elem), y(x.size());
  for (size_t first = 0; first < n; first += per) {
    size_t m = std::min(per, n - first);
    a.buffer()->read(first * elem, m * elem, x.data());
    b.buffer()->read(first * elem, m * elem, y.data());
    double u = 0, v = 0;
    if (!is_float(a.dtype()) || !float_at(a.dtype(), x.data(), 0, &u)) {
      // integers, bools and fp8: element by element as the value reads them
      for (size_t i = first; i < first + m; ++i)
        if (!close(a.as_double(static_cast<int64_t>(i)), b.as_double(static_cast<int64_t>(i)),
                   atol))
          return false;
      continue;
    }
    for (size_t i = 0; i < m; ++i) {
      float_at(a.dtype(), x.data(), i, &u);
      float_at(a.dtype(), y.data(), i, &v);
      if (!close(u, v, atol)) return false;
    }
  }
  return true;
}

class ConstDeduplication : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::const_deduplication", {"const_threshold"});
    bool changed = false;
    threshold_ = pass_util::int_option(opts, "common::const_deduplication", "const_threshold", 100);
    for (auto& [name, f] : p.functions()) changed = dedup_block(f->body()) || changed;
    return changed;
  }

 private:
  // Returns whether it removed a const.
  bool dedup_block(Block& blk) {
    bool changed = false;
    for (Operation* op : blk.ops())
      for (Block* nb : op->blocks()) changed = dedup_block(*nb) || changed;

    using Key = std::tuple<DataType, std::vector<int64_t>, std::string>;
    std::map<Key, std::vector<Var*>> buckets;
    std::vector<std::pair<Var*, std::vector<Var*>>> groups;  // unique -> duplicates, in order
    std::map<Var*, size_t> group_of;
    static const uint16_t kConst = op_type_id("const");
    for (Operation* op = blk.front(); op; op = op->next()) {
      if (op->type_id() != kConst) continue;
      Var* v = op->output(0);
      if (!v->type()->is_tensor() || !v->has_value()) continue;
      const Value& val = *v->value();
      if (val.dtype() == DataType::String || val.numel() < threshold_) continue;
      size_t nb = static_cast<size_t>(std::min(val.numel(), kHashElems)) *
                  static_cast<size_t>(dtype_storage_bytes(val.dtype()));
      // read the prefix without materializing lazily converted weights
      std::string prefix(nb, '\0');
      val.buffer()->read(0, nb, reinterpret_cast<uint8_t*>(prefix.data()));
      Key key{val.dtype(), val.shape(), std::move(prefix)};
      double atol = val.dtype() == DataType::Float16 ? 6e-8 : 1e-12;
      auto& cands = buckets[key];
      Var* found = nullptr;
      for (Var* c : cands)
        if (all_close(val, *c->value(), atol)) {
          found = c;
          break;
        }
      if (found) {
        groups[group_of[found]].second.push_back(v);
      } else {
        cands.push_back(v);
        group_of[v] = groups.size();
        groups.push_back({v, {}});
      }
    }

    std::vector<const Var*> outs(blk.outputs().begin(), blk.outputs().end());
    for (auto& [unique, dups] : groups) {
      for (Var* d : dups) {
        if (std::find(outs.begin(), outs.end(), d) != outs.end()) continue;
        pass_util::replace_var(d, unique);
        blk.erase(d->op());
        changed = true;
      }
    }
    return changed;
  }

  int64_t threshold_ = 100;
};

// Whether two values of one dtype and shape hold the same bytes, read in chunks from their
// buffers (mapped weights are paged in, never copied whole).
bool same_bytes(const Value& a, const Value& b) {
  if (a.buffer() == b.buffer()) return true;
  const size_t elem = static_cast<size_t>(dtype_storage_bytes(a.dtype()));
  const size_t total = static_cast<size_t>(a.numel()) * elem;
  const size_t chunk = std::max<size_t>(elem, (size_t{1} << 20) / elem * elem);
  std::vector<uint8_t> x(std::min(chunk, total)), y(x.size());
  for (size_t off = 0; off < total; off += chunk) {
    size_t n = std::min(chunk, total - off);
    a.buffer()->read(off, n, x.data());
    b.buffer()->read(off, n, y.data());
    if (std::memcmp(x.data(), y.data(), n) != 0) return false;
  }
  return true;
}

// coremltools' equality of duplicate candidates: np.allclose(rtol=0) with a per-dtype atol.
bool equal_consts(const Value& a, const Value& b) {
  if (same_bytes(a, b)) return true;
  if (!is_float(a.dtype())) return false;
  return all_close(a, b, a.dtype() == DataType::Float16 ? 6e-8 : 1e-12);
}

}  // namespace

std::vector<std::vector<SharedConst>> share_consts_across_functions(Program& program) {
  using Key = std::tuple<DataType, std::vector<int64_t>, std::string>;
  struct Member {
    const std::string* function;
    Var* var;
  };
  std::map<Key, std::vector<size_t>> buckets;  // key -> indexes of groups
  std::vector<std::vector<Member>> groups;     // first member: the one whose value is kept
  static const uint16_t kConst = op_type_id("const");
  for (auto& [name, f] : program.functions()) {
    for (Operation* op = f->body().front(); op; op = op->next()) {
      if (op->type_id() != kConst) continue;
      Var* v = op->output(0);
      if (!v->type()->is_tensor() || !v->has_value()) continue;
      const Value& val = *v->value();
      if (val.dtype() == DataType::String || val.numel() < 1) continue;
      size_t nb = static_cast<size_t>(std::min(val.numel(), kHashElems)) *
                  static_cast<size_t>(dtype_storage_bytes(val.dtype()));
      std::string prefix(nb, '\0');
      val.buffer()->read(0, nb, reinterpret_cast<uint8_t*>(prefix.data()));
      auto& cands = buckets[Key{val.dtype(), val.shape(), std::move(prefix)}];
      bool found = false;
      for (size_t g : cands) {
        if (!equal_consts(val, *groups[g].front().var->value())) continue;
        groups[g].push_back({&name, v});
        found = true;
        break;
      }
      if (!found) {
        cands.push_back(groups.size());
        groups.push_back({{&name, v}});
      }
    }
  }
  std::vector<std::vector<SharedConst>> out;
  for (auto& g : groups) {
    if (g.size() < 2) continue;
    std::vector<SharedConst> members;
    for (const Member& m : g) {
      if (m.var != g.front().var) m.var->set_value(g.front().var->value());
      members.push_back({*m.function, m.var->op()->name()});
    }
    out.push_back(std::move(members));
  }
  return out;
}

/// Registers common::const_deduplication.
void register_const_deduplication(PassRegistry& r) {
  r.add(
      "common::const_deduplication", [] { return std::make_unique<ConstDeduplication>(); },
      PassTraits{/*skip_rerun_when_unchanged=*/true});
}

}  // namespace milkit

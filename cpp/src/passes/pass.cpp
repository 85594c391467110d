#include "milkit/passes/pass.h"

#include <algorithm>
#include <unordered_set>

#include "milkit/builder/builder.h"

#include <cctype>
#include <cstring>
#include <cstdlib>

#include "milkit/ir/verify.h"
#include "milkit/types/error.h"

namespace milkit {

const PassRegistry& PassRegistry::instance() {
  static const PassRegistry* reg = [] {
    auto* r = new PassRegistry();
    register_all_passes(*r);
    return r;
  }();
  return *reg;
}

void PassRegistry::add(const std::string& name, PassFactory f) { passes_[name] = std::move(f); }

std::unique_ptr<Pass> PassRegistry::create(const std::string& name) const {
  auto it = passes_.find(name);
  if (it == passes_.end()) throw ValueError("unknown graph pass '" + name + "'");
  return it->second();
}

std::vector<std::string> PassRegistry::names() const {
  std::vector<std::string> r;
  for (auto& [n, f] : passes_) r.push_back(n);
  return r;
}

void PassManager::add(const std::string& name, PassOptions options) {
  passes_.emplace_back(name, std::move(options));
}

namespace {

// Passes that are deterministic functions of the IR and, when a run changes nothing, use up no
// names either: such a pass, run again on functions whose IR no change has touched since a run
// that changed nothing (Function::epoch), would change nothing again, so it is not run. Only with
// default options.
bool rerun_skippable(const std::string& name, const PassOptions& opts) {
  static const std::unordered_set<std::string> kPasses = {
      "common::const_elimination",   "common::dead_code_elimination", "common::cast_optimization",
      "common::noop_elimination",    "common::const_deduplication",   "common::dedup_op_and_var_names",
      "common::remove_redundant_ops"};
  return opts.empty() && kPasses.count(name);
}

}  // namespace

std::vector<std::string> PassManager::run(Program& p, bool verify_each, bool skip_unknown) const {
  const PassRegistry& reg = PassRegistry::instance();
  std::vector<std::string> skipped;
  for (auto& [name, opts] : passes_) {
    if (!reg.has(name)) {
      if (!skip_unknown) throw ValueError("unknown graph pass '" + name + "'");
      skipped.push_back(name);
      continue;
    }
    const bool skippable = rerun_skippable(name, opts) && !p.functions().empty();
    std::vector<uint64_t> before;
    if (skippable) {
      bool clean = true;
      for (auto& [fname, f] : p.functions()) {
        clean = clean && f->is_clean(name, &p);
        before.push_back(f->epoch());
      }
      if (clean) continue;
    }
    reg.create(name)->run(p, opts);
    if (skippable) {
      bool unchanged = true;
      size_t i = 0;
      for (auto& [fname, f] : p.functions()) unchanged = unchanged && i < before.size() && f->epoch() == before[i++];
      if (unchanged && i == before.size())
        for (auto& [fname, f] : p.functions()) f->mark_clean(name, &p);
    }
    if (verify_each)
      for (auto& [fname, f] : p.functions()) verify(*f, fname);
  }
  return skipped;
}

namespace pass_util {

void for_each_block(Function& f, const std::function<void(Block&)>& fn) {
  if (!f.has_block_ops()) {  // the body is the only block: no walk over its ops
    fn(f.body());
    return;
  }
  std::function<void(Block&)> rec = [&](Block& b) {
    for (Operation* op : b.ops())
      for (Block* nb : op->blocks()) rec(*nb);
    fn(b);
  };
  rec(f.body());
}

namespace {
bool sweep(Builder& b, Block& blk, const std::function<bool(Builder&, Block&, Operation*)>& step) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks())
      while (sweep(b, *nb, step)) {
      }
    if (!op->blocks().empty()) continue;
    if (step(b, blk, op)) changed = true;
  }
  return changed;
}
}  // namespace

void rewrite_ops(Function& f, const std::function<bool(Builder&, Block&, Operation*)>& step) {
  Builder b(f);
  while (sweep(b, f.body(), step)) {
  }
}

std::vector<Arg> inputs_except(const Operation& op, std::initializer_list<std::string_view> skip) {
  std::vector<Arg> args;
  for (size_t i = 0; i < op.num_inputs(); ++i) {
    const std::string& n = op.schema().inputs[i].name;
    if (op.input(i).empty() || std::find(skip.begin(), skip.end(), n) != skip.end()) continue;
    Arg a;
    a.name = n;
    for (Var* v : op.input(i)) a.items.push_back(ArgItem{v, nullptr});
    a.is_sequence = op.schema().inputs[i].kind == InputKind::Tuple;
    args.push_back(std::move(a));
  }
  return args;
}

void fuse_unary_chains(Function& f, const std::function<Operation*(Operation*)>& match,
                       const std::string& op_type) {
  rewrite_ops(f, [&](Builder& b, Block& blk, Operation* op) {
    Operation* second = match(op);
    if (!second) return false;
    b.set_insertion_point(&blk, op);
    b.set_location(op->location());
    Var* fused_out = b.op(op_type, {{"x", op->input1("x")}}, second->output(0)->name());
    replace_var(second->output(0), fused_out);
    second->parent()->erase(second);
    blk.erase(op);
    return true;
  });
}

bool has_side_effects(const Operation& op) {
  static const uint16_t kUpdate = op_type_id("coreml_update_state");
  static const uint16_t kWrite = op_type_id("write_state");
  return op.type_id() == kUpdate || op.type_id() == kWrite;
}

bool is_function_output(const Var* v) {
  for (const Block* b : v->block_uses())
    if (!b->parent_op()) return true;
  return false;
}

bool is_function_input(const Var* v) { return v->input_of() && !v->input_of()->parent_op(); }

void replace_var(Var* old_var, Var* new_var) {
  if (old_var == new_var) return;
  bool out = is_function_output(old_var);
  if (out && is_function_input(new_var) && new_var->name() != old_var->name())
    throw ValueError("cannot rename function input '" + new_var->name() + "' to '" +
                     old_var->name() + "'");
  old_var->replace_all_uses_with(new_var);
  if (out) new_var->set_name(old_var->name());
}

NameSet::NameSet() : slots_(64) {}

void NameSet::reserve(size_t n) {
  while (slots_.size() < 2 * n) grow();
  names_.reserve(n);
}

size_t NameSet::find(std::string_view s, uint32_t h) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& sl = slots_[i];
    if (!sl.index) return i;
    if (sl.hash == h) {
      std::string_view n = names_[sl.index - 1];
      if (n.size() == s.size() && std::memcmp(n.data(), s.data(), s.size()) == 0) return i;
    }
  }
}

void NameSet::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot& sl : old) {
    if (!sl.index) continue;
    size_t i = sl.hash & mask;
    while (slots_[i].index) i = (i + 1) & mask;
    slots_[i] = sl;
  }
}

bool NameSet::add(std::string_view s, bool copy) {
  const uint32_t h = static_cast<uint32_t>(std::hash<std::string_view>()(s));
  size_t i = find(s, h);
  if (slots_[i].index) return false;
  if (copy) {
    if (chunk_used_ + s.size() + 1 > chunk_cap_) {
      chunk_cap_ = std::max<size_t>(s.size() + 1, 64 * 1024);
      chunks_.emplace_back(new char[chunk_cap_]);
      chunk_used_ = 0;
    }
    char* d = chunks_.back().get() + chunk_used_;
    if (!s.empty()) std::memcpy(d, s.data(), s.size());
    d[s.size()] = '\0';
    chunk_used_ += s.size() + 1;
    s = std::string_view(d, s.size());
  }
  names_.push_back(s);
  slots_[i] = Slot{h, static_cast<uint32_t>(names_.size())};
  if (names_.size() * 2 > slots_.size()) grow();
  return true;
}

bool NameSet::insert(std::string_view s) { return add(s, true); }

bool NameSet::insert_view(std::string_view s) { return add(s, false); }

bool NameSet::contains(std::string_view s) const {
  const uint32_t h = static_cast<uint32_t>(std::hash<std::string_view>()(s));
  return slots_[find(s, h)].index != 0;
}

namespace {

// [A-Za-z0-9_]
struct IdentChars {
  bool t[256] = {};
  IdentChars() {
    for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
    for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
    for (int c = '0'; c <= '9'; ++c) t[c] = true;
    t[static_cast<unsigned char>('_')] = true;
  }
};

bool is_reserved_mil_word(std::string_view n) {
  static const std::unordered_set<std::string_view> reserved = {
      "any",   "bool",  "program", "func",  "tensor", "list",   "dict",   "tuple",
      "true",  "false", "string",  "bf16",  "fp16",   "fp32",   "fp64",   "int8",
      "int16", "int32", "int64",   "uint8", "uint16", "uint32", "uint64", "state"};
  return n.size() <= 7 && reserved.count(n);
}

// Whether NameSanitizer keeps `name` as it is: [A-Za-z_][A-Za-z0-9_]* (or empty), not reserved.
bool kept_as_is(const std::string& name) {
  static const IdentChars ident;
  for (unsigned char c : name)
    if (!ident.t[c]) return false;
  if (!name.empty() && name[0] >= '0' && name[0] <= '9') return false;
  return !is_reserved_mil_word(name);
}

}  // namespace

bool NameSanitizer::sanitize_changed(const std::string& name, std::string& out, bool name_stays) {
  if (kept_as_is(name)) {
    if (name_stays)
      seen_.insert_view(name);
    else
      seen_.insert(name);
    return false;
  }
  std::string n;
  n.reserve(name.size());
  for (unsigned char c : name) {
    if ((c & 0xC0) == 0x80) continue;  // UTF-8 continuation byte: part of the previous code point
    n.push_back((std::isalnum(c) && c < 0x80) || c == '_' ? static_cast<char>(c) : '_');
  }
  if (!n.empty() && !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_')) n = prefix_ + n;
  if (is_reserved_mil_word(n)) n += "_workaround";
  if (n == name) {
    if (name_stays)
      seen_.insert_view(name);
    else
      seen_.insert(name);
    return false;
  }
  if (seen_.contains(n)) {
    int idx = 0;
    n += "_" + std::to_string(idx);
    while (seen_.contains(n)) {
      ++idx;
      n += "_" + std::to_string(idx);
    }
  }
  seen_.insert(n);
  out = std::move(n);
  return true;
}

std::string NameSanitizer::sanitize(const std::string& name) {
  std::string out;
  return sanitize_changed(name, out) ? out : name;
}

int64_t int_option(const PassOptions& opts, const std::string& pass, const std::string& name,
                   int64_t dflt) {
  auto it = opts.find(name);
  if (it == opts.end()) return dflt;
  const std::string& s = it->second;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0')
    throw ValueError(pass + ": option '" + name + "' must be an int, got '" + s + "'");
  return v;
}

void check_options(const PassOptions& opts, const std::string& pass,
                   const std::vector<std::string>& known) {
  for (auto& [k, v] : opts) {
    bool ok = false;
    for (auto& n : known) ok = ok || n == k;
    if (!ok) throw ValueError(pass + ": unknown option '" + k + "'");
  }
}

}  // namespace pass_util

}  // namespace milkit

// milkit/passes/pass.h - graph passes, their registry and the pass manager.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/ir/ir.h"

namespace milkit {

/// String options of a pass (coremltools' PassPipeline.set_options values).
using PassOptions = std::map<std::string, std::string>;

/// A program rewrite, registered under coremltools' name ("common::const_elimination").
class Pass {
 public:
  virtual ~Pass() = default;
  /// Rewrites the program in place.
  virtual void run(Program& p, const PassOptions& options) = 0;
};

/// Creates a fresh pass instance.
using PassFactory = std::function<std::unique_ptr<Pass>()>;

/// Every pass milkit implements, by name.
class PassRegistry {
 public:
  /// The process-wide registry (built once).
  static const PassRegistry& instance();
  /// Registers a pass.
  void add(const std::string& name, PassFactory f);
  /// Whether a pass with that name exists.
  bool has(const std::string& name) const { return passes_.count(name) != 0; }
  /// A new instance; throws ValueError for unknown names.
  std::unique_ptr<Pass> create(const std::string& name) const;
  /// Names of all passes, sorted.
  std::vector<std::string> names() const;

 private:
  std::map<std::string, PassFactory> passes_;
};

/// Runs passes in order; optionally verifies the program after each. A few cleanup passes
/// (const_elimination, dead_code_elimination, cast_optimization, noop_elimination,
/// const_deduplication, dedup_op_and_var_names, remove_redundant_ops; default options) are not run
/// again on a program whose functions no change has touched since such a pass last ran on it and
/// changed nothing (Function::epoch): the run would change nothing again.
class PassManager {
 public:
  /// Appends a pass with options.
  void add(const std::string& name, PassOptions options = {});
  /// Runs every pass; returns the names that were skipped because milkit lacks them when
  /// `skip_unknown` is true (else unknown names throw).
  std::vector<std::string> run(Program& p, bool verify_each = false, bool skip_unknown = false) const;

 private:
  std::vector<std::pair<std::string, PassOptions>> passes_;
};

/// Registers all passes (called by PassRegistry::instance()).
void register_all_passes(PassRegistry& r);

/// Helpers shared by passes.
namespace pass_util {
/// Applies `fn` to every block of a function, innermost blocks first.
void for_each_block(Function& f, const std::function<void(Block&)>& fn);
/// Whether an op must be kept even when its outputs are unused (state writes).
bool has_side_effects(const Operation& op);
/// The driver of most rewrites: sweeps every block (an op's nested blocks first, each to a fixed
/// point), calling `step` on each live op that has no nested blocks; repeats the sweep of the
/// function body until no `step` call reports a change.
void rewrite_ops(Function& f, const std::function<bool(Builder&, Block&, Operation*)>& step);
/// The op's present inputs as builder arguments, except the named ones (for rebuilding an op with
/// some inputs replaced).
std::vector<Arg> inputs_except(const Operation& op, std::initializer_list<std::string_view> skip);
/// Replaces every two-op chain that `match` finds (it maps a first op to the second op of the
/// chain, or nullptr) with one new `op_type` op on the first op's input `x`, taking the second
/// op's output name and uses; repeats until nothing matches, nested blocks included.
void fuse_unary_chains(Function& f, const std::function<Operation*(Operation*)>& match,
                       const std::string& op_type);
/// Whether `v` is an output of a function body.
bool is_function_output(const Var* v);
/// Whether `v` is an input of a function.
bool is_function_input(const Var* v);
/// coremltools' Block.replace_uses_of_var_after_op(anchor_op=old_var.op, ...): every use of
/// `old_var` (ops and block outputs) reads `new_var` instead, and when `old_var` is an output of a
/// function body `new_var` takes its name (ValueError if `new_var` is a function input with
/// another name).
void replace_var(Var* old_var, Var* new_var);
/// A set of names for passes that see every name of a function: open addressing over 8-byte
/// slots (hash, index of the name), names kept as views of their own copies in large chunks (no
/// allocation per name), or of the caller's strings (insert_view).
class NameSet {
 public:
  NameSet();
  NameSet(const NameSet&) = delete;
  NameSet& operator=(const NameSet&) = delete;
  /// Room for about `n` names without rehashing.
  void reserve(size_t n);
  /// Adds a copy of `s`; false when it was already there.
  bool insert(std::string_view s);
  /// Adds `s` itself, whose characters must stay put while the set lives (an IR object's name
  /// that nothing renames meanwhile); false when it was already there.
  bool insert_view(std::string_view s);
  /// Whether `s` is in the set.
  bool contains(std::string_view s) const;

 private:
  struct Slot {
    uint32_t hash = 0;
    uint32_t index = 0;  // 1 + position in names_; 0: empty
  };
  size_t find(std::string_view s, uint32_t h) const;
  bool add(std::string_view s, bool copy);
  void grow();
  std::vector<Slot> slots_;
  std::vector<std::string_view> names_;
  std::vector<std::unique_ptr<char[]>> chunks_;
  size_t chunk_used_ = 0, chunk_cap_ = 0;
};

/// coremltools' NameSanitizer: makes names match [A-Za-z_][A-Za-z0-9_]*, unique among the names
/// it has seen.
class NameSanitizer {
 public:
  /// `prefix` goes in front of names that do not start with a letter or '_'.
  explicit NameSanitizer(std::string prefix) : prefix_(std::move(prefix)) {}
  /// Every character (UTF-8 code point) outside [A-Za-z0-9_] becomes '_', the prefix is added when
  /// needed, reserved MIL words get "_workaround"; a changed name that was seen before gets
  /// "_0", "_0_1", "_0_1_2", ... (coremltools' accumulating suffix) until unique.
  std::string sanitize(const std::string& name);
  /// sanitize() without copying a name that stays: returns false when `name` is kept, else true
  /// with the new name in `out`. With `name_stays`, a kept name is remembered as a view of
  /// `name` (which must then stay put while the sanitizer lives).
  bool sanitize_changed(const std::string& name, std::string& out, bool name_stays = false);
  /// Room for about `n` names.
  void reserve(size_t n) { seen_.reserve(n); }

 private:
  std::string prefix_;
  NameSet seen_;
};
/// An integer option, or `dflt` when absent; ValueError naming the pass when malformed.
int64_t int_option(const PassOptions& opts, const std::string& pass, const std::string& name,
                   int64_t dflt);
/// A ValueError for an option the pass does not know.
void check_options(const PassOptions& opts, const std::string& pass,
                   const std::vector<std::string>& known);
}  // namespace pass_util

}  // namespace milkit

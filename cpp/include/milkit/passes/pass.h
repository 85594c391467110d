// milkit/passes/pass.h - graph passes, their registry and the pass manager.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "milkit/ir/ir.h"

namespace milkit {

/// String options of a pass (coremltools' PassPipeline.set_options values).
using PassOptions = std::map<std::string, std::string>;

/// A program rewrite, registered under coremltools' name ("common::const_elimination").
class Pass {
 public:
  virtual ~Pass() = default;
  /// Rewrites the program in place. Returns true when it changed the program, false when it left
  /// it as it was (the printed program is the same before and after).
  virtual bool run(Program& p, const PassOptions& options) = 0;
};

/// Creates a fresh pass instance.
using PassFactory = std::function<std::unique_ptr<Pass>()>;

/// What a pass declares about itself when it registers.
struct PassTraits {
  /// The pass is a deterministic function of the IR and, when a run changes nothing, uses up no
  /// names either: run again (with default options) on functions that no change has touched since
  /// a run that changed nothing, it would change nothing again, so PassManager does not run it.
  bool skip_rerun_when_unchanged = false;
};

/// Every pass milkit implements, by name.
class PassRegistry {
 public:
  /// The process-wide registry (built once).
  static const PassRegistry& instance();
  /// Registers a pass with what it declares about itself.
  void add(const std::string& name, PassFactory f, PassTraits traits = {});
  /// Whether a pass with that name exists.
  bool has(const std::string& name) const { return passes_.count(name) != 0; }
  /// A new instance; throws ValueError for unknown names.
  std::unique_ptr<Pass> create(const std::string& name) const;
  /// What the pass declared at registration; throws ValueError for unknown names.
  const PassTraits& traits(const std::string& name) const;
  /// Names of all passes, sorted.
  std::vector<std::string> names() const;

 private:
  struct Entry {
    PassFactory factory;
    PassTraits traits;
  };
  const Entry& entry(const std::string& name) const;
  std::map<std::string, Entry> passes_;
};

/// Runs passes in order; optionally verifies the program after each. A pass registered with
/// PassTraits::skip_rerun_when_unchanged (and given no options) is not run again on a program
/// whose functions no change has touched (Function::epoch) since such a pass last ran on it and
/// reported no change: the run would change nothing again.
class PassManager {
 public:
  /// Appends a pass with options.
  void add(const std::string& name, PassOptions options = {});
  /// Runs every pass; returns the names that were skipped because milkit lacks them when
  /// `skip_unknown` is true (else unknown names throw). When `changed` is given, the names of the
  /// passes that reported a change are appended to it, in run order.
  std::vector<std::string> run(Program& p, bool verify_each = false, bool skip_unknown = false,
                               std::vector<std::string>* changed = nullptr) const;

 private:
  std::vector<std::pair<std::string, PassOptions>> passes_;
};

/// Registers all passes (called by PassRegistry::instance()).
void register_all_passes(PassRegistry& r);

/// Helpers shared by passes.
namespace pass_util {
/// An integer option, or `dflt` when absent; ValueError naming the pass when malformed.
int64_t int_option(const PassOptions& opts, const std::string& pass, const std::string& name,
                   int64_t dflt);
/// A ValueError for an option the pass does not know.
void check_options(const PassOptions& opts, const std::string& pass,
                   const std::vector<std::string>& known);
}  // namespace pass_util

}  // namespace milkit

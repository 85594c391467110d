// milkit/ops/registry.h - op schemas as data, and the registry of every MIL op.
#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "milkit/ir/ir.h"

namespace milkit {

/// A set of data types, as a bit mask over the DataType codes.
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  /// The set of the listed types.
  DTypeSet(std::initializer_list<DataType> ts) {
    for (DataType t : ts) bits_ |= bit(t);
  }
  /// Every data type.
  static DTypeSet any() {
    DTypeSet s;
    s.bits_ = ~uint64_t{0};
    return s;
  }
  /// Whether `t` is in the set.
  bool contains(DataType t) const { return bits_ & bit(t); }
  /// Union.
  DTypeSet operator|(DTypeSet o) const {
    DTypeSet s;
    s.bits_ = bits_ | o.bits_;
    return s;
  }
  /// Whether empty.
  bool empty() const { return bits_ == 0; }
  /// "fp16, fp32" for messages.
  std::string str() const;

 private:
  static uint64_t bit(DataType t) { return uint64_t{1} << (static_cast<int>(t) % 64); }
  uint64_t bits_ = 0;
};

/// What an input accepts.
enum class InputKind : uint8_t {
  Tensor,        ///< A tensor or scalar var.
  Tuple,         ///< A list of tensor vars (variadic), e.g. concat's values.
  List,          ///< A MIL list var.
  ListOrTensor,  ///< A list, tensor or dict var.
  State,         ///< A state var.
  Any,           ///< Anything (internal use).
};

/// The declaration of one op input.
struct InputDef {
  std::string name;           ///< Input name.
  InputKind kind = InputKind::Tensor;  ///< What it accepts.
  DTypeSet dtypes = DTypeSet::any();   ///< Allowed element types.
  std::string domain;         ///< Shared type-domain id ("T"): all inputs with it share a dtype.
  bool is_const = false;      ///< Must be known at compile time.
  bool optional = false;      ///< May be left out.
  bool any_kind = false;      ///< Tuple elements may be of any type (while_loop's loop_vars).
  /// A fixed default materialized as a const when left out (nullptr: none, or computed by
  /// OpSchema::defaults).
  std::shared_ptr<const Value> default_value;
};

class InferCtx;

/// Computes the output types. Throw through InferCtx::fail on bad input.
using InferFn = std::function<std::vector<const Type*>(InferCtx&)>;
/// Computes output values when possible (constant folding); returns false when it cannot.
using ValueFn = std::function<bool(InferCtx&, std::vector<std::shared_ptr<const Value>>&)>;
/// Computes defaults of optional inputs that depend on other inputs: returns (name, value)
/// pairs; a missing entry leaves the input absent.
using DefaultsFn = std::function<std::vector<std::pair<std::string, Value>>(InferCtx&)>;
/// Extra validation of inputs beyond the schema (runs before inference).
using CheckFn = std::function<void(InferCtx&)>;

/// A registered op at one opset version.
struct OpSchema {
  std::string name;                       ///< Op type.
  Target since = Target::iOS13;           ///< First opset of this version.
  std::vector<InputDef> inputs;           ///< Inputs in order.
  std::vector<std::string> output_names;  ///< Output name suffixes; empty: "0", "1", ...
  int num_outputs = 1;                    ///< Fixed output count (-1: decided by inference).
  DefaultsFn defaults;                    ///< Dependent defaults (optional).
  InferFn infer;                          ///< Type inference.
  ValueFn value;                          ///< Value inference (optional).
  bool is_constexpr = false;              ///< constexpr_* op: const-like, never folded.
  int num_blocks = 0;                     ///< Nested blocks a control-flow op has (cond: 2).
  /// The dialect of a dialect op ("complex"), empty for core MIL ops. Dialect ops exist at every
  /// opset like coremltools' namespaced registrations; a pass lowers them to core ops, and
  /// neither the writer nor the interpreter accepts them.
  std::string dialect;
  /// Dense id of the op type, shared by every version of the op (set by OpRegistry::add; indexes
  /// Function's per-type op counts).
  uint16_t type_id = 0;
  /// Index of an input by name, -1 if unknown.
  int input_index(std::string_view n) const;
  /// "x, y, alpha" for messages.
  std::string input_names() const;
};

/// The context handed to inference functions: the op's inputs, the type context and error
/// helpers that name the op.
class InferCtx {
 public:
  /// Builds a context over flat args (see Operation).
  InferCtx(Context& ctx, const OpSchema& schema, const std::string& op_name, Target opset,
           const std::vector<Var*>& args, const std::vector<uint32_t>& starts,
           const Location* loc = nullptr)
      : ctx(ctx), schema(schema), op_name(op_name), opset(opset), args_(args), starts_(starts),
        loc_(loc) {}
  Context& ctx;              ///< Types and dims.
  const OpSchema& schema;    ///< The op's schema.
  const std::string& op_name;  ///< The op's name.
  Target opset;              ///< The opset being built.
  /// The op's nested blocks (control-flow ops; built before their type inference runs).
  const std::vector<Block*>* blocks = nullptr;

  /// Whether the named input is present.
  bool has(std::string_view name) const { return !vars(name).empty(); }
  /// The single var of a named input; throws if absent.
  Var* var(std::string_view name) const;
  /// The vars of a named input (tuple inputs).
  VarSpan vars(std::string_view name) const;
  /// Type of the named input.
  const Type* type(std::string_view name) const { return var(name)->type(); }
  /// The value of the named input (may be symbolic), or nullptr.
  const Value* val(std::string_view name) const;
  /// Whether the input is present and fully known.
  bool known(std::string_view name) const;
  /// The input's known value as integers; fails if unknown.
  std::vector<int64_t> ints(std::string_view name) const;
  /// A known integer scalar.
  int64_t int_(std::string_view name) const;
  /// A known float scalar.
  double float_(std::string_view name) const;
  /// A known bool scalar.
  bool bool_(std::string_view name) const;
  /// A known string scalar.
  std::string str(std::string_view name) const;
  /// The input's value as dims (symbolic or known); nullopt when neither.
  std::optional<std::vector<Dim>> dims(std::string_view name) const;
  /// Throws ValueError naming the op.
  [[noreturn]] void fail(const std::string& msg) const;
  /// Throws ValueError naming the op and the input.
  [[noreturn]] void fail_input(std::string_view input, const std::string& msg) const;
  /// Throws TypeError naming the op and the input.
  [[noreturn]] void type_error(std::string_view input, const std::string& msg) const;
  /// The prefix used by error messages: "add 'add_0'" plus the location.
  std::string where() const;
  /// Normalizes an axis into [0, rank); fails with a message naming `input`.
  int64_t axis(std::string_view input, int64_t axis, int64_t rank) const;

 private:
  const std::vector<Var*>& args_;
  const std::vector<uint32_t>& starts_;
  const Location* loc_;
};

/// The registry of op schemas, by name and opset.
class OpRegistry {
 public:
  /// The process-wide registry of MIL ops (immutable once built).
  static const OpRegistry& instance();
  /// Registers a schema version; versions of one op must be added oldest first.
  void add(OpSchema schema);
  /// The version of `name` in effect at `opset`, or nullptr.
  const OpSchema* find(std::string_view name, Target opset) const;
  /// Whether the op exists at any opset.
  bool exists(std::string_view name) const;
  /// The first opset where the op exists.
  std::optional<Target> introduced(std::string_view name) const;
  /// Core op names available at `opset`, sorted (dialect ops are not listed).
  std::vector<std::string> names(Target opset) const;
  /// Names of the dialect ops, sorted.
  std::vector<std::string> dialect_names() const;
  /// Every version of an op.
  std::vector<const OpSchema*> versions(std::string_view name) const;
  /// The type id of an op name (OpSchema::type_id), -1 when no op has that name.
  int type_id(std::string_view name) const;
  /// Number of distinct op types (type ids are 0 .. num_types() - 1).
  size_t num_types() const { return ops_.size(); }

 private:
  using Versions = std::vector<std::unique_ptr<OpSchema>>;
  const Versions* lookup(std::string_view name) const;
  std::map<std::string, Versions, std::less<>> ops_;
  std::unordered_map<std::string_view, const Versions*> index_;  // keys view ops_' keys
};

/// The type id (OpSchema::type_id) of a registered op name; throws for unknown names. Cheap
/// enough to call once and cache: `static const uint16_t kAdd = op_type_id("add");`.
uint16_t op_type_id(std::string_view name);

/// Helpers shared by op definitions.
namespace dt {
/// fp16 and fp32.
DTypeSet floats();
/// fp16, fp32, int32.
DTypeSet numeric();
/// fp16, fp32, int32, bool.
DTypeSet numeric_bool();
/// int32 only.
DTypeSet int32();
/// bool only.
DTypeSet boolean();
/// string only.
DTypeSet string();
}  // namespace dt

/// Builder-style helpers for declaring inputs.
InputDef in(std::string name, DTypeSet dtypes, std::string domain = "");
/// A const-only input.
InputDef in_const(std::string name, DTypeSet dtypes, std::string domain = "");
/// An optional input with an optional fixed default.
InputDef in_opt(std::string name, DTypeSet dtypes, std::shared_ptr<const Value> def = nullptr,
                bool is_const = false, std::string domain = "");
/// An optional const input with a fixed default.
InputDef in_opt_const(std::string name, DTypeSet dtypes, std::shared_ptr<const Value> def = nullptr,
                      std::string domain = "");
/// Shared default values.
std::shared_ptr<const Value> def_int(int64_t v);
/// A float default (fp32).
std::shared_ptr<const Value> def_float(double v);
/// A bool default.
std::shared_ptr<const Value> def_bool(bool v);
/// A string default.
std::shared_ptr<const Value> def_str(std::string v);
/// An int32 list default.
std::shared_ptr<const Value> def_ints(std::vector<int64_t> v);

}  // namespace milkit

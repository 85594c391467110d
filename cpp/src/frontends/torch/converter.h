// The torch.export importer's internals: the conversion context handed to each operator's
// converter (argument access by schema name, torch dtypes and type promotion, SymInts as milkit
// dims), and the operator table. Only the files of frontends/torch include this.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/compose/emitter.h"
#include "milkit/frontends/torch.h"
#include "milkit/ir/value.h"

namespace milkit {
namespace torch_detail {

using json = nlohmann::json;

/// The MIL dtype a torch ScalarType (schema.py numbering) computes in: ints -> int32,
/// fp64/bf16 -> fp32, fp16, bool; nullopt for types Core ML cannot hold (complex, fp8, ...).
std::optional<DataType> mil_dtype(int scalar_type);
/// The milkit dtype a torch ScalarType is stored in (int64 and bf16 kept), nullopt if none.
std::optional<DataType> storage_dtype(int scalar_type);
/// torch's name of a ScalarType ("torch.float32").
std::string scalar_type_name(int scalar_type);
/// A value narrowed to what MIL computes in: int64/int16/uint8... -> int32 (range-checked:
/// ValueError naming `what`), fp64/bf16 -> fp32. Bool, int32, fp16, fp32 unchanged.
Value narrow(const Value& v, const std::string& what);
/// Parses a sympy srepr expression ("Mul(Integer(2), Symbol('s0', positive=True))") into a dim of
/// `ctx`; torch's symbols become named milkit symbols. Throws FormatError on unknown grammar.
Dim parse_sym_expr(const std::string& s, SymbolContext& ctx);

class Converter;
/// Converts one node: reads its arguments through `cv`, builds ops, binds its outputs.
using ConvertFn = std::function<void(Converter& cv, const json& node)>;
/// Operator key ("aten.add.Tensor", or "aten.add" for every overload) -> converter.
class OpTable {
 public:
  /// Registers `fn` for the operator `key`; a key registered twice is a logic error.
  void on(const std::string& key, ConvertFn fn);
  /// Registers `fn` for each of `keys` (aliases sharing one converter).
  void on(std::initializer_list<const char*> keys, const ConvertFn& fn);
  /// Registers the named function `fn` for the operator `key`.
  void on(const std::string& key, void (*fn)(Converter&, const json&)) { on(key, ConvertFn(fn)); }
  /// Registers the named function `fn` for each of `keys`.
  void on(std::initializer_list<const char*> keys, void (*fn)(Converter&, const json&)) { on(keys, ConvertFn(fn)); }
  /// The converter registered for `key`, or nullptr.
  const ConvertFn* find(const std::string& key) const;
  /// The registered keys and converters.
  std::unordered_map<std::string, ConvertFn>::const_iterator begin() const { return fns_.begin(); }
  /// End of the registered keys and converters.
  std::unordered_map<std::string, ConvertFn>::const_iterator end() const { return fns_.end(); }

 private:
  std::unordered_map<std::string, ConvertFn> fns_;
};
/// "torch.ops.aten.add_.Tensor" -> ("aten.add_", "Tensor"); a target outside aten
/// ("_operator.getitem") whole, with no overload.
std::pair<std::string, std::string> split_target(const std::string& target);
/// The functional packet of an in-place one ("aten.add_" -> "aten.add"); "" when `packet` is not
/// in-place (dunder names such as aten.__and__ are not).
std::string functional_of(const std::string& packet);
/// The table, filled once by the register_* functions of the family files.
const OpTable& op_table();
/// The converter for a node target ("torch.ops.aten.add_.Tensor"), or nullptr. In-place
/// targets (`add_`) resolve to their functional form; `inplace` tells which.
const ConvertFn* find_op(const std::string& target, bool* inplace = nullptr);

/// Registers the elementwise operators.
void register_elementwise(OpTable& t);
/// Registers the math operators.
void register_math(OpTable& t);
/// Registers the activation operators.
void register_activation(OpTable& t);
/// Registers the logical operators.
void register_logical(OpTable& t);
/// Registers the sorting operators.
void register_sorting(OpTable& t);
/// Registers the copy operators.
void register_copy(OpTable& t);
/// Registers the creation operators.
void register_creation(OpTable& t);
/// Registers the shape operators.
void register_shape(OpTable& t);
/// Registers the indexing operators.
void register_indexing(OpTable& t);
/// Registers the padding operators.
void register_padding(OpTable& t);
/// Registers the reduction operators.
void register_reduction(OpTable& t);
/// Registers the linear operators.
void register_linear(OpTable& t);
/// Registers the conv operators.
void register_conv(OpTable& t);
/// Registers the pooling operators.
void register_pooling(OpTable& t);
/// Registers the normalization operators.
void register_normalization(OpTable& t);
/// Registers the sampling operators.
void register_sampling(OpTable& t);
/// Registers the attention operators.
void register_attention(OpTable& t);
/// Registers the embedding operators.
void register_embedding(OpTable& t);
/// Registers the dropout operators.
void register_dropout(OpTable& t);
/// Registers the signal operators.
void register_signal(OpTable& t);
/// Registers the rnn operators.
void register_rnn(OpTable& t);
/// Registers the control flow operators.
void register_control_flow(OpTable& t);
/// Registers the operators that make or read complex tensors (view_as_complex, polar, ...).
void register_complex(OpTable& t);
/// Registers the random operators (rand, randn, bernoulli, ...).
void register_random(OpTable& t);

/// A view of another tensor made by slice / select (for writes through the view).
struct ViewInfo {
  std::string base;               ///< The tensor name viewed.
  enum Kind { Slice, Select } kind = Slice;
  int64_t dim = 0;                ///< Axis.
  std::optional<int64_t> start;   ///< Slice start (select: the index).
  std::optional<int64_t> end;     ///< Slice end.
  int64_t step = 1;               ///< Slice step.
  Dim sym_start = nullptr;        ///< A symbolic slice start (instead of `start`).
  Dim sym_end = nullptr;          ///< A symbolic slice end (instead of `end`).
};

/// The conversion context: the builder, the names bound so far, argument helpers.
class Converter {
 public:
  Converter(Builder& b, const json& graph, const std::string& source);

  Builder& b;           ///< Where ops go.
  compose::Emitter e;   ///< Builds ops over `b`: compose/'s vocabulary and its one cast policy.
  const json& graph;    ///< The top-level graph.
  std::string source;   ///< For messages.

  /// The deployment target of the program.
  Target target() const { return b.function().opset(); }
  /// Types, symbols and names.
  Context& ctx() const { return b.function().ctx(); }

  // ---- names ---------------------------------------------------------------------------------
  std::unordered_map<std::string, Var*> vars;                             ///< Tensor name -> var.
  std::unordered_map<std::string, std::shared_ptr<const Value>> consts;   ///< Not yet materialized.
  std::unordered_map<std::string, std::string> const_names;               ///< Name a const gets.
  std::unordered_map<std::string, std::vector<std::string>> lists;        ///< Tensor-list names.
  std::unordered_map<std::string, ViewInfo> views;                        ///< Views, for writes.
  /// Complex tensors: name -> its (real, imaginary) parts, real tensors of one shape.
  std::unordered_map<std::string, std::pair<Var*, Var*>> complex_vars;
  /// A subgraph input name -> the outer tensor it is bound to (writes go through to it).
  std::unordered_map<std::string, std::string> aliases;
  /// A SymInt / SymFloat / SymBool read from a tensor's value (`.item()`) -> the rank-0 var holding it.
  std::unordered_map<std::string, Var*> scalar_values;
  /// Where each input symbol can be read: (input var, axis).
  std::unordered_map<const Symbol*, std::pair<Var*, int>> sym_sources;
  /// A symbol an input dim is a multiple of, plus an offset (dim = scale * symbol + offset): it
  /// is read as (dim - offset) / scale.
  struct ScaledSource {
    Var* var;        ///< The input.
    int axis;        ///< Its axis.
    int64_t scale;   ///< The multiple.
    int64_t offset;  ///< The offset.
  };
  /// Symbols read from inputs whose dim is `scale * symbol + offset` (no input has the symbol
  /// itself).
  std::unordered_map<const Symbol*, ScaledSource> sym_scaled;
  /// Records the sources of the symbols in `v`'s dims: a bare symbol is read from v, a multiple of
  /// a symbol plus a constant is divided back.
  void note_sources(Var* v);
  /// Names of placeholders that are states (buffers the program mutates) -> state input.
  std::unordered_map<std::string, Var*> state_inputs;
  /// State placeholder name -> the name its current value is bound to.
  std::unordered_map<std::string, std::string> state_current;
  /// When set (a subgraph's converter), vars are named "<prefix><torch name>_<n>": a subgraph's
  /// names may repeat the outer graph's.
  std::string name_prefix;

  /// The var of a tensor name (consts materialized on first use).
  Var* var(const std::string& name);
  /// Whether a tensor name is bound.
  bool defined(const std::string& name) const { return vars.count(name) || consts.count(name); }
  /// The compile-time value of a tensor name, or nullptr.
  const Value* known(const std::string& name);

  // ---- arguments (by schema name) ------------------------------------------------------------
  /// The node's argument named `name` (nullptr when absent or None).
  static const json* arg(const json& n, std::string_view name);
  /// Whether the argument is present and not None.
  static bool has(const json& n, std::string_view name) { return arg(n, name) != nullptr; }
  /// A tensor argument (required).
  Var* tensor(const json& n, std::string_view name);
  /// A tensor argument or nullptr.
  Var* opt_tensor(const json& n, std::string_view name);
  /// The tensor name of a tensor argument ("" if not a tensor).
  static std::string tensor_name(const json& n, std::string_view name);
  /// A list of tensors (as_tensors / as_optional_tensors; missing entries are nullptr).
  std::vector<Var*> tensors(const json& n, std::string_view name);
  /// An int argument (`def` when absent); SymInts must be known.
  int64_t i(const json& n, std::string_view name, int64_t def);
  /// An int argument that may be absent or None.
  std::optional<int64_t> opt_i(const json& n, std::string_view name);
  /// A float argument (ints accepted).
  double f(const json& n, std::string_view name, double def);
  /// A bool argument.
  bool bo(const json& n, std::string_view name, bool def);
  /// A string argument.
  std::string s(const json& n, std::string_view name, const std::string& def);
  /// An int list argument (as_ints; known SymInts accepted).
  std::vector<int64_t> ints(const json& n, std::string_view name, std::vector<int64_t> def = {});
  /// A float list argument.
  std::vector<double> floats(const json& n, std::string_view name, std::vector<double> def = {});
  /// An int list argument as dims (SymInts become their expressions).
  std::vector<Dim> dims(const json& n, std::string_view name);
  /// A shape argument as a rank-1 int32 var (a const when every dim is known, else built from
  /// the input shapes).
  Var* shape_var(const std::vector<Dim>& dims);
  /// The rank-0 var of a SymInt / SymFloat / SymBool argument `a` read by `.item()`, or nullptr.
  Var* item_value(const json& a) const;
  /// Fails naming argument `name` of `n` as an `.item()` value where a conversion-time number is needed.
  [[noreturn]] void fail_item(const json& n, std::string_view name) const;
  /// A scalar (int/float/bool/SymInt) or tensor argument as a var of dtype `dt`.
  Var* scalar_or_tensor(const json& n, std::string_view name, DataType dt);
  /// Whether an argument is a Python number (not a tensor).
  static bool is_number(const json& n, std::string_view name);
  /// A number argument's value.
  double number(const json& n, std::string_view name, double def);
  /// A dtype argument (as_scalar_type), as MIL's compute dtype.
  std::optional<DataType> dtype_arg(const json& n, std::string_view name);
  /// A SymInt argument's dim (as_sym_int or as_int).
  Dim sym_dim(const json& a);
  /// A SymFloat argument that is a ratio of sizes (torch's IntTrueDiv(a, b), as decompositions
  /// of upsampling write it): numerator and denominator; nullopt for other SymFloats.
  std::optional<std::pair<Dim, Dim>> sym_ratio(const json& a);
  /// A dim as an int32 scalar var (built from the input shapes when symbolic).
  Var* dim_var(Dim d);
  /// Makes `v` (an int32 scalar) the value of the symbolic dim `d`, as `.item()` defines one.
  void bind_dim(Dim d, Var* v) {
    if (!d->is_const()) dim_vars_.emplace(d, v);
  }
  /// Whether dim_var can compute `d` (every symbol in it is a dim of some var converted so far).
  bool can_compute(Dim d) const;

  // ---- outputs -------------------------------------------------------------------------------
  /// The names of a node's outputs (as_tensor, or each of as_tensors; "" for None entries).
  static std::vector<std::string> output_names(const json& n);
  /// Binds the node's output `i` to `v` (named after the torch value when made by this node).
  void out(const json& n, Var* v, size_t i = 0);
  /// Binds every output.
  void outs(const json& n, const std::vector<Var*>& vs);
  /// The torch dtype (MIL compute dtype) of a tensor value from the graph's tensor_values.
  std::optional<DataType> meta_dtype(const std::string& name) const;
  /// The MIL dtype of output `i` from tensor_values.
  std::optional<DataType> out_dtype(const json& n, size_t i = 0) const;
  /// The declared shape of a tensor value (torch's sizes as dims), nullopt if not declared.
  std::optional<std::vector<Dim>> meta_shape(const std::string& name);
  /// The declared rank of a tensor value.
  std::optional<int> meta_rank(const std::string& name) const;
  /// An entry of one of the graph's value tables ("tensor_values", "sym_int_values"), looked up
  /// in the subgraphs being converted (innermost first), then the graph; nullptr if absent.
  const json* lookup(const char* table, const std::string& name) const;

  // ---- building -------------------------------------------------------------------------------
  /// A single-output op.
  Var* op(std::string_view type, std::vector<Arg> args) { return e.op(type, std::move(args)); }
  /// An op with several outputs.
  std::vector<Var*> ops(std::string_view type, std::vector<Arg> args) {
    return e.ops(type, std::move(args));
  }
  /// A const var.
  Var* c(Value v) { return e.c(std::move(v)); }
  /// int32 rank-1 const.
  Var* ci(const std::vector<int64_t>& v) { return e.ci(v); }
  /// Scalar const of dtype `dt`.
  Var* cs(double v, DataType dt) { return e.cs(v, dt); }
  /// Argument helpers.
  static Arg a(std::string name, Var* v) { return Builder::arg(std::move(name), v); }
  static Arg a(std::string name, Value v) { return Builder::arg(std::move(name), std::move(v)); }
  static Arg ai32(std::string name, int64_t v) { return a(std::move(name), Value::scalar_int(DataType::Int32, v)); }
  static Arg aints32(std::string name, const std::vector<int64_t>& v) { return a(std::move(name), Value::int_list(v)); }
  static Arg abool(std::string name, bool v) { return a(std::move(name), Value::scalar_bool(v)); }
  static Arg astr(std::string name, std::string v) { return a(std::move(name), Value::scalar_string(std::move(v))); }
  static Arg af32(std::string name, double v) { return a(std::move(name), Value::scalar_float(DataType::Float32, v)); }
  /// A var's dtype.
  static DataType dtype(Var* v) { return compose::Emitter::dtype(v); }
  /// A var's rank; ValueError naming the node when unknown.
  int rank(const json& n, Var* v) const;
  /// A var's shape.
  static const std::vector<Dim>& shape(Var* v) { return v->type()->shape(); }
  /// The shape as integers when every dim is known.
  static std::optional<std::vector<int64_t>> static_shape(Var* v) {
    return compose::Emitter::static_shape(v);
  }
  /// Normalizes a possibly negative axis against `rank`.
  int64_t axis(const json& n, int64_t a, int64_t rank) const;
  /// Casts to `dt` if needed (compose::Emitter::cast: small known values fold into a const).
  Var* cast(Var* v, DataType dt) { return e.cast(v, dt); }
  /// torch's result dtype of combining `a` and `b` (0-d tensors count by category only).
  static DataType promote(Var* a, Var* b);
  /// Makes `x` and `y` one dtype: the node's output dtype from the graph when it is a float
  /// result, else torch's promotion.
  std::pair<Var*, Var*> promoted(const json& n, Var* x, Var* y);
  /// A ValueError naming the node (its name, target and the user's source line).
  [[noreturn]] void fail(const json& n, const std::string& msg) const;
  /// "node 'name' (aten.add.Tensor) at file.py:12".
  static std::string label(const json& n);

  /// `x` with `update` written at [start, end) step `step` along axis `dim` (slice_update);
  /// a symbolic start / end (non-null Dim) is computed from the input shapes.
  Var* slice_update_axis(Var* x, Var* update, int64_t dim, std::optional<int64_t> start, Dim sym_start,
                         std::optional<int64_t> end, Dim sym_end, int64_t step);
  /// A shape made of literal ints and dims of `x` (pairs: (true, axis of x) or (false, value)).
  Var* shape_of_pieces(Var* x, const std::vector<std::pair<bool, int64_t>>& pieces);
  /// A rank-1 int32 vector: `base` with element `d` replaced by the int scalar var `v`.
  Var* vector_with(const std::vector<int64_t>& base, size_t d, Var* v);
  /// Writes `value` into tensor `name` (an in-place op's result): rebinds the name, writes
  /// through views into their base, and marks state buffers updated.
  void assign(const std::string& name, Var* value);
  /// Converts one node.
  void convert_node(const json& n);
  /// Converts the subgraph `g` of higher-order node `n` inline: its inputs bound to `args` (the
  /// node's operands, serialized arguments), its nodes converted; returns its outputs.
  std::vector<Var*> convert_subgraph(const json& n, const json& g,
                                     const std::vector<const json*>& args);

 private:
  std::vector<const json*> scopes_;  // subgraphs being converted
  std::unordered_set<const Var*> bound_;
  std::unordered_map<const Expr*, Var*> dim_vars_;
  std::unordered_map<std::string, Var*> shape_of_;  // input var name -> its shape op
  Var* shape_of(Var* in);                           // the (one) shape op of `in`
  Var* scaled_symbol(const ScaledSource& q);        // (dim - offset) / scale, checked
};


/// Whether node `n` reads a complex tensor or makes one (torch's complex dtypes).
bool complex_node(Converter& cv, const json& n);
/// Converts a node that reads or makes complex tensors; `real_fn` (may be null) is the node's
/// converter for real tensors, run on each part for the ops that act on the parts separately.
void convert_complex(Converter& cv, const json& n, const ConvertFn* real_fn);
/// A complex value as its (real, imaginary) parts, or a real one (`im` nullptr).
struct Cx {
  Var* re = nullptr;
  Var* im = nullptr;
};
/// Tensor argument `name` of `n` as a Cx (a real tensor has no imaginary part).
Cx complex_arg(Converter& cv, const json& n, const char* name);
/// Binds output `k` of `n` to `v`, naming its parts after the output (a real `v` binds as is).
void out_complex(Converter& cv, const json& n, Cx v, size_t k = 0);
/// Converts `n` if it is an FFT (core ATen's _fft_r2c / _fft_c2r / _fft_c2c, the torch.fft
/// functions, stft, istft); false for other nodes.
bool convert_fft(Converter& cv, const json& n);
/// Registers the FFT operators (they convert through convert_fft).
void register_fft(OpTable& t);
/// Binds `name` to a complex weight stored as `v`: its (real, imaginary) pairs on a last axis of 2.
void bind_complex_const(Converter& cv, const std::string& name, const Value& v);
/// Whether torch ScalarType `st` is complex (complex32 / complex64 / complex128).
inline bool is_complex_type(int st) { return st >= 9 && st <= 11; }

/// The user's source line of a node ("file.py:12: code"), or "".
std::string user_frame(const json& n);
/// Whether a target has no effect on the program's values (runtime asserts, metadata checks).
bool ignorable_target(const std::string& target);
/// Whether a node's outputs are all SymInts / SymBools / SymFloats (values in sym_*_values).
bool sym_only_node(const json& n);
/// The subgraph of a higher-order node (its as_graph argument) and its position among the
/// node's inputs, or {nullptr, 0}.
std::pair<const json*, size_t> subgraph_of(const json& n);
/// Whether a node has no effect to convert: a runtime assert, or a SymInt computation (its value
/// is in sym_int_values).
bool skip_node(const json& n);

}  // namespace torch_detail
}  // namespace milkit

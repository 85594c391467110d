// The ONNX importer's internals: tensor decoding, the conversion context handed to each
// operator's converter, and the operator table. Only the files of frontends/onnx include this.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/compose/emitter.h"
#include "milkit/compose/windows.h"
#include "milkit/frontends/onnx.h"
#include "milkit/ir/value.h"
#include "onnx.pb.h"

namespace milkit {
namespace onnx_detail {

/// Where external data is resolved and the mapped files shared between tensors.
struct ExternalData {
  std::string base_dir;  ///< Folder paths are resolved in.
  std::unordered_map<std::string, std::shared_ptr<const void>> maps;  ///< Path -> mapping.
  std::unordered_map<std::string, size_t> sizes;                      ///< Path -> file size.
};

/// The MIL dtype an ONNX element type becomes (ints -> int32, double/bf16 -> fp32), or nullopt
/// for types MIL cannot hold (strings, complex, fp8).
std::optional<DataType> mil_dtype(int onnx_type);
/// ONNX element types newer than the schema milkit compiles.
constexpr int kFloat8E8M0 = 24, kUInt2 = 25, kInt2 = 26;
/// Whether an ONNX element type is one Core ML has no tensors of but milkit holds exactly in fp32
/// (bfloat16, float8 e4m3fn / e4m3fnuz / e5m2 / e5m2fnuz / e8m0, float4 e2m1) or int32 (int4,
/// uint4, int2, uint2).
bool is_narrow_type(int onnx_type);
/// A tensor of a narrow type other than bfloat16 decoded into its holder (fp32 / int32); nullopt
/// for other types. `n` is the element count of `shape`.
std::optional<Value> decode_narrow(const onnx::TensorProto& t, const std::vector<int64_t>& shape,
                                   int64_t n, const std::string& what);
/// ONNX's name of an element type ("FLOAT", "INT64").
std::string onnx_type_name(int onnx_type);
/// Decodes a TensorProto into a value of its own dtype (int64 and double are kept; fp16/bf16 as
/// bits). Raw data is borrowed from `keep` (the parsed model); external data is mapped.
/// Throws FormatError naming the tensor when its data does not match its shape.
Value decode_tensor(const onnx::TensorProto& t, ExternalData& ext,
                    const std::shared_ptr<const void>& keep, const std::string& what);
/// A value narrowed to what MIL holds: int64/uint/int8/16 -> int32 (range-checked: ValueError
/// naming `what` if out of range), double/bf16 -> fp32. Bool, int32, fp16 and fp32 are unchanged.
Value narrow(const Value& v, const std::string& what);

class Converter;
/// Converts one node: reads inputs and attributes through `cv`, builds ops, sets the outputs.
using ConvertFn = std::function<void(Converter& cv, const onnx::NodeProto& node)>;

/// The newest opset of each domain milkit converts (ONNX 1.23: ai.onnx 28, ai.onnx.ml 5,
/// ai.onnx.preview 1, ai.onnx.preview.training 1); nullopt for a domain milkit has no operators
/// of. A model importing a newer opset of one of these domains is refused, as onnxruntime does.
std::optional<int64_t> newest_known_opset(const std::string& domain);
/// The domain's canonical name: "" for the default domain (also spelled "ai.onnx").
inline std::string canonical_domain(const std::string& d) {
  return d == "ai.onnx" ? std::string() : d;
}

/// The operator table: for each (domain, operator) its converters by opset, each applying from
/// its `since` opset up to the next entry's. A node resolves to the entry with the greatest
/// `since` <= the model's opset of the node's domain.
class OpTable {
 public:
  /// Registers `fn` for `op` of the default domain from opset `since`.
  void on(const std::string& op, int since, ConvertFn fn) {
    on(std::string(), op, since, std::move(fn));
  }
  /// Registers `fn` for `op` of `domain` from opset `since`.
  void on(const std::string& domain, const std::string& op, int since, ConvertFn fn);
  /// The converter for `op` of `domain` at `opset`, or nullptr when there is none.
  const ConvertFn* find(const std::string& domain, const std::string& op, int64_t opset) const;
  /// Whether `op` of `domain` has any entry.
  bool has(const std::string& domain, const std::string& op) const;
  /// The operators of the default domain, sorted.
  std::vector<std::string> default_domain_ops() const;

 private:
  struct Entry {
    int since;
    ConvertFn fn;
  };
  static std::string key(const std::string& domain, const std::string& op);
  std::unordered_map<std::string, std::vector<Entry>> entries_;  // oldest first
};

/// The table (filled once by the register_* functions of each family file).
const OpTable& op_table();

void register_activation(OpTable& t);
void register_attention(OpTable& t);
void register_cast(OpTable& t);
void register_control_flow(OpTable& t);
void register_conv(OpTable& t);
void register_creation(OpTable& t);
void register_detection(OpTable& t);
void register_indexing(OpTable& t);
void register_logical(OpTable& t);
void register_loss(OpTable& t);
void register_math(OpTable& t);
void register_ml(OpTable& t);
void register_normalization(OpTable& t);
void register_optional(OpTable& t);
void register_pooling(OpTable& t);
void register_quantization(OpTable& t);
void register_reduction(OpTable& t);
void register_rnn(OpTable& t);
void register_sampling(OpTable& t);
void register_shape(OpTable& t);
void register_signal(OpTable& t);
void register_text(OpTable& t);
void register_training(OpTable& t);

/// Names visible in one graph (subgraphs see their parents').
struct Scope {
  Scope* parent = nullptr;
  std::unordered_map<std::string, Var*> vars;
  std::unordered_map<std::string, std::shared_ptr<const Value>> consts;  ///< Not yet materialized.
};

/// The conversion context: the builder, the names in scope, attribute and input helpers.
class Converter {
 public:
  Converter(Builder& b, int64_t opset, ExternalData& ext, std::shared_ptr<const void> keep,
            const std::unordered_map<std::string, const onnx::FunctionProto*>& functions);

  Builder& b;           ///< Where ops go.
  compose::Emitter em;  ///< Builds ops on `b` for the helpers below and for compose/.
  int64_t opset;        ///< The default domain's opset version.
  /// The model's opset of each domain it imports, by canonical domain name.
  std::unordered_map<std::string, int64_t> opsets;
  /// The opset a node of `domain` is converted at (domains the model does not import: the newest).
  int64_t opset_of(const std::string& domain) const;
  ExternalData& ext;                 ///< External data of the model.
  std::shared_ptr<const void> keep;  ///< Keeps the parsed model (and borrowed raw data) alive.
  const std::unordered_map<std::string, const onnx::FunctionProto*>&
      functions;           ///< Local functions.
  Scope* scope = nullptr;  ///< The innermost graph's names.
  /// ONNX element types of the values whose type the model declares (graph inputs, value_info),
  /// by name; elem_type() also reads consts' own dtypes.
  std::unordered_map<std::string, int> declared_types;
  /// ONNX values that are empty optionals (Optional() with no input).
  std::unordered_set<std::string> empty_optionals;
  /// Values read only as Slice starts / ends (directly or through Concat, Unsqueeze, Squeeze,
  /// Reshape, Identity): their int64 constants saturate to int32 (Slice clamps them to the dim
  /// anyway) instead of being refused, as INT64_MAX / INT64_MIN "to the end" bounds are.
  std::unordered_set<std::string> slice_bounds;
  /// Vars holding only values of a narrow type (made by to_narrow), by var.
  std::unordered_map<const Var*, int> narrow_vars;
  /// The ONNX element type of input `i` (declared, or a const's own), 0 when not known.
  int elem_type(const onnx::NodeProto& n, int i);

  /// The deployment target of the program.
  Target target() const { return b.function().opset(); }
  /// Types, symbols and names.
  Context& ctx() const { return b.function().ctx(); }

  // ---- inputs -------------------------------------------------------------------------------
  /// Whether input `i` is given (present and not the empty name).
  static bool has(const onnx::NodeProto& n, int i) {
    return i < n.input_size() && !n.input(i).empty();
  }
  /// Input `i` as a var (consts are materialized, narrowed, on first use).
  Var* in(const onnx::NodeProto& n, int i);
  /// A name as a var.
  Var* var(const std::string& name);
  /// Whether a name is defined in scope.
  bool defined(const std::string& name) const;
  /// Input `i`'s compile-time value (the ONNX const in its own dtype, or a var's known value).
  const Value* value(const onnx::NodeProto& n, int i);
  /// Input `i` as integers; ValueError naming the node when it is not known at import time.
  std::vector<int64_t> ints(const onnx::NodeProto& n, int i, const char* what);
  /// Input `i` as doubles (must be known).
  std::vector<double> doubles(const onnx::NodeProto& n, int i, const char* what);

  // ---- attributes ---------------------------------------------------------------------------
  /// Whether the node has attribute `name` (read its value with attr_*).
  static bool has_attr(const onnx::NodeProto& n, const std::string& name) {
    return find_attr(n, name) != nullptr;
  }
  /// The attribute, or nullptr, whatever its type.
  static const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name);
  /// The attribute when present, checked to be of type `t` (an attribute without a type, as
  /// IR version 1 writes them, is taken as it is); nullptr when absent. FormatError naming the
  /// node and the attribute when it has another type.
  static const onnx::AttributeProto* typed_attr(const onnx::NodeProto& n, const std::string& name,
                                                onnx::AttributeProto::AttributeType t);
  /// Integer attribute (`def` when absent).
  static int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t def);
  /// Float attribute (`def` when absent).
  static float attr_float(const onnx::NodeProto& n, const std::string& name, float def);
  /// String attribute (`def` when absent).
  static std::string attr_string(const onnx::NodeProto& n, const std::string& name,
                                 const std::string& def);
  /// Integer list attribute (`def` when absent).
  static std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name,
                                        std::vector<int64_t> def = {});
  /// Float list attribute (`def` when absent).
  static std::vector<float> attr_floats(const onnx::NodeProto& n, const std::string& name,
                                        std::vector<float> def = {});
  /// String list attribute (empty when absent).
  static std::vector<std::string> attr_strings(const onnx::NodeProto& n, const std::string& name);
  /// Tensor attribute, or nullptr when absent.
  static const onnx::TensorProto* attr_tensor(const onnx::NodeProto& n, const std::string& name);
  /// Graph attribute, or nullptr when absent.
  static const onnx::GraphProto* attr_graph(const onnx::NodeProto& n, const std::string& name);

  // ---- outputs ------------------------------------------------------------------------------
  /// Binds node output `i` to `v` (named after the ONNX value when `v` was made by this node).
  void out(const onnx::NodeProto& n, int i, Var* v);
  /// Binds a name to a compile-time value without making an op (Constant and folded nodes).
  void out_const(const onnx::NodeProto& n, int i, Value v);
  /// Whether node output `i` is wanted (present and not empty).
  static bool wants(const onnx::NodeProto& n, int i) {
    return i < n.output_size() && !n.output(i).empty();
  }

  // ---- building (compose::Emitter's, on `b`) ------------------------------------------------
  /// A single-output op.
  Var* op(std::string_view type, std::vector<Arg> args) { return em.op(type, std::move(args)); }
  /// An op with several outputs.
  std::vector<Var*> ops(std::string_view type, std::vector<Arg> args) {
    return em.ops(type, std::move(args));
  }
  /// A const var.
  Var* c(Value v) { return em.c(std::move(v)); }
  /// int32 rank-1 const.
  Var* ci(const std::vector<int64_t>& v) { return em.ci(v); }
  /// Scalar const of dtype `dt`.
  Var* cs(double v, DataType dt) { return em.cs(v, dt); }
  /// Builders of MIL op arguments (named inputs): a var, a value, or an int32 / int32 list /
  /// bool / string / fp32 scalar.
  static Arg arg(std::string name, Var* v) { return Builder::arg(std::move(name), v); }
  static Arg arg(std::string name, Value v) { return Builder::arg(std::move(name), std::move(v)); }
  static Arg arg_i32(std::string name, int64_t v) {
    return arg(std::move(name), Value::scalar_int(DataType::Int32, v));
  }
  static Arg arg_ints32(std::string name, const std::vector<int64_t>& v) {
    return arg(std::move(name), Value::int_list(v));
  }
  static Arg arg_bool(std::string name, bool v) {
    return arg(std::move(name), Value::scalar_bool(v));
  }
  static Arg arg_str(std::string name, std::string v) {
    return arg(std::move(name), Value::scalar_string(std::move(v)));
  }
  static Arg arg_f32(std::string name, double v) {
    return arg(std::move(name), Value::scalar_float(DataType::Float32, v));
  }

  /// A var's dtype.
  static DataType dtype(Var* v) { return v->type()->dtype(); }
  /// A var's rank; ValueError (named after the node by convert_node) when the rank is unknown.
  static int rank(const onnx::NodeProto&, Var* v) { return compose::Emitter::rank(v); }
  /// A var's shape.
  static const std::vector<Dim>& shape(Var* v) { return v->type()->shape(); }
  /// The shape as integers when every dim is known.
  static std::optional<std::vector<int64_t>> static_shape(Var* v) {
    return compose::Emitter::static_shape(v);
  }
  /// Normalizes a possibly negative axis against `rank`; ValueError (named after the node by
  /// convert_node) if out of range.
  static int64_t axis(const onnx::NodeProto&, int64_t a, int64_t rank) {
    return compose::Emitter::axis(a, rank);
  }
  /// `v` as `dt`: compose's cast policy (small known values folded into a const, else a cast op).
  Var* cast(Var* v, DataType dt) { return em.cast(v, dt); }
  /// A ValueError naming the node.
  [[noreturn]] void fail(const onnx::NodeProto& n, const std::string& msg) const;

  /// Converts the nodes of a graph in this scope (topologically sorted first).
  void convert_nodes(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes,
                     const std::string& where);
  /// Converts one node (dispatch by op type, or a local function).
  void convert_node(const onnx::NodeProto& n);
  /// Adds a graph's initializers to the current scope.
  void add_initializers(const onnx::GraphProto& g);

 private:
  std::unordered_set<const Var*> bound_;  // vars already bound to an ONNX name
};

/// What pool_by_windows computes over each window (compose's kinds).
using PoolKind = compose::PoolKind;
/// Pools x ([N, C, spatial...], static spatial dims) the way ONNX defines it for any dilation,
/// padding and ceil_mode: the node's window (auto_pad resolved) by compose::pool_by_taps. With
/// `indices`, also the flat index (storage_order 0 / 1) of each max in the input.
Var* pool_by_windows(Converter& cv, const onnx::NodeProto& n, Var* x, PoolKind kind,
                     bool count_include_pad, Var** indices = nullptr);
/// Whether ONNX's pool output size differs from MIL's for this node (dilations, or ceil_mode
/// windows that would start in the end padding).
bool pool_needs_windows(Converter& cv, const onnx::NodeProto& n, Var* x);

/// x converted to narrow type `t` in the program, in its holder: floats rounded to the nearest
/// value of the format (ties to even; past the largest value saturated with `saturate`, else
/// infinite or NaN as the format has it), integers truncated and wrapped to the width.
Var* to_narrow(Converter& cv, const onnx::NodeProto& n, Var* x, int t, bool saturate);

/// Converts a subgraph (a graph attribute) in a new scope under the current one: `inputs` bind
/// its inputs; returns its outputs.
std::vector<Var*> convert_subgraph(Converter& cv, const onnx::GraphProto& g,
                                   const std::vector<Var*>& inputs);

/// A label for a node in messages: "node 'name' (Op)" or "node #i (Op)".
std::string node_label(const onnx::NodeProto& n);

}  // namespace onnx_detail
}  // namespace milkit

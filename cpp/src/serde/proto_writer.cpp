// Program -> Model proto, following coremltools' MIL backend (backend/mil/load.py, helper.py).
#include "milkit/serde/proto_writer.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "MIL.pb.h"
#include <google/protobuf/arena.h>

#include "Model.pb.h"
#include "milkit/ops/registry.h"
#include "milkit/serde/blob.h"
#include "milkit/types/error.h"

namespace milkit {

namespace spec = CoreML::Specification;
namespace mil = CoreML::Specification::MILSpec;

namespace {

constexpr const char* kMilkitVersion = "0.1.0";

bool is_byte_immediate(DataType t) {
  // coremltools' IMMEDIATE_VALUE_TYPES_IN_BYTES
  switch (t) {
    case DataType::Float16:
    case DataType::Int4:
    case DataType::Int8:
    case DataType::UInt1:
    case DataType::UInt2:
    case DataType::UInt3:
    case DataType::UInt4:
    case DataType::UInt6:
    case DataType::UInt8:
    case DataType::UInt32: return true;
    default: return false;
  }
}

// ---- a protobuf wire encoder for the MIL program (the bulk of the file) -------------------
//
// The MIL messages are written straight to bytes (field numbers of MIL.proto, fields in number
// order, proto3 defaults left out as protobuf does); building them as protobuf objects first
// cost more than the rest of the save. Map entries are written in the order milkit produces
// them (protobuf's own order is its hash order; readers do not depend on it).
class Enc {
 public:
  explicit Enc(std::string& out) : out_(out) {}
  std::string& bytes() { return out_; }

  void varint(uint64_t v) {
    if (v < 0x80) {  // tags and most lengths: one byte, no call
      out_.push_back(static_cast<char>(v));
      return;
    }
    char buf[10];
    int n = 0;
    while (v >= 0x80) {
      buf[n++] = static_cast<char>(static_cast<uint8_t>(v) | 0x80);
      v >>= 7;
    }
    buf[n++] = static_cast<char>(v);
    out_.append(buf, static_cast<size_t>(n));
  }
  void tag(int field, int wire) { varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire)); }
  /// A string or bytes field, written even when empty (repeated fields, map keys).
  void str_always(int field, std::string_view s) {
    tag(field, 2);
    varint(s.size());
    out_.append(s.data(), s.size());
  }
  /// A proto3 singular string field: left out when empty.
  void str(int field, std::string_view s) {
    if (!s.empty()) str_always(field, s);
  }
  /// A proto3 singular varint field (int32 / int64 / uint64 / bool / enum): left out when 0.
  void uint(int field, uint64_t v) {
    if (v == 0) return;
    tag(field, 0);
    varint(v);
  }
  void sint(int field, int64_t v) { uint(field, static_cast<uint64_t>(v)); }  // int64 / int32: two's complement
  /// Opens a length-delimited submessage; returns the mark to close it with.
  size_t open(int field) {
    tag(field, 2);
    out_.push_back('\0');  // one length byte reserved; close() widens it when needed
    return out_.size();
  }
  void close(size_t mark) {
    const size_t len = out_.size() - mark;
    if (len < 0x80) {
      out_[mark - 1] = static_cast<char>(len);
      return;
    }
    char buf[10];
    int n = 0;
    uint64_t v = len;
    while (v >= 0x80) {
      buf[n++] = static_cast<char>(static_cast<uint8_t>(v) | 0x80);
      v >>= 7;
    }
    buf[n++] = static_cast<char>(v);
    out_.insert(mark, static_cast<size_t>(n - 1), '\0');
    std::memcpy(&out_[mark - 1], buf, static_cast<size_t>(n));
  }
  void raw(const std::string& bytes) { out_.append(bytes); }

 private:
  std::string& out_;
};

// Field numbers (MIL.proto).
namespace f {
constexpr int kProgVersion = 1, kProgFunctions = 2, kProgAttributes = 4;
constexpr int kFnInputs = 1, kFnOpset = 2, kFnBlocks = 3;
constexpr int kBlkInputs = 1, kBlkOutputs = 2, kBlkOps = 3;
constexpr int kArgArguments = 1, kBindName = 1, kBindValue = 2;
constexpr int kOpType = 1, kOpInputs = 2, kOpOutputs = 3, kOpBlocks = 4, kOpAttributes = 5;
constexpr int kNvtName = 1, kNvtType = 2;
constexpr int kVtTensor = 1, kVtList = 2, kVtTuple = 3, kVtDict = 4, kVtState = 5;
constexpr int kTtDataType = 1, kTtRank = 2, kTtDims = 3;
constexpr int kListType = 1, kListLength = 2;
constexpr int kTupleTypes = 1, kDictKey = 1, kDictValue = 2, kStateWrapped = 1;
constexpr int kDimConstant = 1, kDimUnknown = 2, kConstSize = 1, kUnknownVariadic = 1;
constexpr int kValType = 2, kValImmediate = 3, kValBlob = 5;
constexpr int kImmTensor = 1, kImmList = 3, kImmDict = 4;
constexpr int kBlobFileName = 1, kBlobOffset = 2;
constexpr int kTvFloats = 1, kTvInts = 2, kTvBools = 3, kTvStrings = 4, kTvLongInts = 5, kTvDoubles = 6,
              kTvBytes = 7, kRepValues = 1;
constexpr int kDictValues = 1, kKvKey = 1, kKvValue = 2, kListValues = 1;
constexpr int kMapKey = 1, kMapValue = 2;
}  // namespace f

void tensor_type(Enc& e, int field, DataType dt, const std::vector<int64_t>& shape) {
  size_t m = e.open(field);
  e.uint(f::kTtDataType, static_cast<uint64_t>(static_cast<int>(dt)));
  e.sint(f::kTtRank, static_cast<int64_t>(shape.size()));
  for (int64_t d : shape) {
    size_t dm = e.open(f::kTtDims);
    size_t cm = e.open(f::kDimConstant);
    e.uint(f::kConstSize, static_cast<uint64_t>(d));
    e.close(cm);
    e.close(dm);
  }
  e.close(m);
}

// A ValueType holding a tensor type (field `field` of the enclosing message).
void tensor_value_type(Enc& e, int field, DataType dt, const std::vector<int64_t>& shape) {
  size_t m = e.open(field);
  tensor_type(e, f::kVtTensor, dt, shape);
  e.close(m);
}

class Writer {
 public:
  Writer(const ProtoWriteOptions& o) : opt_(o) {}

  // A ValueType message as field `field`. Types are interned, so each one is encoded once and
  // its bytes copied after that.
  void type(Enc& e, int field, const Type* t) {
    auto it = type_bytes_.find(t);
    if (it == type_bytes_.end()) {
      std::string body;
      Enc te(body);
      type_body(te, t);
      it = type_bytes_.emplace(t, std::move(body)).first;
    }
    e.tag(field, 2);
    e.varint(it->second.size());
    e.raw(it->second);
  }

  // The fields of a ValueType message.
  void type_body(Enc& e, const Type* t) {
    switch (t->kind()) {
      case TypeKind::Tensor: {
        if (is_complex(t->dtype()))
          throw ValueError("complex64 data cannot be written to an ML Program (Core ML has no complex type); "
                           "run common::lower_complex_dialect_ops first");
        size_t tm = e.open(f::kVtTensor);
        e.uint(f::kTtDataType, static_cast<uint64_t>(static_cast<int>(t->dtype())));
        if (!t->has_rank()) {  // pymil's variadic shape: one variadic unknown dim
          e.sint(f::kTtRank, 1);
          size_t dm = e.open(f::kTtDims);
          size_t um = e.open(f::kDimUnknown);
          e.uint(f::kUnknownVariadic, 1);
          e.close(um);
          e.close(dm);
          e.close(tm);
          break;
        }
        e.sint(f::kTtRank, t->rank());
        for (Dim d : t->shape()) {
          size_t dm = e.open(f::kTtDims);
          if (d->is_const()) {
            size_t cm = e.open(f::kDimConstant);
            e.uint(f::kConstSize, static_cast<uint64_t>(d->value()));
            e.close(cm);
          } else {
            size_t um = e.open(f::kDimUnknown);
            e.uint(f::kUnknownVariadic, d->kind() == Expr::Kind::Symbol && d->symbol()->variadic());
            e.close(um);
          }
          e.close(dm);
        }
        e.close(tm);
        break;
      }
      case TypeKind::List: {
        size_t lm = e.open(f::kVtList);
        type(e, f::kListType, t->elem());
        size_t dm = e.open(f::kListLength);
        if (t->length() && t->length()->is_const()) {
          size_t cm = e.open(f::kDimConstant);
          e.uint(f::kConstSize, static_cast<uint64_t>(t->length()->value()));
          e.close(cm);
        } else {
          size_t um = e.open(f::kDimUnknown);
          e.close(um);
        }
        e.close(dm);
        e.close(lm);
        break;
      }
      case TypeKind::Tuple: {
        size_t tm = e.open(f::kVtTuple);
        for (const Type* el : t->elems()) type(e, f::kTupleTypes, el);
        e.close(tm);
        break;
      }
      case TypeKind::Dict: {
        size_t dm = e.open(f::kVtDict);
        type(e, f::kDictKey, t->key());
        type(e, f::kDictValue, t->value());
        e.close(dm);
        break;
      }
      case TypeKind::State: {
        size_t sm = e.open(f::kVtState);
        type(e, f::kStateWrapped, t->elem());
        e.close(sm);
        break;
      }
    }
  }

  // A Value holding a string scalar, as field `field`.
  static void string_scalar(Enc& e, int field, std::string_view s) {
    size_t m = e.open(field);
    tensor_value_type(e, f::kValType, DataType::String, {});
    size_t im = e.open(f::kValImmediate);
    size_t tm = e.open(f::kImmTensor);
    size_t sm = e.open(f::kTvStrings);
    e.str_always(f::kRepValues, s);
    e.close(sm);
    e.close(tm);
    e.close(im);
    e.close(m);
  }

  // A map<string, Value> entry whose value is a string scalar.
  static void string_attribute(Enc& e, int field, std::string_view key, std::string_view s) {
    size_t m = e.open(field);
    e.str_always(f::kMapKey, key);
    string_scalar(e, f::kMapValue, s);
    e.close(m);
  }

  // coremltools' create_list_scalarvalue: a list of scalars (classify's classes) is a ListType
  // of rank-0 tensors with a constant length, and one immediate scalar Value per element.
  void list_value(Enc& e, const Value& v, const std::string& what) {
    const DataType dt = v.dtype();
    if (dt != DataType::String && dt != DataType::Int64)
      throw ValueError(what + ": List element type, " + std::string(dtype_name(dt)) +
                       ", not supported yet (lists of str or int64 only)");
    size_t vt = e.open(f::kValType);
    size_t lt = e.open(f::kVtList);
    tensor_value_type(e, f::kListType, dt, {});
    size_t dm = e.open(f::kListLength);
    size_t cm = e.open(f::kDimConstant);
    e.uint(f::kConstSize, static_cast<uint64_t>(v.numel()));
    e.close(cm);
    e.close(dm);
    e.close(lt);
    e.close(vt);
    size_t im = e.open(f::kValImmediate);
    size_t lv = e.open(f::kImmList);
    for (int64_t i = 0; i < v.numel(); ++i) {
      if (dt == DataType::String)
        string_scalar(e, f::kListValues, v.string_values()[static_cast<size_t>(i)]);
      else
        value(e, f::kListValues, Value::scalar_int(dt, v.as_int(i)), what);
    }
    e.close(lv);
    e.close(im);
  }

  // A Value message as field `field`.
  void value(Enc& e, int field, const Value& v, const std::string& what) {
    const DataType dt = v.dtype();
    if (v.is_symbolic())
      throw ValueError(what + ": a symbolic value cannot be serialized");
    size_t m = e.open(field);
    if (v.is_list()) {
      list_value(e, v, what);
      e.close(m);
      return;
    }
    if (dt == DataType::BFloat16 || dt == DataType::Float8E4M3FN || dt == DataType::Float8E5M2 ||
        dt == DataType::Unused)
      throw ValueError(what + ": consts of dtype " + std::string(dtype_name(dt)) +
                       " cannot be serialized in an ML Program (coremltools has no encoding for them)");
    tensor_value_type(e, f::kValType, dt, v.shape());
    if (uses_weight_file(v, opt_.target)) {
      if (!opt_.weights) throw ValueError(what + ": needs a weight file but none was given");
      uint64_t off = opt_.weights().write(v);
      size_t bm = e.open(f::kValBlob);
      e.str(f::kBlobFileName, kWeightFileName);
      e.uint(f::kBlobOffset, off);
      e.close(bm);
      e.close(m);
      return;
    }
    size_t im = e.open(f::kValImmediate);
    size_t tm = e.open(f::kImmTensor);
    const int64_t n = v.numel();
    const uint8_t* raw = v.raw();
    auto packed = [&](int fld, auto&& each) {  // a RepeatedX message with packed values
      size_t rm = e.open(fld);
      if (n > 0) {
        size_t pm = e.open(f::kRepValues);
        each();
        e.close(pm);
      }
      e.close(rm);
    };
    if (dt == DataType::String) {
      size_t rm = e.open(f::kTvStrings);
      for (const auto& s : v.string_values()) e.str_always(f::kRepValues, s);
      e.close(rm);
    } else if (dt == DataType::Bool) {
      packed(f::kTvBools, [&] {
        for (int64_t i = 0; i < n; ++i) e.varint(raw[i] != 0);
      });
    } else if (is_byte_immediate(dt)) {
      size_t rm = e.open(f::kTvBytes);
      if (is_sub_byte(dt)) {
        std::string packed_bits((static_cast<size_t>(n) * dtype_bits(dt) + 7) / 8, '\0');
        pack_sub_byte(raw, static_cast<size_t>(n), dtype_bits(dt), reinterpret_cast<uint8_t*>(&packed_bits[0]));
        e.str(f::kRepValues, packed_bits);
      } else {
        e.str(f::kRepValues, std::string_view(reinterpret_cast<const char*>(raw), v.nbytes()));
      }
      e.close(rm);
    } else if (dt == DataType::Int64 || dt == DataType::UInt64) {
      packed(f::kTvLongInts, [&] {
        for (int64_t i = 0; i < n; ++i) {
          int64_t x;
          std::memcpy(&x, raw + 8 * i, 8);
          e.varint(static_cast<uint64_t>(x));
        }
      });
    } else if (dt == DataType::Float32) {
      packed(f::kTvFloats, [&] { e.bytes().append(reinterpret_cast<const char*>(raw), v.nbytes()); });
    } else if (dt == DataType::Float64) {
      packed(f::kTvDoubles, [&] { e.bytes().append(reinterpret_cast<const char*>(raw), v.nbytes()); });
    } else if (is_int(dt)) {  // int16, uint16, int32 -> ints (int32 varints: negatives sign-extended)
      packed(f::kTvInts, [&] {
        for (int64_t i = 0; i < n; ++i)
          e.varint(static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(v.as_int(i)))));
      });
    } else {
      throw ValueError(what + ": cannot serialize dtype " + std::string(dtype_name(dt)));
    }
    e.close(tm);
    e.close(im);
    e.close(m);
  }

  // A var's value, immediate or blob; a blob is written once per var (coremltools caches file
  // values by "<block>_<var>", so a const shared by a const op and constexpr ops, or by
  // several constexpr ops, is stored once).
  void var_value(Enc& e, int field, const Var* v, const std::string& what) {
    auto it = blob_of_.find(v);
    if (it != blob_of_.end()) {
      e.tag(field, 2);
      e.varint(it->second.size());
      e.raw(it->second);
      return;
    }
    const size_t start = e.bytes().size();
    value(e, field, *v->value(), what);
    if (uses_weight_file(*v->value(), opt_.target)) {
      // the Value's body (after its tag and length) for later references
      std::string_view all(e.bytes().data() + start, e.bytes().size() - start);
      size_t k = 0;
      while (static_cast<uint8_t>(all[k]) & 0x80) ++k;  // tag
      ++k;
      while (static_cast<uint8_t>(all[k]) & 0x80) ++k;  // length
      ++k;
      blob_of_[v] = std::string(all.substr(k));
    }
  }

  // A map<string, Argument> entry binding one var by name.
  static void arg_by_name(Enc& e, std::string_view input, std::string_view var) {
    size_t m = e.open(f::kOpInputs);
    e.str_always(f::kMapKey, input);
    size_t am = e.open(f::kMapValue);
    size_t bm = e.open(f::kArgArguments);
    e.str_always(f::kBindName, var);  // a oneof member: written even when empty
    e.close(bm);
    e.close(am);
    e.close(m);
  }

  // coremltools' translate_constexpr: op classes of opset <= iOS17 carry every parameter as an
  // attribute value (no inputs); iOS18 classes bind each input to an inline value, or by name
  // when it is another constexpr op's output.
  void constexpr_params(const Operation& o, Enc& e) {
    const OpSchema& s = o.schema();
    const bool as_attributes = static_cast<int>(s.since) <= static_cast<int>(Target::iOS17);
    std::vector<std::pair<const std::string*, Var*>> attrs;  // written after the inputs
    for (size_t i = 0; i < o.num_inputs(); ++i) {
      VarSpan vs = o.input(i);
      if (vs.empty()) continue;
      const std::string& pname = s.inputs[i].name;
      Var* v = vs[0];
      const Operation* producer = v->op();
      const bool from_constexpr = producer && producer->schema().is_constexpr;
      if (as_attributes) {
        if (!v->value())
          throw ValueError(" parameter '" + pname + "' must be a const value to be serialized as an attribute (got '" +
                           v->name() + "')");
        attrs.emplace_back(&pname, v);
      } else if (from_constexpr || !v->value()) {
        if (!from_constexpr)
          throw ValueError(" input '" + pname + "' must be a const or a constexpr output (got '" + v->name() + "')");
        arg_by_name(e, pname, v->name());
      } else {
        size_t m = e.open(f::kOpInputs);
        e.str_always(f::kMapKey, pname);
        size_t am = e.open(f::kMapValue);
        size_t bm = e.open(f::kArgArguments);
        var_value(e, f::kBindValue, v, " input '" + pname + "'");
        e.close(bm);
        e.close(am);
        e.close(m);
      }
    }
    pending_attrs_ = std::move(attrs);
  }

  // coremltools' feeds_to_only_constexprs: a const used, and used only by constexpr ops, is not
  // emitted (its value is inlined into them). A const that is also a block output is kept.
  static bool feeds_only_constexprs(const Operation& o) {
    static const uint16_t kConst = op_type_id("const");
    if (o.type_id() != kConst) return false;
    const Var* v = o.output(0);
    if (v->uses().empty() || !v->block_uses().empty()) return false;
    for (const Use& u : v->uses())
      if (!u.op->schema().is_constexpr) return false;
    return true;
  }

  void op(const Operation& o, Enc& e) {
    // the op's description is built only when something fails (it is on the hot path)
    try {
      size_t m = e.open(f::kBlkOps);
      op_body(o, e);
      e.close(m);
    } catch (const ValueError& err) {
      std::string msg = err.what();
      while (!msg.empty() && (msg[0] == ':' || msg[0] == ' ')) msg.erase(0, 1);
      throw ValueError(o.describe() + ": " + msg);
    }
  }

  void op_body(const Operation& o, Enc& e) {
    static const std::string what;  // prefixed by op() on error
    if (!o.schema().dialect.empty())
      throw ValueError(" is a " + o.schema().dialect + " dialect op, which an ML Program cannot hold; run " +
                       (o.schema().dialect == "complex" ? "common::lower_complex_dialect_ops"
                                                        : "the pass that lowers it") +
                       " first (convert and PassPipeline.DEFAULT do)");
    static const uint16_t kConst = op_type_id("const"), kClassify = op_type_id("classify");
    e.str(f::kOpType, o.op_type());
    pending_attrs_.clear();
    const bool is_const = o.type_id() == kConst;
    if (is_const) {
      if (!o.output(0)->value()) throw ValueError(what + ": const without a value");
    } else if (o.schema().is_constexpr) {
      constexpr_params(o, e);
    } else {
      const OpSchema& s = o.schema();
      for (size_t i = 0; i < o.num_inputs(); ++i) {
        VarSpan vs = o.input(i);
        if (vs.empty()) continue;
        size_t m = e.open(f::kOpInputs);
        e.str_always(f::kMapKey, s.inputs[i].name);
        size_t am = e.open(f::kMapValue);
        if (o.type_id() == kClassify && s.inputs[i].name == "classes") {
          // coremltools binds classify's classes as a literal value, not by name
          if (!vs[0]->value()) throw ValueError(" input 'classes' (" + vs[0]->name() + ") must be a const list");
          size_t bm = e.open(f::kArgArguments);
          value(e, f::kBindValue, *vs[0]->value(), " input 'classes'");
          e.close(bm);
        } else {
          for (Var* v : vs) {
            // coremltools' _check_invalid_const_tensor_input: a const input must be bound to a
            // const or a constexpr output in the file (a dequantize of a constant, which the
            // builder accepts as coremltools does, must become constexpr_affine_dequantize first)
            if (s.inputs[i].is_const && !v->value() && !(v->op() && v->op()->schema().is_constexpr))
              throw ValueError(" input '" + s.inputs[i].name + "' (" + v->name() +
                               ") must be const or constexpr ops");
            size_t bm = e.open(f::kArgArguments);
            e.str_always(f::kBindName, v->name());
            e.close(bm);
          }
        }
        e.close(am);
        e.close(m);
      }
    }
    for (Var* v : o.outputs()) {
      size_t m = e.open(f::kOpOutputs);
      e.str(f::kNvtName, v->name());
      type(e, f::kNvtType, v->type());
      e.close(m);
    }
    // attributes: the name, a const's value, constexpr parameters, then the op's own (before the
    // nested blocks, so weights are written in the order they always were)
    string_attribute(e, f::kOpAttributes, "name", o.name());
    if (is_const) {
      size_t m = e.open(f::kOpAttributes);
      e.str_always(f::kMapKey, "val");
      var_value(e, f::kMapValue, o.output(0), what);
      e.close(m);
    }
    std::vector<std::pair<const std::string*, Var*>> attrs = std::move(pending_attrs_);
    for (auto& [pname, v] : attrs) {
      size_t m = e.open(f::kOpAttributes);
      e.str_always(f::kMapKey, *pname);
      var_value(e, f::kMapValue, v, " parameter '" + *pname + "'");
      e.close(m);
    }
    for (const auto& [k, v] : o.attributes()) {
      if (k == "name" || !v) continue;
      bool dup = k == "val" && is_const;
      for (auto& [pname, pv] : attrs) dup = dup || *pname == k;
      if (dup) continue;  // a map keeps one entry per key (the first one set, as before)
      size_t m = e.open(f::kOpAttributes);
      e.str_always(f::kMapKey, k);
      value(e, f::kMapValue, *v, what + " attribute '" + k + "'");
      e.close(m);
    }
    for (Block* b : o.blocks()) {
      size_t m = e.open(f::kOpBlocks);
      block(*b, e, true);
      e.close(m);
    }
  }

  void block(const Block& b, Enc& e, bool nested) {
    static const uint16_t kClassify = op_type_id("classify"), kConst = op_type_id("const"),
                          kUpdateState = op_type_id("coreml_update_state");
    if (nested)
      for (Var* v : b.inputs()) {
        size_t m = e.open(f::kBlkInputs);
        e.str(f::kNvtName, v->name());
        type(e, f::kNvtType, v->type());
        e.close(m);
      }
    for (Var* v : b.outputs()) e.str_always(f::kBlkOutputs, v->name());
    // coremltools' create_block: when the block ends with classify, the const holding its
    // classes is not written (its value is inlined into classify), and may feed nothing else
    const Operation* classes_const = nullptr;
    if (const Operation* last = b.back(); last && last->type_id() == kClassify) {
      const Var* cv = last->input1("classes");
      if (cv && cv->op() && cv->op()->type_id() == kConst) {
        if (cv->uses().size() != 1)
          throw ValueError(last->describe() + ": Classify's labels/classes should be input to only 1 op (classify), '" +
                           cv->name() + "' has " + std::to_string(cv->uses().size()) + " uses");
        classes_const = cv->op();
      }
    }
    for (Operation* o = b.front(); o; o = o->next()) {
      if (o == classes_const) continue;
      if (o->type_id() == kUpdateState)
        update_state(*o, e);
      else if (feeds_only_constexprs(*o))
        continue;
      else
        op(*o, e);
    }
  }

  // coremltools' translate_coreml_update_state_op: write_state(input=state, data=value) named
  // "<op>_write_state", then read_state(input=state) named <op> with the op's output, only
  // when that output is used.
  void update_state(const Operation& o, Enc& e) {
    if (static_cast<int>(opt_.target) < static_cast<int>(Target::iOS18))
      throw ValueError(o.describe() + ": states need minimum_deployment_target iOS18 or later (got " +
                       target_name(opt_.target) + ")");
    const OpSchema& s = o.schema();
    Var* state = o.input(static_cast<size_t>(s.input_index("state")))[0];
    Var* value = o.input(static_cast<size_t>(s.input_index("value")))[0];
    size_t w = e.open(f::kBlkOps);
    e.str(f::kOpType, "write_state");
    arg_by_name(e, "input", state->name());
    arg_by_name(e, "data", value->name());
    string_attribute(e, f::kOpAttributes, "name", o.name() + "_write_state");
    e.close(w);
    Var* res = o.output(0);
    if (!res->used()) return;
    size_t r = e.open(f::kBlkOps);
    e.str(f::kOpType, "read_state");
    arg_by_name(e, "input", state->name());
    size_t om = e.open(f::kOpOutputs);
    e.str(f::kNvtName, res->name());
    type(e, f::kNvtType, res->type());
    e.close(om);
    string_attribute(e, f::kOpAttributes, "name", o.name());
    e.close(r);
  }

  // A map<string, Function> entry of the Program.
  void function(const std::string& name, const Function& fn, Enc& e) {
    if (static_cast<int>(fn.opset()) > static_cast<int>(opt_.target))
      throw ValueError("function '" + name + "' is written in opset " + target_name(fn.opset()) +
                       ", newer than the deployment target " + target_name(opt_.target));
    size_t entry = e.open(f::kProgFunctions);
    e.str_always(f::kMapKey, name);
    size_t fm = e.open(f::kMapValue);
    for (Var* v : fn.inputs()) {
      if (v->type()->kind() == TypeKind::State && static_cast<int>(opt_.target) < static_cast<int>(Target::iOS18))
        throw ValueError("function '" + name + "': state input '" + v->name() +
                         "' needs minimum_deployment_target iOS18 or later (got " + target_name(opt_.target) + ")");
      size_t m = e.open(f::kFnInputs);
      e.str(f::kNvtName, v->name());
      type(e, f::kNvtType, v->type());
      e.close(m);
    }
    const std::string opset = opset_name(opt_.target);
    e.str(f::kFnOpset, opset);
    size_t bm = e.open(f::kFnBlocks);
    e.str_always(f::kMapKey, opset);
    size_t blk = e.open(f::kMapValue);
    block(fn.body(), e, false);
    e.close(blk);
    e.close(bm);
    e.close(fm);
    e.close(entry);
  }

  // ---- ModelDescription ------------------------------------------------------------------
  static spec::ArrayFeatureType_ArrayDataType io_dtype(const Var* v, bool output) {
    switch (v->type()->dtype()) {
      case DataType::Float32: return spec::ArrayFeatureType_ArrayDataType_FLOAT32;
      case DataType::Float16: return spec::ArrayFeatureType_ArrayDataType_FLOAT16;
      case DataType::Int32: return spec::ArrayFeatureType_ArrayDataType_INT32;
      case DataType::Int8: return spec::ArrayFeatureType_ArrayDataType_INT8;
      default:
        throw ValueError(std::string(output ? "output '" : "input '") + v->name() + "' has data type " +
                         std::string(dtype_name(v->type()->dtype())) +
                         "; ML Program models only support fp32, fp16, int32 and int8 " +
                         (output ? "outputs" : "inputs"));
    }
  }

  void input_feature(const Function& f, Var* v, spec::FeatureDescription* fd) {
    fd->set_name(v->name());
    const Type* t = v->type();
    auto* at = fd->mutable_type()->mutable_multiarraytype();
    if (t->kind() == TypeKind::State) {
      // coremltools: fixed shape, fp16 only
      const Type* w = t->elem();
      if (!w->has_rank()) throw ValueError("Variable rank model states are not supported! ('" + v->name() + "')");
      if (!w->is_static()) throw ValueError("Flexible shape model states are not supported! ('" + v->name() + "')");
      if (w->dtype() != DataType::Float16)
        throw ValueError("State only support fp16 dtype. Got input var " + v->name() + " with dtype " +
                         std::string(dtype_name(w->dtype())) + ".");
      fd->mutable_type()->clear_multiarraytype();
      at = fd->mutable_type()->mutable_statetype()->mutable_arraytype();
      for (Dim d : w->shape()) at->add_shape(d->value());
      at->set_datatype(spec::ArrayFeatureType_ArrayDataType_FLOAT16);
      return;
    }
    if (!t->is_tensor()) throw ValueError("input '" + v->name() + "' has unsupported type " + t->str());
    at->set_datatype(io_dtype(v, false));
    if (!t->has_rank()) throw ValueError("variable rank model inputs are not supported ('" + v->name() + "')");
    if (t->is_scalar()) {
      at->add_shape(1);
      return;
    }
    bool symbolic = !t->is_static();
    if (symbolic && enumerated_ && enumerated_->count(v->name())) {
      enumerated(v, enumerated_->at(v->name()), at);
      return;
    }
    spec::ArrayFeatureType_ShapeRange* range = symbolic ? at->mutable_shaperange() : nullptr;
    for (Dim d : t->shape()) {
      if (d->is_const()) {
        at->add_shape(d->value());
        if (range) {
          auto* r = range->add_sizeranges();
          r->set_lowerbound(static_cast<uint64_t>(d->value()));
          r->set_upperbound(d->value());
        }
        continue;
      }
      // symbolic: the symbol's range; an unbounded one gets coremltools' default [lo, lo + 1]
      Interval iv = f.ctx().range(d);
      int64_t lo = std::max<int64_t>(1, iv.lo == kNegInf ? 1 : iv.lo);
      int64_t hi = iv.hi == kPosInf ? lo + 1 : iv.hi;
      if (hi < lo) hi = lo;
      at->add_shape(lo);
      auto* r = range->add_sizeranges();
      r->set_lowerbound(static_cast<uint64_t>(lo));
      r->set_upperbound(hi);
    }
  }

  // coremltools' _add_multiarray_ndshape_enumeration_for_feature: shape = the default; the
  // shapes in order, the default moved first, duplicates skipped unless the target is iOS18+.
  void enumerated(Var* v, const EnumeratedShapesSpec& es, spec::ArrayFeatureType* at) {
    const size_t rank = static_cast<size_t>(v->type()->rank());
    if (es.shapes.empty()) throw ValueError("input '" + v->name() + "': enumerated shapes are empty");
    auto check = [&](const std::vector<int64_t>& s, const char* what) {
      if (s.size() != rank)
        throw ValueError("input '" + v->name() + "': " + what + " has rank " + std::to_string(s.size()) +
                         ", the input has rank " + std::to_string(rank));
      for (int64_t d : s)
        if (d < 1) throw ValueError("input '" + v->name() + "': " + what + " has a dimension below 1");
    };
    check(es.default_shape, "the default enumerated shape");
    const bool dups = static_cast<int>(opt_.target) >= static_cast<int>(Target::iOS18);
    std::vector<std::vector<int64_t>> shapes;
    for (const auto& s : es.shapes) {
      check(s, "an enumerated shape");
      if (!dups && std::find(shapes.begin(), shapes.end(), s) != shapes.end()) continue;
      if (s == es.default_shape)
        shapes.insert(shapes.begin(), s);
      else
        shapes.push_back(s);
    }
    if (std::find(shapes.begin(), shapes.end(), es.default_shape) == shapes.end())
      shapes.insert(shapes.begin(), es.default_shape);
    for (int64_t d : es.default_shape) at->add_shape(d);
    auto* en = at->mutable_enumeratedshapes();
    for (const auto& s : shapes) {
      auto* sh = en->add_shapes();
      for (int64_t d : s) sh->add_shape(d);
    }
  }

  /// Enumerated shapes apply to the function being described (the default one) only.
  void set_enumerated(const std::map<std::string, EnumeratedShapesSpec>* e) { enumerated_ = e; }

  static bool is_classify_output(const Var* v, int index) {
    return v->op() && v->op()->op_type() == "classify" && v->index() == index;
  }

  // ---- image features (coremltools' ImageType inputs and outputs) --------------------------
  static spec::ImageFeatureType_ColorSpace color_space(ColorLayout c) {
    switch (c) {
      case ColorLayout::RGB:
        return spec::ImageFeatureType_ColorSpace_RGB;
      case ColorLayout::BGR:
        return spec::ImageFeatureType_ColorSpace_BGR;
      case ColorLayout::Grayscale:
        return spec::ImageFeatureType_ColorSpace_GRAYSCALE;
      case ColorLayout::GrayscaleFloat16:
        return spec::ImageFeatureType_ColorSpace_GRAYSCALE_FLOAT16;
    }
    return spec::ImageFeatureType_ColorSpace_RGB;
  }

  static std::string dims_text(const std::vector<int64_t>& s, size_t n) {
    std::string out = "[";
    for (size_t i = 0; i < n && i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
  }

  // coremltools' _validate_image_input_output_shapes (-1: a symbolic dim), plus the tensor dtype
  // Core ML fills or reads (fp32; fp16 for GRAYSCALE_FLOAT16).
  static void check_image(ColorLayout c, const std::vector<int64_t>& shape, const Var* v,
                          bool input) {
    const std::string io = input ? "input" : "output";
    if (shape.size() != 4)
      throw ValueError("Image " + io + ", '" + v->name() +
                       "', must have rank 4. Instead it has rank " + std::to_string(shape.size()));
    const int64_t ch = color_channels(c);
    if (shape[0] != 1 || shape[1] != ch)
      throw ValueError(std::string("Shape of the ") + (ch == 3 ? "RGB/BGR" : "Grayscale") +
                       " image " + io + ", '" + v->name() + "', must be of kind (1, " +
                       std::to_string(ch) + ", H, W), i.e., first two dimensions must be (1, " +
                       std::to_string(ch) + "), instead they are: " + dims_text(shape, 2));
    const DataType want =
        c == ColorLayout::GrayscaleFloat16 ? DataType::Float16 : DataType::Float32;
    if (v->type()->dtype() != want)
      throw ValueError(
          "Image " + io + ", '" + v->name() + "' (" + color_layout_name(c) + ") must be " +
          std::string(dtype_name(want)) + " in the program, not " +
          std::string(dtype_name(v->type()->dtype())) +
          (input ? "" : "; cast it, or give outputs=[ImageType(...)] to convert, which casts it"));
  }

  // [lo, hi] written for a dim: a constant's value, or the symbol's range (an unbounded one gets
  // coremltools' default [lo, lo + 1]).
  static std::pair<int64_t, int64_t> dim_range(const Function& f, Dim d) {
    if (d->is_const()) return {d->value(), d->value()};
    Interval iv = f.ctx().range(d);
    int64_t lo = std::max<int64_t>(1, iv.lo == kNegInf ? 1 : iv.lo);
    int64_t hi = iv.hi == kPosInf ? lo + 1 : iv.hi;
    return {lo, std::max(hi, lo)};
  }

  // coremltools' CoreMLProtoExporter.get_func_input for an ImageType input.
  void image_input_feature(const Function& f, Var* v, const ImageInput& im,
                           spec::FeatureDescription* fd) {
    fd->set_name(v->name());
    const Type* t = v->type();
    if (!t->is_tensor() || t->is_scalar())
      throw ValueError("For the image input, '" + v->name() +
                       "', its type in the MIL program must be tensor. "
                       "Instead it is " +
                       t->str() + ".");
    if (!t->has_rank())
      throw ValueError("Variable rank model inputs are not supported! ('" + v->name() + "')");
    const bool symbolic = !t->is_static();
    std::vector<int64_t> shape;
    if (symbolic && im.default_shape.size() == t->shape().size()) {
      shape = im.default_shape;
    } else {
      for (Dim d : t->shape()) shape.push_back(dim_range(f, d).first);
    }
    check_image(im.color_layout, shape, v, true);
    if (!im.channel_first)
      throw ValueError("Image input, '" + v->name() +
                       "', must be in the channel_first format "
                       "(run common::image_input_preprocess)");
    bool pending = im.scale != 1;
    for (double b : im.bias) pending |= b != 0;
    if (pending)
      throw ValueError("image input '" + v->name() +
                       "' has a scale or bias that is not in the program yet (run "
                       "mil_backend::insert_image_preprocessing_ops, as milkit.convert does)");
    auto* it = fd->mutable_type()->mutable_imagetype();
    const size_t r = shape.size();
    it->set_width(shape[r - 1]);
    it->set_height(shape[r - 2]);
    it->set_colorspace(color_space(im.color_layout));
    if (!symbolic) return;
    if (!im.enumerated_shapes.empty()) {
      // _add_enumerated_image_sizes_for_feature: the sizes in order (duplicates skipped before
      // iOS18), the default size first when it is not among them
      const bool dups = static_cast<int>(opt_.target) >= static_cast<int>(Target::iOS18);
      std::vector<std::pair<int64_t, int64_t>> sizes;
      for (const auto& s : im.enumerated_shapes) {
        if (s.size() < 2)
          throw ValueError("image input '" + v->name() + "': enumerated shape " +
                           dims_text(s, s.size()) + " has rank below 2");
        std::pair<int64_t, int64_t> hw{s[s.size() - 2], s[s.size() - 1]};
        if (!dups && std::find(sizes.begin(), sizes.end(), hw) != sizes.end()) continue;
        sizes.push_back(hw);
      }
      std::pair<int64_t, int64_t> def{shape[r - 2], shape[r - 1]};
      if (std::find(sizes.begin(), sizes.end(), def) == sizes.end())
        sizes.insert(sizes.begin(), def);
      auto* en = it->mutable_enumeratedsizes();
      for (const auto& [h, w] : sizes) {
        auto* sz = en->add_sizes();
        sz->set_height(static_cast<uint64_t>(h));
        sz->set_width(static_cast<uint64_t>(w));
      }
      return;
    }
    auto* range = it->mutable_imagesizerange();
    auto [hlo, hhi] = dim_range(f, t->shape()[r - 2]);
    auto [wlo, whi] = dim_range(f, t->shape()[r - 1]);
    range->mutable_heightrange()->set_lowerbound(static_cast<uint64_t>(hlo));
    range->mutable_heightrange()->set_upperbound(hhi);
    range->mutable_widthrange()->set_lowerbound(static_cast<uint64_t>(wlo));
    range->mutable_widthrange()->set_upperbound(whi);
  }

  // coremltools' CoreMLProtoExporter.get_func_output for an ImageType output.
  void image_output_feature(Var* v, const ImageOutput& im, spec::FeatureDescription* fd) {
    fd->set_name(v->name());
    const Type* t = v->type();
    if (!t->is_tensor() || t->is_scalar())
      throw ValueError("Image output, '" + v->name() +
                       "', is a scalar, but it should be a tensor of rank 4");
    if (!t->has_rank())
      throw ValueError("Variable rank model outputs, that are ImageTypes, are not supported ('" +
                       v->name() + "')");
    std::vector<int64_t> shape;
    for (Dim d : t->shape()) shape.push_back(d->is_const() ? d->value() : -1);
    check_image(im.color_layout, shape, v, false);
    auto* it = fd->mutable_type()->mutable_imagetype();
    it->set_colorspace(color_space(im.color_layout));
    if (t->is_static()) {
      it->set_width(shape[3]);
      it->set_height(shape[2]);
      return;
    }
    // flexible: coremltools writes 1 x 1 with both ranges [1, unbounded]
    it->set_width(1);
    it->set_height(1);
    auto* range = it->mutable_imagesizerange();
    range->mutable_widthrange()->set_lowerbound(1);
    range->mutable_widthrange()->set_upperbound(-1);
    range->mutable_heightrange()->set_lowerbound(1);
    range->mutable_heightrange()->set_upperbound(-1);
  }

  void output_feature(Var* v, spec::FeatureDescription* fd) {
    fd->set_name(v->name());
    const Type* t = v->type();
    if (t->kind() == TypeKind::Dict) {
      // coremltools' get_func_output: a dictionary keyed by str or int64 (classify's probabilities)
      auto* dt = fd->mutable_type()->mutable_dictionarytype();
      const Type* k = t->key();
      if (k->is_scalar() && k->dtype() == DataType::String)
        dt->mutable_stringkeytype();
      else if (k->is_scalar() && k->dtype() == DataType::Int64)
        dt->mutable_int64keytype();
      else
        throw ValueError("output '" + v->name() + "': Dictionary key type not supported (" + k->str() + ")");
      return;
    }
    if (is_classify_output(v, 0) && t->is_scalar()) {
      // the predicted label is a primitive feature, not a multi-array (coremltools' classifier
      // description: stringType or int64Type by the type of the class labels)
      if (t->dtype() == DataType::Int64)
        fd->mutable_type()->mutable_int64type();
      else
        fd->mutable_type()->mutable_stringtype();
      return;
    }
    if (!t->is_tensor()) throw ValueError("output '" + v->name() + "' has unsupported type " + t->str());
    auto* at = fd->mutable_type()->mutable_multiarraytype();
    at->set_datatype(io_dtype(v, true));
    if (t->has_rank() && t->is_static() && !t->is_scalar())
      for (Dim d : t->shape()) at->add_shape(d->value());
  }

  template <class Desc>
  void describe(const Function& f, Desc* d) {
    for (size_t i = 0; i < f.inputs().size(); ++i) {
      Var* v = f.inputs()[i];
      if (v->type()->kind() == TypeKind::State)
        input_feature(f, v, d->add_state());
      else if (const ImageInput* im = f.image_input(i))
        image_input_feature(f, v, *im, d->add_input());
      else
        input_feature(f, v, d->add_input());
    }
    // a classifier: classify's label and probabilities are the predicted feature / probabilities
    for (Var* v : f.body().outputs()) {
      if (is_classify_output(v, 0)) d->set_predictedfeaturename(v->name());
      if (is_classify_output(v, 1)) d->set_predictedprobabilitiesname(v->name());
    }
    for (const ImageInput& im : f.image_inputs())
      if (im.input >= f.inputs().size())
        throw ValueError("image input index " + std::to_string(im.input) +
                         " is past the function's " + std::to_string(f.inputs().size()) +
                         " inputs");
    for (const ImageOutput& im : f.image_outputs())
      if (im.output >= f.body().outputs().size())
        throw ValueError("image output index " + std::to_string(im.output) +
                         " is past the function's " + std::to_string(f.body().outputs().size()) +
                         " outputs");
    for (size_t i = 0; i < f.body().outputs().size(); ++i) {
      Var* v = f.body().outputs()[i];
      if (const ImageOutput* im = f.image_output(i))
        image_output_feature(v, *im, d->add_output());
      else
        output_feature(v, d->add_output());
    }
  }

 private:
  const ProtoWriteOptions& opt_;
  std::unordered_map<const Type*, std::string> type_bytes_;  // encoded ValueType bodies
  std::unordered_map<const Var*, std::string> blob_of_;  // encoded blob Values already written, by var
  std::vector<std::pair<const std::string*, Var*>> pending_attrs_;  // constexpr parameters as attributes
  const std::map<std::string, EnumeratedShapesSpec>* enumerated_ = nullptr;
};

}  // namespace

bool uses_weight_file(const Value& v, Target target) {
  if (v.is_symbolic() || v.numel() < 10) return false;
  switch (v.dtype()) {
    case DataType::Float16:
    case DataType::Float32:
    case DataType::UInt8:
    case DataType::Int8:
    case DataType::Int4:
    case DataType::UInt1:
    case DataType::UInt2:
    case DataType::UInt3:
    case DataType::UInt4:
    case DataType::UInt6: return true;
    case DataType::UInt16:
    case DataType::Int16:
    case DataType::Int32:
    case DataType::UInt32: return static_cast<int>(target) >= static_cast<int>(Target::iOS18);
    default: return false;
  }
}

std::string write_model_proto(const Program& program, const ProtoWriteOptions& options) {
  const auto& fns = program.functions();
  if (fns.empty()) throw ValueError("cannot serialize a program without functions");
  const Function* main = program.function(program.default_function_name());
  if (!main)
    throw ValueError("default function '" + program.default_function_name() + "' not found in program");
  const bool multi = fns.size() > 1;
  if (multi && static_cast<int>(options.target) < static_cast<int>(Target::iOS18))
    throw ValueError("minimum_deployment_target for multi-functions export should be iOS18+, got " +
                     target_name(options.target));

  Writer w(options);
  // the MIL program first (blobs are written in op order), then the description
  std::string prog_bytes;
  size_t n_ops = 0;
  for (const auto& [name, fn] : fns) n_ops += fn->num_ops();
  prog_bytes.reserve(4096 + 192 * n_ops);  // typical op messages are 100 - 200 bytes
  Enc pe(prog_bytes);
  pe.uint(f::kProgVersion, 1);
  for (const auto& [name, fn] : fns) w.function(name, *fn, pe);

  google::protobuf::Arena arena;
  spec::ModelDescription& desc = *google::protobuf::Arena::CreateMessage<spec::ModelDescription>(&arena);
  for (const auto& [name, _] : options.enumerated_shapes) {
    bool found = false;
    for (Var* v : main->inputs()) found |= v->name() == name;
    if (!found) throw ValueError("enumerated shapes given for '" + name + "', which is not an input of function '" +
                                 program.default_function_name() + "'");
  }
  if (multi) {
    for (const auto& [name, fn] : fns) {
      auto* fd = desc.add_functions();
      fd->set_name(name);
      w.set_enumerated(fn.get() == main ? &options.enumerated_shapes : nullptr);
      w.describe(*fn, fd);
    }
    desc.set_defaultfunctionname(program.default_function_name());
  } else {
    w.set_enumerated(&options.enumerated_shapes);
    w.describe(*main, &desc);
  }

  // buildInfo (dict<string, string>) mirrored into metadata.userDefined
  std::map<std::string, std::string> info = program.attributes();
  if (!info.count("milkit-version")) info["milkit-version"] = kMilkitVersion;
  if (options.build_info) {
    size_t entry = pe.open(f::kProgAttributes);
    pe.str_always(f::kMapKey, "buildInfo");
    size_t vm = pe.open(f::kMapValue);
    size_t vt = pe.open(f::kValType);
    size_t dt = pe.open(f::kVtDict);
    tensor_value_type(pe, f::kDictKey, DataType::String, {});
    tensor_value_type(pe, f::kDictValue, DataType::String, {});
    pe.close(dt);
    pe.close(vt);
    size_t im = pe.open(f::kValImmediate);
    size_t dv = pe.open(f::kImmDict);
    auto* ud = desc.mutable_metadata()->mutable_userdefined();
    for (const auto& [k, v] : info) {
      size_t kv = pe.open(f::kDictValues);
      Writer::string_scalar(pe, f::kKvKey, k);
      Writer::string_scalar(pe, f::kKvValue, v);
      pe.close(kv);
      (*ud)[k] = v;
    }
    pe.close(dv);
    pe.close(im);
    pe.close(vm);
    pe.close(entry);
  }

  // Model: specificationVersion = 1, description = 2, mlProgram = 502
  std::string desc_bytes;
  if (options.description)
    desc_bytes = *options.description;
  else if (!desc.SerializeToString(&desc_bytes))
    throw ValueError("cannot serialize the model description");
  if (prog_bytes.size() > (size_t{1} << 31)) throw ValueError("cannot serialize the model proto (over 2 GiB)");
  std::string out;
  out.reserve(prog_bytes.size() + desc_bytes.size() + 32);
  Enc me(out);
  me.sint(1, static_cast<int>(options.target));
  me.str_always(2, desc_bytes);  // a message field: present even when empty
  me.str_always(502, prog_bytes);
  return out;
}

}  // namespace milkit

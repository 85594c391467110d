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

void set_tensor_type(mil::TensorType* tt, DataType dt, const std::vector<int64_t>& shape) {
  tt->set_datatype(static_cast<mil::DataType>(static_cast<int>(dt)));
  tt->set_rank(static_cast<int64_t>(shape.size()));
  for (int64_t d : shape) tt->add_dimensions()->mutable_constant()->set_size(static_cast<uint64_t>(d));
}

class Writer {
 public:
  Writer(const ProtoWriteOptions& o) : opt_(o) {}

  void type(const Type* t, mil::ValueType* out) {
    switch (t->kind()) {
      case TypeKind::Tensor: {
        if (is_complex(t->dtype()))
          throw ValueError("complex64 data cannot be written to an ML Program (Core ML has no complex type); "
                           "run common::lower_complex_dialect_ops first");
        auto* tt = out->mutable_tensortype();
        tt->set_datatype(static_cast<mil::DataType>(static_cast<int>(t->dtype())));
        if (!t->has_rank()) {  // pymil's variadic shape: one variadic unknown dim
          tt->set_rank(1);
          tt->add_dimensions()->mutable_unknown()->set_variadic(true);
          break;
        }
        tt->set_rank(t->rank());
        for (Dim d : t->shape()) {
          if (d->is_const())
            tt->add_dimensions()->mutable_constant()->set_size(static_cast<uint64_t>(d->value()));
          else
            tt->add_dimensions()->mutable_unknown()->set_variadic(
                d->kind() == Expr::Kind::Symbol && d->symbol()->variadic());
        }
        break;
      }
      case TypeKind::List: {
        auto* lt = out->mutable_listtype();
        type(t->elem(), lt->mutable_type());
        if (t->length() && t->length()->is_const())
          lt->mutable_length()->mutable_constant()->set_size(static_cast<uint64_t>(t->length()->value()));
        else
          lt->mutable_length()->mutable_unknown()->set_variadic(false);
        break;
      }
      case TypeKind::Tuple: {
        auto* tu = out->mutable_tupletype();
        for (const Type* e : t->elems()) type(e, tu->add_types());
        break;
      }
      case TypeKind::Dict:
        type(t->key(), out->mutable_dictionarytype()->mutable_keytype());
        type(t->value(), out->mutable_dictionarytype()->mutable_valuetype());
        break;
      case TypeKind::State: type(t->elem(), out->mutable_statetype()->mutable_wrappedtype()); break;
    }
  }

  static void string_scalar(const std::string& s, mil::Value* out) {
    set_tensor_type(out->mutable_type()->mutable_tensortype(), DataType::String, {});
    out->mutable_immediatevalue()->mutable_tensor()->mutable_strings()->add_values(s);
  }

  // coremltools' create_list_scalarvalue: a list of scalars (classify's classes) is a ListType
  // of rank-0 tensors with a constant length, and one immediate scalar Value per element.
  void list_value(const Value& v, mil::Value* out, const std::string& what) {
    const DataType dt = v.dtype();
    if (dt != DataType::String && dt != DataType::Int64)
      throw ValueError(what + ": List element type, " + std::string(dtype_name(dt)) +
                       ", not supported yet (lists of str or int64 only)");
    auto* lt = out->mutable_type()->mutable_listtype();
    set_tensor_type(lt->mutable_type()->mutable_tensortype(), dt, {});
    lt->mutable_length()->mutable_constant()->set_size(static_cast<uint64_t>(v.numel()));
    auto* lv = out->mutable_immediatevalue()->mutable_list();
    for (int64_t i = 0; i < v.numel(); ++i) {
      if (dt == DataType::String)
        string_scalar(v.string_values()[static_cast<size_t>(i)], lv->add_values());
      else
        value(Value::scalar_int(dt, v.as_int(i)), lv->add_values(), what);
    }
  }

  void value(const Value& v, mil::Value* out, const std::string& what) {
    const DataType dt = v.dtype();
    if (v.is_symbolic())
      throw ValueError(what + ": a symbolic value cannot be serialized");
    if (v.is_list()) {
      list_value(v, out, what);
      return;
    }
    if (dt == DataType::BFloat16 || dt == DataType::Float8E4M3FN || dt == DataType::Float8E5M2 ||
        dt == DataType::Unused)
      throw ValueError(what + ": consts of dtype " + std::string(dtype_name(dt)) +
                       " cannot be serialized in an ML Program (coremltools has no encoding for them)");
    set_tensor_type(out->mutable_type()->mutable_tensortype(), dt, v.shape());
    if (uses_weight_file(v, opt_.target)) {
      if (!opt_.weights) throw ValueError(what + ": needs a weight file but none was given");
      uint64_t off = opt_.weights().write(v);
      auto* fv = out->mutable_blobfilevalue();
      fv->set_filename(kWeightFileName);
      fv->set_offset(off);
      return;
    }
    auto* tv = out->mutable_immediatevalue()->mutable_tensor();
    const int64_t n = v.numel();
    const uint8_t* raw = v.raw();
    if (dt == DataType::String) {
      auto* f = tv->mutable_strings();
      for (const auto& s : v.string_values()) f->add_values(s);
    } else if (dt == DataType::Bool) {
      auto* f = tv->mutable_bools();
      for (int64_t i = 0; i < n; ++i) f->add_values(raw[i] != 0);
    } else if (is_byte_immediate(dt)) {
      auto* f = tv->mutable_bytes();
      if (is_sub_byte(dt)) {
        std::string packed((static_cast<size_t>(n) * dtype_bits(dt) + 7) / 8, '\0');
        pack_sub_byte(raw, static_cast<size_t>(n), dtype_bits(dt), reinterpret_cast<uint8_t*>(&packed[0]));
        f->set_values(std::move(packed));
      } else {
        f->set_values(reinterpret_cast<const char*>(raw), v.nbytes());
      }
    } else if (dt == DataType::Int64 || dt == DataType::UInt64) {
      auto* f = tv->mutable_longints();
      for (int64_t i = 0; i < n; ++i) {
        int64_t x;
        std::memcpy(&x, raw + 8 * i, 8);
        f->add_values(x);
      }
    } else if (dt == DataType::Float32) {
      auto* f = tv->mutable_floats();
      f->mutable_values()->Resize(static_cast<int>(n), 0.f);
      if (n) std::memcpy(f->mutable_values()->mutable_data(), raw, v.nbytes());
    } else if (dt == DataType::Float64) {
      auto* f = tv->mutable_doubles();
      f->mutable_values()->Resize(static_cast<int>(n), 0.0);
      if (n) std::memcpy(f->mutable_values()->mutable_data(), raw, v.nbytes());
    } else if (is_int(dt)) {  // int16, uint16, int32 -> ints
      auto* f = tv->mutable_ints();
      for (int64_t i = 0; i < n; ++i) f->add_values(static_cast<int32_t>(v.as_int(i)));
    } else {
      throw ValueError(what + ": cannot serialize dtype " + std::string(dtype_name(dt)));
    }
  }

  // A var's value, immediate or blob; a blob is written once per var (coremltools caches file
  // values by "<block>_<var>", so a const shared by a const op and constexpr ops, or by
  // several constexpr ops, is stored once).
  void var_value(const Var* v, mil::Value* out, const std::string& what) {
    auto it = blob_of_.find(v);
    if (it != blob_of_.end()) {
      *out = it->second;
      return;
    }
    value(*v->value(), out, what);
    if (out->has_blobfilevalue()) blob_of_[v] = *out;
  }

  // coremltools' translate_constexpr: op classes of opset <= iOS17 carry every parameter as an
  // attribute value (no inputs); iOS18 classes bind each input to an inline value, or by name
  // when it is another constexpr op's output.
  void constexpr_params(const Operation& o, mil::Operation* out) {
    const OpSchema& s = o.schema();
    const bool as_attributes = static_cast<int>(s.since) <= static_cast<int>(Target::iOS17);
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
        var_value(v, &(*out->mutable_attributes())[pname], " parameter '" + pname + "'");
      } else if (from_constexpr || !v->value()) {
        if (!from_constexpr)
          throw ValueError(" input '" + pname + "' must be a const or a constexpr output (got '" + v->name() + "')");
        (*out->mutable_inputs())[pname].add_arguments()->set_name(v->name());
      } else {
        var_value(v, (*out->mutable_inputs())[pname].add_arguments()->mutable_value(), " input '" + pname + "'");
      }
    }
  }

  // coremltools' feeds_to_only_constexprs: a const used, and used only by constexpr ops, is not
  // emitted (its value is inlined into them). A const that is also a block output is kept.
  static bool feeds_only_constexprs(const Operation& o) {
    if (o.op_type() != "const") return false;
    const Var* v = o.output(0);
    if (v->uses().empty() || !v->block_uses().empty()) return false;
    for (const Use& u : v->uses())
      if (!u.op->schema().is_constexpr) return false;
    return true;
  }

  void op(const Operation& o, mil::Operation* out) {
    // the op's description is built only when something fails (it is on the hot path)
    try {
      op_body(o, out);
    } catch (const ValueError& e) {
      std::string msg = e.what();
      while (!msg.empty() && (msg[0] == ':' || msg[0] == ' ')) msg.erase(0, 1);
      throw ValueError(o.describe() + ": " + msg);
    }
  }

  void op_body(const Operation& o, mil::Operation* out) {
    static const std::string what;  // prefixed by op() on error
    if (!o.schema().dialect.empty())
      throw ValueError(" is a " + o.schema().dialect + " dialect op, which an ML Program cannot hold; run " +
                       (o.schema().dialect == "complex" ? "common::lower_complex_dialect_ops"
                                                        : "the pass that lowers it") +
                       " first (convert and PassPipeline.DEFAULT do)");
    out->set_type(o.op_type());
    string_scalar(o.name(), &(*out->mutable_attributes())["name"]);
    if (o.op_type() == "const") {
      Var* v = o.output(0);
      if (!v->value()) throw ValueError(what + ": const without a value");
      var_value(v, &(*out->mutable_attributes())["val"], what);
    } else if (o.schema().is_constexpr) {
      constexpr_params(o, out);
    } else {
      const OpSchema& s = o.schema();
      for (size_t i = 0; i < o.num_inputs(); ++i) {
        VarSpan vs = o.input(i);
        if (vs.empty()) continue;
        auto& arg = (*out->mutable_inputs())[s.inputs[i].name];
        if (o.op_type() == "classify" && s.inputs[i].name == "classes") {
          // coremltools binds classify's classes as a literal value, not by name
          if (!vs[0]->value()) throw ValueError(" input 'classes' (" + vs[0]->name() + ") must be a const list");
          value(*vs[0]->value(), arg.add_arguments()->mutable_value(), " input 'classes'");
          continue;
        }
        for (Var* v : vs) {
          // coremltools' _check_invalid_const_tensor_input: a const input must be bound to a
          // const or a constexpr output in the file (a dequantize of a constant, which the
          // builder accepts as coremltools does, must become constexpr_affine_dequantize first)
          if (s.inputs[i].is_const && !v->value() && !(v->op() && v->op()->schema().is_constexpr))
            throw ValueError(" input '" + s.inputs[i].name + "' (" + v->name() +
                             ") must be const or constexpr ops");
          arg.add_arguments()->set_name(v->name());
        }
      }
    }
    for (const auto& [k, v] : o.attributes()) {
      if (k == "name" || !v) continue;
      value(*v, &(*out->mutable_attributes())[k], what + " attribute '" + k + "'");
    }
    for (Var* v : o.outputs()) {
      auto* nvt = out->add_outputs();
      nvt->set_name(v->name());
      type(v->type(), nvt->mutable_type());
    }
    for (Block* b : o.blocks()) block(*b, out->add_blocks(), true);
  }

  void block(const Block& b, mil::Block* out, bool nested) {
    if (nested)
      for (Var* v : b.inputs()) {
        auto* nvt = out->add_inputs();
        nvt->set_name(v->name());
        type(v->type(), nvt->mutable_type());
      }
    // coremltools' create_block: when the block ends with classify, the const holding its
    // classes is not written (its value is inlined into classify), and may feed nothing else
    const Operation* classes_const = nullptr;
    if (const Operation* last = b.back(); last && last->op_type() == "classify") {
      const Var* cv = last->input1("classes");
      if (cv && cv->op() && cv->op()->op_type() == "const") {
        if (cv->uses().size() != 1)
          throw ValueError(last->describe() + ": Classify's labels/classes should be input to only 1 op (classify), '" +
                           cv->name() + "' has " + std::to_string(cv->uses().size()) + " uses");
        classes_const = cv->op();
      }
    }
    for (Operation* o = b.front(); o; o = o->next()) {
      if (o == classes_const) continue;
      if (o->op_type() == "coreml_update_state")
        update_state(*o, out);
      else if (feeds_only_constexprs(*o))
        continue;
      else
        op(*o, out->add_operations());
    }
    for (Var* v : b.outputs()) out->add_outputs(v->name());
  }

  // coremltools' translate_coreml_update_state_op: write_state(input=state, data=value) named
  // "<op>_write_state", then read_state(input=state) named <op> with the op's output, only
  // when that output is used.
  void update_state(const Operation& o, mil::Block* out) {
    if (static_cast<int>(opt_.target) < static_cast<int>(Target::iOS18))
      throw ValueError(o.describe() + ": states need minimum_deployment_target iOS18 or later (got " +
                       target_name(opt_.target) + ")");
    const OpSchema& s = o.schema();
    Var* state = o.input(static_cast<size_t>(s.input_index("state")))[0];
    Var* value = o.input(static_cast<size_t>(s.input_index("value")))[0];
    mil::Operation* w = out->add_operations();
    w->set_type("write_state");
    (*w->mutable_inputs())["input"].add_arguments()->set_name(state->name());
    (*w->mutable_inputs())["data"].add_arguments()->set_name(value->name());
    string_scalar(o.name() + "_write_state", &(*w->mutable_attributes())["name"]);
    Var* res = o.output(0);
    if (!res->used()) return;
    mil::Operation* rd = out->add_operations();
    rd->set_type("read_state");
    (*rd->mutable_inputs())["input"].add_arguments()->set_name(state->name());
    string_scalar(o.name(), &(*rd->mutable_attributes())["name"]);
    auto* nvt = rd->add_outputs();
    nvt->set_name(res->name());
    type(res->type(), nvt->mutable_type());
  }

  void function(const std::string& name, const Function& f, mil::Function* out) {
    if (static_cast<int>(f.opset()) > static_cast<int>(opt_.target))
      throw ValueError("function '" + name + "' is written in opset " + target_name(f.opset()) +
                       ", newer than the deployment target " + target_name(opt_.target));
    for (Var* v : f.inputs()) {
      if (v->type()->kind() == TypeKind::State && static_cast<int>(opt_.target) < static_cast<int>(Target::iOS18))
        throw ValueError("function '" + name + "': state input '" + v->name() +
                         "' needs minimum_deployment_target iOS18 or later (got " + target_name(opt_.target) + ")");
      auto* nvt = out->add_inputs();
      nvt->set_name(v->name());
      type(v->type(), nvt->mutable_type());
    }
    const std::string opset = opset_name(opt_.target);
    out->set_opset(opset);
    block(f.body(), &(*out->mutable_block_specializations())[opset], false);
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
  std::unordered_map<const Var*, mil::Value> blob_of_;  // blob values already written, by var
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
  // an arena makes building and dropping the (large) message cheap
  google::protobuf::Arena arena;
  spec::Model& model = *google::protobuf::Arena::CreateMessage<spec::Model>(&arena);
  model.set_specificationversion(static_cast<int>(options.target));
  // the MIL program first (blobs are written in op order), then the description
  auto* prog = model.mutable_mlprogram();
  prog->set_version(1);
  for (const auto& [name, f] : fns) w.function(name, *f, &(*prog->mutable_functions())[name]);
  auto* desc = model.mutable_description();
  for (const auto& [name, _] : options.enumerated_shapes) {
    bool found = false;
    for (Var* v : main->inputs()) found |= v->name() == name;
    if (!found) throw ValueError("enumerated shapes given for '" + name + "', which is not an input of function '" +
                                 program.default_function_name() + "'");
  }
  if (multi) {
    for (const auto& [name, f] : fns) {
      auto* fd = desc->add_functions();
      fd->set_name(name);
      w.set_enumerated(f.get() == main ? &options.enumerated_shapes : nullptr);
      w.describe(*f, fd);
    }
    desc->set_defaultfunctionname(program.default_function_name());
  } else {
    w.set_enumerated(&options.enumerated_shapes);
    w.describe(*main, desc);
  }

  // buildInfo (dict<string, string>) mirrored into metadata.userDefined
  std::map<std::string, std::string> info = program.attributes();
  if (!info.count("milkit-version")) info["milkit-version"] = kMilkitVersion;
  mil::Value& bi = (*prog->mutable_attributes())["buildInfo"];
  auto* dt = bi.mutable_type()->mutable_dictionarytype();
  set_tensor_type(dt->mutable_keytype()->mutable_tensortype(), DataType::String, {});
  set_tensor_type(dt->mutable_valuetype()->mutable_tensortype(), DataType::String, {});
  auto* dict = bi.mutable_immediatevalue()->mutable_dictionary();
  auto* ud = desc->mutable_metadata()->mutable_userdefined();
  for (const auto& [k, v] : info) {
    auto* kv = dict->add_values();
    Writer::string_scalar(k, kv->mutable_key());
    Writer::string_scalar(v, kv->mutable_value());
    (*ud)[k] = v;
  }

  std::string out;
  if (!model.SerializeToString(&out)) throw ValueError("cannot serialize the model proto (over 2 GiB?)");
  return out;
}

}  // namespace milkit

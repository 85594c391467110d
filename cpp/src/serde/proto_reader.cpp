// Model proto -> Program: every op is rebuilt through the Builder (coremltools' milproto loader
// does the same with mb.<op>), then checked against the proto's declared output types.
#include "milkit/serde/proto_reader.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "MIL.pb.h"
#include "Model.pb.h"
#include "milkit/builder/builder.h"
#include "milkit/serde/blob.h"
#include "milkit/types/error.h"

namespace milkit {

namespace spec = CoreML::Specification;
namespace mil = CoreML::Specification::MILSpec;

namespace {

using Ranges = std::unordered_map<std::string, const spec::FeatureDescription*>;

class Reader {
 public:
  Reader(const BlobResolver& blobs, std::string source, Target target)
      : blobs_(blobs), src_(std::move(source)), target_(target) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw FormatError(src_ + ": " + where + ": " + what);
  }

  DataType dtype_of(int code, const std::string& where) const {
    if (code == 0 || !is_valid_dtype_code(code)) fail(where, "invalid data type code " + std::to_string(code));
    return static_cast<DataType>(code);
  }

  // Shape of a value's tensor type: every dim must be a constant.
  std::vector<int64_t> const_shape(const mil::TensorType& tt, const std::string& where) const {
    if (tt.rank() < 0 || tt.rank() != tt.dimensions_size())
      fail(where, "tensor rank " + std::to_string(tt.rank()) + " does not match its " +
                      std::to_string(tt.dimensions_size()) + " dimensions");
    std::vector<int64_t> shape;
    shape.reserve(static_cast<size_t>(tt.dimensions_size()));
    for (const auto& d : tt.dimensions()) {
      if (d.dimension_case() != mil::Dimension::kConstant) fail(where, "a value must have a static shape");
      uint64_t s = d.constant().size();
      if (s > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail(where, "dimension too large");
      shape.push_back(static_cast<int64_t>(s));
    }
    try {
      shape_numel(shape);
    } catch (const ValueError& e) {
      fail(where, e.what());
    }
    return shape;
  }

  // A declared type; unknown dims become fresh symbols.
  const Type* type(Context& ctx, const mil::ValueType& vt, const std::string& where, int depth = 0) {
    if (depth > 32) fail(where, "type nested too deeply");
    switch (vt.type_case()) {
      case mil::ValueType::kTensorType: {
        const auto& tt = vt.tensortype();
        DataType dt = dtype_of(tt.datatype(), where);
        if (tt.rank() < 0 || tt.rank() != tt.dimensions_size())
          fail(where, "tensor rank " + std::to_string(tt.rank()) + " does not match its " +
                          std::to_string(tt.dimensions_size()) + " dimensions");
        if (!tt.attributes().empty()) fail(where, "attributes on a tensor type are not supported");
        std::vector<Dim> dims;
        for (const auto& d : tt.dimensions()) {
          if (d.dimension_case() == mil::Dimension::kConstant) {
            uint64_t s = d.constant().size();
            if (s > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail(where, "dimension too large");
            dims.push_back(ctx.constant(static_cast<int64_t>(s)));
          } else if (d.dimension_case() == mil::Dimension::kUnknown) {
            if (d.unknown().variadic()) return ctx.tensor_unknown_rank(dt);
            dims.push_back(ctx.fresh());
          } else {
            fail(where, "dimension with neither a constant nor an unknown size");
          }
        }
        return ctx.tensor(dt, dims);
      }
      case mil::ValueType::kListType: {
        const auto& lt = vt.listtype();
        const Type* e = type(ctx, lt.type(), where, depth + 1);
        Dim len = nullptr;
        if (lt.length().dimension_case() == mil::Dimension::kConstant) {
          uint64_t s = lt.length().constant().size();
          if (s > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail(where, "list length too large");
          len = ctx.constant(static_cast<int64_t>(s));
        }
        return ctx.list(e, len, true);
      }
      case mil::ValueType::kTupleType: {
        std::vector<const Type*> es;
        for (const auto& t : vt.tupletype().types()) es.push_back(type(ctx, t, where, depth + 1));
        return ctx.tuple(es);
      }
      case mil::ValueType::kDictionaryType:
        return ctx.dict(type(ctx, vt.dictionarytype().keytype(), where, depth + 1),
                        type(ctx, vt.dictionarytype().valuetype(), where, depth + 1));
      case mil::ValueType::kStateType: {
        const Type* w = type(ctx, vt.statetype().wrappedtype(), where, depth + 1);
        if (!w->is_tensor()) fail(where, "a state must wrap a tensor");
        return ctx.state(w);
      }
      default: fail(where, "value type not set");
    }
  }

  // An immediate list of scalars (coremltools' create_list_scalarvalue: classify's classes).
  std::shared_ptr<const Value> list_value(const mil::Value& pv, const std::string& where) {
    const auto& lt = pv.type().listtype();
    if (lt.type().type_case() != mil::ValueType::kTensorType || lt.type().tensortype().rank() != 0 ||
        lt.type().tensortype().dimensions_size() != 0)
      fail(where, "only lists of scalars are supported as values");
    const DataType dt = dtype_of(lt.type().tensortype().datatype(), where);
    if (pv.value_case() != mil::Value::kImmediateValue ||
        pv.immediatevalue().value_case() != mil::Value::ImmediateValue::kList)
      fail(where, "a list value must be an immediate list");
    const auto& items = pv.immediatevalue().list().values();
    if (lt.length().dimension_case() == mil::Dimension::kConstant &&
        lt.length().constant().size() != static_cast<uint64_t>(items.size()))
      fail(where, "list holds " + std::to_string(items.size()) + " values, its type declares length " +
                      std::to_string(lt.length().constant().size()));
    std::vector<std::string> strs;
    std::vector<int64_t> ints;
    std::vector<double> doubles;
    for (int i = 0; i < items.size(); ++i) {
      const std::string ew = where + ", list element " + std::to_string(i);
      if (items[i].type().type_case() != mil::ValueType::kTensorType) fail(ew, "a list element must be a scalar");
      auto e = value(items[i], ew);
      if (e->rank() != 0 || e->dtype() != dt)
        fail(ew, "element of type " + std::string(dtype_name(e->dtype())) + " (rank " + std::to_string(e->rank()) +
                     ") in a list of " + std::string(dtype_name(dt)) + " scalars");
      if (dt == DataType::String) strs.push_back(e->string_values()[0]);
      else if (is_float(dt)) doubles.push_back(e->as_double(0));
      else ints.push_back(e->as_int(0));
    }
    const std::vector<int64_t> shape{static_cast<int64_t>(items.size())};
    if (dt == DataType::String) return std::make_shared<const Value>(Value::list_of(Value::strings(shape, strs)));
    if (is_float(dt)) return std::make_shared<const Value>(Value::list_of(Value::from_doubles(dt, shape, doubles)));
    return std::make_shared<const Value>(Value::list_of(Value::from_ints(dt, shape, ints)));
  }

  std::shared_ptr<const Value> value(const mil::Value& pv, const std::string& where) {
    if (pv.type().type_case() == mil::ValueType::kListType) return list_value(pv, where);
    if (pv.type().type_case() != mil::ValueType::kTensorType)
      fail(where, "only tensor and list values are supported");
    const auto& tt = pv.type().tensortype();
    DataType dt = dtype_of(tt.datatype(), where);
    std::vector<int64_t> shape = const_shape(tt, where);
    const int64_t n = shape_numel(shape);
    if (pv.value_case() == mil::Value::kBlobFileValue) {
      const auto& fv = pv.blobfilevalue();
      if (!blobs_) fail(where, "blob value but no weight file");
      auto reader = blobs_(fv.filename());
      try {
        return std::make_shared<const Value>(reader->read(fv.offset(), dt, shape));
      } catch (const FormatError& e) {
        fail(where, e.what());
      }
    }
    if (pv.value_case() != mil::Value::kImmediateValue) fail(where, "value has neither an immediate nor a blob");
    const auto& iv = pv.immediatevalue();
    if (iv.value_case() != mil::Value::ImmediateValue::kTensor)
      fail(where, "only immediate tensor values are supported");
    const auto& tv = iv.tensor();
    auto count_is = [&](int64_t c, const char* field) {
      if (c != n)
        fail(where, std::string(field) + " holds " + std::to_string(c) + " elements, the declared shape needs " +
                        std::to_string(n) + " of " + std::string(dtype_name(dt)));
    };
    auto wrong_field = [&](const char* field) {
      fail(where, std::string("dtype ") + std::string(dtype_name(dt)) + " cannot be read from the '" + field + "' field");
    };
    try {
      switch (tv.value_case()) {
        case mil::TensorValue::kFloats: {
          const auto& f = tv.floats().values();
          if (!is_float(dt)) wrong_field("floats");
          count_is(f.size(), "floats");
          if (dt == DataType::Float32)
            return std::make_shared<const Value>(dt, shape, Buffer::copy(f.data(), sizeof(float) * f.size()));
          return std::make_shared<const Value>(Value::from_doubles(dt, shape, std::vector<double>(f.begin(), f.end())));
        }
        case mil::TensorValue::kDoubles: {
          const auto& f = tv.doubles().values();
          if (!is_float(dt)) wrong_field("doubles");
          count_is(f.size(), "doubles");
          return std::make_shared<const Value>(Value::from_doubles(dt, shape, std::vector<double>(f.begin(), f.end())));
        }
        case mil::TensorValue::kInts: {
          const auto& f = tv.ints().values();
          if (!is_int(dt) && dt != DataType::Bool) wrong_field("ints");
          count_is(f.size(), "ints");
          return std::make_shared<const Value>(Value::from_ints(dt, shape, std::vector<int64_t>(f.begin(), f.end())));
        }
        case mil::TensorValue::kLongInts: {
          const auto& f = tv.longints().values();
          if (!is_int(dt)) wrong_field("longInts");
          count_is(f.size(), "longInts");
          if (dt == DataType::Int64 || dt == DataType::UInt64)
            return std::make_shared<const Value>(dt, shape, Buffer::copy(f.data(), sizeof(int64_t) * f.size()));
          return std::make_shared<const Value>(Value::from_ints(dt, shape, std::vector<int64_t>(f.begin(), f.end())));
        }
        case mil::TensorValue::kBools: {
          const auto& f = tv.bools().values();
          if (dt != DataType::Bool) wrong_field("bools");
          count_is(f.size(), "bools");
          std::vector<uint8_t> b(f.begin(), f.end());
          return std::make_shared<const Value>(dt, shape, Buffer::take(std::move(b)));
        }
        case mil::TensorValue::kStrings: {
          const auto& f = tv.strings().values();
          if (dt != DataType::String) wrong_field("strings");
          count_is(f.size(), "strings");
          return std::make_shared<const Value>(Value::strings(shape, std::vector<std::string>(f.begin(), f.end())));
        }
        case mil::TensorValue::kBytes: {
          const std::string& b = tv.bytes().values();
          if (dt == DataType::String || dt == DataType::Bool) wrong_field("bytes");
          if (is_sub_byte(dt)) {
            const int bits = dtype_bits(dt);
            // overflow-safe: compare in bits against the bytes present
            if (static_cast<uint64_t>(n) > static_cast<uint64_t>(b.size()) * 8 ||
                (static_cast<uint64_t>(n) * bits + 7) / 8 != b.size())
              fail(where, "bytes holds " + std::to_string(b.size()) + " bytes, the declared shape needs " +
                              std::to_string(n) + " packed " + std::string(dtype_name(dt)) + " elements");
            std::vector<uint8_t> out(static_cast<size_t>(n));
            unpack_sub_byte(reinterpret_cast<const uint8_t*>(b.data()), static_cast<size_t>(n), bits,
                            dt == DataType::Int4, out.data());
            return std::make_shared<const Value>(dt, shape, Buffer::take(std::move(out)));
          }
          const uint64_t w = static_cast<uint64_t>(dtype_storage_bytes(dt));
          if (static_cast<uint64_t>(n) > b.size() || static_cast<uint64_t>(n) * w != b.size())
            fail(where, "bytes holds " + std::to_string(b.size()) + " bytes, the declared shape needs " +
                            std::to_string(n) + " elements of " + std::string(dtype_name(dt)));
          return std::make_shared<const Value>(dt, shape, Buffer::copy(b.data(), b.size()));
        }
        default:
          if (n != 0) fail(where, "tensor value has no data");
          if (dt == DataType::String) return std::make_shared<const Value>(Value::strings(shape, {}));
          return std::make_shared<const Value>(dt, shape, Buffer::take({}));
      }
    } catch (const FormatError&) {
      throw;
    } catch (const Error& e) {
      fail(where, e.what());
    }
  }

  std::string string_value(const mil::Value& v, const std::string& where) {
    auto val = value(v, where);
    if (val->dtype() != DataType::String || val->numel() != 1 || val->is_list()) fail(where, "expected a string scalar");
    return val->string_values()[0];
  }

  void function(
      Program& prog, const std::string& name, const mil::Function& pf, const Ranges& ranges,
      const google::protobuf::RepeatedPtrField<spec::FeatureDescription>* outputs = nullptr) {
    const std::string fwhere = "function '" + name + "'";
    if (!pf.attributes().empty()) fail(fwhere, "attributes on functions are not supported");
    auto it = pf.block_specializations().find(pf.opset());
    if (it == pf.block_specializations().end())
      fail(fwhere, "missing block specialization for opset '" + pf.opset() + "'");
    if (!target_from_opset(pf.opset())) fail(fwhere, "unknown opset '" + pf.opset() + "'");
    auto f = std::make_shared<Function>(target_);
    Context& ctx = f->ctx();
    scope_.clear();
    defined_log_.clear();
    std::unordered_set<std::string> defined_anywhere;
    collect_names(it->second, defined_anywhere);
    for (const auto& in : pf.inputs()) {
      const std::string w = fwhere + ", input '" + in.name() + "'";
      if (in.name().empty()) fail(w, "input without a name");
      if (scope_.count(in.name())) fail(w, "duplicate input name");
      const Type* t = input_type(ctx, in, ranges, w);
      ctx.reserve_name(in.name());
      define(in.name(), f->add_input(in.name(), t));
    }
    for (const auto& n : defined_anywhere) ctx.reserve_name(n);
    Builder b(*f);
    block(b, *f, it->second, fwhere);
    image_inputs(*f, ranges, fwhere);
    if (outputs) {
      const auto& outs = f->body().outputs();
      for (const auto& fd : *outputs) {
        if (!fd.type().has_imagetype()) continue;
        for (size_t i = 0; i < outs.size(); ++i)
          if (outs[i]->name() == fd.name())
            f->image_outputs().push_back(
                ImageOutput{i, layout_of(fd.type().imagetype().colorspace(),
                                         fwhere + ", output '" + fd.name() + "'")});
      }
    }
    prog.add_function(name, f);
  }

  ColorLayout layout_of(int color_space, const std::string& w) {
    switch (color_space) {
      case spec::ImageFeatureType_ColorSpace_RGB:
        return ColorLayout::RGB;
      case spec::ImageFeatureType_ColorSpace_BGR:
        return ColorLayout::BGR;
      case spec::ImageFeatureType_ColorSpace_GRAYSCALE:
        return ColorLayout::Grayscale;
      case spec::ImageFeatureType_ColorSpace_GRAYSCALE_FLOAT16:
        return ColorLayout::GrayscaleFloat16;
      default:
        fail(w, "image feature with invalid color space " + std::to_string(color_space));
    }
    return ColorLayout::RGB;
  }

  // Image inputs of the description: channel first, no preprocessing left (the program holds it);
  // enumerated sizes and the default size kept for writing the description again.
  void image_inputs(Function& f, const Ranges& ranges, const std::string& fwhere) {
    for (size_t i = 0; i < f.inputs().size(); ++i) {
      Var* v = f.inputs()[i];
      auto r = ranges.find(v->name());
      if (r == ranges.end() || !r->second->type().has_imagetype()) continue;
      const std::string w = fwhere + ", image input '" + v->name() + "'";
      const auto& it = r->second->type().imagetype();
      const Type* t = v->type();
      if (!t->is_tensor() || t->rank() < 2)
        fail(w, "an image input must be a tensor of rank 4, got " + t->str());
      ImageInput im;
      im.input = i;
      im.color_layout = layout_of(it.colorspace(), w);
      auto full = [&](int64_t h, int64_t wd) {
        std::vector<int64_t> s;
        for (Dim d : t->shape()) s.push_back(d->is_const() ? d->value() : 1);
        s[s.size() - 2] = h;
        s[s.size() - 1] = wd;
        return s;
      };
      if (!t->is_static()) {
        im.default_shape = full(it.height(), it.width());
        if (it.has_enumeratedsizes())
          for (const auto& sz : it.enumeratedsizes().sizes())
            im.enumerated_shapes.push_back(
                full(static_cast<int64_t>(sz.height()), static_cast<int64_t>(sz.width())));
      }
      f.image_inputs().push_back(std::move(im));
    }
  }

  const Type* input_type(Context& ctx, const mil::NamedValueType& in, const Ranges& ranges, const std::string& w) {
    const auto& vt = in.type();
    if (vt.type_case() == mil::ValueType::kStateType) return type(ctx, vt, w);
    if (vt.type_case() != mil::ValueType::kTensorType) fail(w, "function inputs must be tensors or states");
    const auto& tt = vt.tensortype();
    DataType dt = dtype_of(tt.datatype(), w);
    if (tt.rank() < 0 || tt.rank() != tt.dimensions_size())
      fail(w, "tensor rank " + std::to_string(tt.rank()) + " does not match its " +
                  std::to_string(tt.dimensions_size()) + " dimensions");
    const spec::ArrayFeatureType* at = nullptr;
    if (auto r = ranges.find(in.name()); r != ranges.end() && r->second->type().has_multiarraytype())
      at = &r->second->type().multiarraytype();
    // an image input's flexible height and width (the last two dims)
    const spec::ImageFeatureType_ImageSizeRange* image_range = nullptr;
    if (auto r = ranges.find(in.name()); r != ranges.end() && r->second->type().has_imagetype() &&
                                         r->second->type().imagetype().has_imagesizerange())
      image_range = &r->second->type().imagetype().imagesizerange();
    std::vector<Dim> dims;
    for (int i = 0; i < tt.dimensions_size(); ++i) {
      const auto& d = tt.dimensions(i);
      if (d.dimension_case() == mil::Dimension::kConstant) {
        uint64_t s = d.constant().size();
        if (s > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail(w, "dimension too large");
        dims.push_back(ctx.constant(static_cast<int64_t>(s)));
        continue;
      }
      if (d.dimension_case() != mil::Dimension::kUnknown || d.unknown().variadic())
        fail(w, "variadic or unset input dimensions are not supported");
      auto sym = Symbol::fresh();
      const spec::SizeRange* range = nullptr;
      if (at && at->has_shaperange() && i < at->shaperange().sizeranges_size())
        range = &at->shaperange().sizeranges(i);
      if (image_range && i == tt.dimensions_size() - 2) range = &image_range->heightrange();
      if (image_range && i == tt.dimensions_size() - 1) range = &image_range->widthrange();
      if (range) {
        const auto& sr = *range;
        int64_t lo = static_cast<int64_t>(std::min<uint64_t>(sr.lowerbound(), static_cast<uint64_t>(kPosInf)));
        int64_t hi = sr.upperbound() < 0 ? kPosInf : sr.upperbound();
        if (lo < 1) lo = 1;
        if (lo == 1 && hi == 2) hi = kPosInf;  // coremltools' default bounds for an unranged symbol
        if (hi < lo) fail(w, "shapeRange upper bound below the lower bound");
        try {
          sym->set_range(lo, hi);
        } catch (const Error& e) {
          fail(w, e.what());
        }
      }
      dims.push_back(ctx.symbol(sym));
    }
    return ctx.tensor(dt, dims);
  }

  // The var names a block defines (nested blocks included): new vars never take them. Op names are
  // not reserved, as in coremltools, whose name counters restart for every conversion: a loaded
  // program's passes name new ops "cast_0", "cast_1", ... again (common::dedup_op_and_var_names
  // settles any clash at the end of the pipeline).
  void collect_names(const mil::Block& b, std::unordered_set<std::string>& out) {
    for (const auto& in : b.inputs()) out.insert(in.name());
    for (const auto& op : b.operations()) {
      for (const auto& nb : op.blocks()) collect_names(nb, out);
      for (const auto& o : op.outputs()) out.insert(o.name());
    }
  }

  // Defines a name in the current scope (undone when the enclosing nested block ends).
  void define(const std::string& n, Var* v) {
    scope_[n] = v;
    pending_.erase(n);
    defined_log_.push_back(n);
  }

  // The ops of a nested block: its inputs (shared with the previous block of the op when they
  // have the same names and types, as while_loop's cond and body blocks do), its ops, its
  // outputs; names defined inside are dropped from the scope at the end.
  void nested_block(Builder& b, Function& f, Operation* op, const mil::Block& pb, const std::string& where) {
    if (!pb.attributes().empty()) fail(where, "attributes on blocks are not supported");
    size_t mark = defined_log_.size();
    Block* prev = op->blocks().empty() ? nullptr : op->blocks().back();
    bool share = prev && static_cast<int>(prev->inputs().size()) == pb.inputs_size();
    for (int i = 0; i < pb.inputs_size(); ++i) {
      const auto& in = pb.inputs(i);
      const std::string w = where + ", block input '" + in.name() + "'";
      if (in.name().empty()) fail(w, "block input without a name");
      const Type* t = type(f.ctx(), in.type(), w);
      // (the proto keeps no symbol identity: a symbolic dim reads as a fresh symbol in each block)
      if (share && (prev->inputs()[i]->name() != in.name() || !is_compatible_type(prev->inputs()[i]->type(), t)))
        share = false;
    }
    Block* blk = f.add_block(op);
    for (int i = 0; i < pb.inputs_size(); ++i) {
      const auto& in = pb.inputs(i);
      const std::string w = where + ", block input '" + in.name() + "'";
      Var* v;
      if (share) {
        v = prev->inputs()[i];
        f.share_block_input(blk, v);
      } else {
        v = f.add_block_input(blk, in.name(), type(f.ctx(), in.type(), w));
      }
      if (scope_.count(in.name()) && !share) fail(w, "var '" + in.name() + "' defined twice");
      define(in.name(), v);
    }
    b.fill_block(blk, [&](const std::vector<Var*>&) {
      for (int idx = 0; idx < pb.operations_size(); ++idx) operation(b, f, pb.operations(idx), where, idx);
      std::vector<Var*> outs;
      for (const auto& n : pb.outputs()) outs.push_back(lookup(n, where + ", block output"));
      return outs;
    });
    while (defined_log_.size() > mark) {
      scope_.erase(defined_log_.back());
      defined_log_.pop_back();
    }
  }

  Var* lookup(const std::string& n, const std::string& where) {
    auto it = scope_.find(n);
    if (it != scope_.end()) return it->second;
    if (pending_.count(n)) fail(where, "var '" + n + "' is used before it is defined");
    fail(where, "undefined var '" + n + "'");
  }

  void block(Builder& b, Function& f, const mil::Block& pb, const std::string& where) {
    if (!pb.attributes().empty()) fail(where, "attributes on blocks are not supported");
    if (pb.inputs_size() != 0) fail(where, "a function body block cannot have inputs");
    pending_.clear();
    for (const auto& op : pb.operations())
      for (const auto& o : op.outputs()) pending_.insert(o.name());
    const int n = pb.operations_size();
    for (int idx = 0; idx < n; ++idx) {
      const auto& op = pb.operations(idx);
      if (op.type() != "write_state") {
        operation(b, f, op, where, idx);
        continue;
      }
      // coremltools' loader: write_state becomes coreml_update_state, merged with a
      // read_state of the same state that directly follows it
      const mil::Operation* rd = nullptr;
      if (idx + 1 < n) {
        const auto& next = pb.operations(idx + 1);
        auto a = op.inputs().find("input");
        auto c = next.inputs().find("input");
        if (next.type() == "read_state" && a != op.inputs().end() && c != next.inputs().end() &&
            a->second.arguments_size() == 1 && c->second.arguments_size() == 1 &&
            a->second.arguments(0).binding_case() == mil::Argument::Binding::kName &&
            c->second.arguments(0).binding_case() == mil::Argument::Binding::kName &&
            a->second.arguments(0).name() == c->second.arguments(0).name())
          rd = &next;
      }
      update_state(b, f, op, rd, where, idx);
      if (rd) ++idx;
    }
    std::vector<Var*> outs;
    for (const auto& n : pb.outputs()) outs.push_back(lookup(n, where + ", block output"));
    f.body().set_outputs(outs);
  }

  // write_state (+ the read_state merged into it) -> coreml_update_state. The op is named like
  // the one coremltools' writer started from: the read_state's name, else the write_state's
  // name without its "_write_state" suffix.
  void update_state(Builder& b, Function& f, const mil::Operation& ws, const mil::Operation* rd,
                    const std::string& fwhere, int idx) {
    std::string where = fwhere + ", op #" + std::to_string(idx) + " (write_state)";
    std::string wname;
    if (auto a = ws.attributes().find("name"); a != ws.attributes().end())
      wname = string_value(a->second, where + ", attribute 'name'");
    if (!wname.empty()) where = fwhere + ", op '" + wname + "' (write_state)";
    for (const auto& [k, _] : ws.attributes())
      if (k != "name") fail(where, "unsupported attribute '" + k + "'");
    if (ws.outputs_size() != 0) fail(where, "write_state has no outputs, " + std::to_string(ws.outputs_size()) + " declared");
    if (ws.blocks_size() != 0) fail(where, "write_state cannot have blocks");
    Var* state = nullptr;
    Var* data = nullptr;
    for (const auto& [pname, argument] : ws.inputs()) {
      if (pname != "input" && pname != "data")
        fail(where, "unknown argument '" + pname + "'; its inputs are: input, data");
      if (argument.arguments_size() != 1 || argument.arguments(0).binding_case() != mil::Argument::Binding::kName)
        fail(where, "input '" + pname + "' must bind one var by name");
      Var* v = lookup(argument.arguments(0).name(), where + ", input '" + pname + "'");
      (pname == "input" ? state : data) = v;
    }
    if (!state || !data) fail(where, "write_state needs both 'input' and 'data'");
    std::string name;
    if (rd) {
      const std::string rwhere = fwhere + ", op #" + std::to_string(idx + 1) + " (read_state)";
      for (const auto& [k, v] : rd->attributes()) {
        if (k != "name") fail(rwhere, "unsupported attribute '" + k + "'");
        name = string_value(v, rwhere + ", attribute 'name'");
      }
      if (rd->inputs_size() != 1) fail(rwhere, "read_state takes exactly one input ('input')");
      if (rd->outputs_size() != 1) fail(rwhere, "read_state must declare exactly one output");
      if (rd->blocks_size() != 0) fail(rwhere, "read_state cannot have blocks");
    } else {
      const std::string suffix = "_write_state";
      name = wname;
      if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        name.resize(name.size() - suffix.size());
    }
    std::vector<Arg> args(2);
    args[0].name = "state";
    args[0].items.emplace_back();
    args[0].items.back().var = state;
    args[1].name = "value";
    args[1].items.emplace_back();
    args[1].items.back().var = data;
    if (!name.empty() && scope_.count(name)) name.clear();  // an unmerged op's name must not shadow a var
    std::vector<Var*> outs;
    try {
      outs = b.create("coreml_update_state", args, name);
    } catch (const FormatError&) {
      throw;
    } catch (const Error& e) {
      fail(where, e.what());
    }
    if (!rd) return;
    const auto& o = rd->outputs(0);
    const std::string ow = where + ", read_state output '" + o.name() + "'";
    if (o.name().empty()) fail(ow, "output without a name");
    if (scope_.count(o.name())) fail(ow, "var '" + o.name() + "' defined twice");
    const Type* declared = type(f.ctx(), o.type(), ow);
    if (!is_compatible_type(outs[0]->type(), declared))
      fail(ow, "declared type " + declared->str() + " does not match the inferred type " + outs[0]->type()->str());
    outs[0]->set_name(o.name());
    define(o.name(), outs[0]);
  }

  void operation(Builder& b, Function& f, const mil::Operation& op, const std::string& fwhere, int idx) {
    std::string name;
    std::string where = fwhere + ", op #" + std::to_string(idx) + " (" + op.type() + ")";
    if (auto a = op.attributes().find("name"); a != op.attributes().end()) {
      name = string_value(a->second, where + ", attribute 'name'");
      where = fwhere + ", op '" + name + "' (" + op.type() + ")";
    }
    if (op.type().empty()) fail(where, "operation without a type");
    Context& ctx = f.ctx();
    std::vector<Var*> outs;
    const bool is_const = op.type() == "const";
    if (is_const) {
      if (op.inputs_size() != 0) fail(where, "const operation can't have any input");
      auto v = op.attributes().find("val");
      if (v == op.attributes().end()) fail(where, "const without a 'val' attribute");
      for (const auto& [k, _] : op.attributes())
        if (k != "name" && k != "val") fail(where, "unsupported const attribute '" + k + "'");
      if (op.outputs_size() != 1) fail(where, "const must have exactly one output");
      auto val = value(v->second, where + ", attribute 'val'");
      if (name.empty()) name = op.outputs(0).name();
      if (scope_.count(op.outputs(0).name())) fail(where, "var '" + op.outputs(0).name() + "' defined twice");
      outs.push_back(b.add_const(val, name));
    } else {
      const OpSchema* s = nullptr;
      try {
        s = &schema_for(op.type(), target_, name);
      } catch (const Error& e) {
        fail(where, e.what());
      }
      std::vector<std::pair<int, Arg>> args;
      // constexpr op classes of opset <= iOS17 carry their parameters as attributes
      if (s->is_constexpr) {
        for (const auto& [pname, v] : op.attributes()) {
          if (pname == "name") continue;
          if (s->input_index(pname) < 0) fail(where, "unknown parameter attribute '" + pname + "'");
          Arg a;
          a.name = pname;
          ArgItem item;
          item.value = value(v, where + ", attribute '" + pname + "'");
          a.items.push_back(std::move(item));
          args.emplace_back(s->input_index(pname), std::move(a));
        }
      }
      for (const auto& [pname, argument] : op.inputs()) {
        Arg a;
        a.name = pname;
        a.is_sequence = argument.arguments_size() != 1;
        for (const auto& bind : argument.arguments()) {
          ArgItem item;
          if (bind.binding_case() == mil::Argument::Binding::kName)
            item.var = lookup(bind.name(), where + ", input '" + pname + "'");
          else if (bind.binding_case() == mil::Argument::Binding::kValue)
            item.value = value(bind.value(), where + ", input '" + pname + "'");
          else
            fail(where, "input '" + pname + "' has an empty binding");
          a.items.push_back(std::move(item));
        }
        if (a.items.empty()) fail(where, "input '" + pname + "' has no arguments");
        int i = s->input_index(pname);
        args.emplace_back(i < 0 ? std::numeric_limits<int>::max() : i, std::move(a));
      }
      // the proto's map has no order: give the builder the schema's order
      std::stable_sort(args.begin(), args.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      std::vector<Arg> ordered;
      for (auto& [_, a] : args) ordered.push_back(std::move(a));
      BlockBuildFn blocks;
      if (op.blocks_size() != s->num_blocks)
        fail(where, "has " + std::to_string(op.blocks_size()) + " blocks, " + op.type() + " takes " +
                        std::to_string(s->num_blocks));
      if (s->num_blocks > 0) {
        blocks = [&](Builder& bb, Operation* created) {
          for (int k = 0; k < op.blocks_size(); ++k)
            nested_block(bb, f, created, op.blocks(k), where + ", block " + std::to_string(k));
        };
      }
      try {
        outs = b.create(op.type(), ordered, name, blocks);
      } catch (const FormatError&) {
        throw;
      } catch (const Error& e) {
        fail(where, e.what());
      }
      Operation* created = outs.empty() ? nullptr : outs[0]->op();
      for (const auto& [k, v] : op.attributes()) {
        if (k == "name" || s->is_constexpr) continue;
        if (created) created->attributes()[k] = value(v, where + ", attribute '" + k + "'");
      }
    }
    if (static_cast<int>(outs.size()) != op.outputs_size())
      fail(where, "declares " + std::to_string(op.outputs_size()) + " outputs, milkit infers " +
                      std::to_string(outs.size()));
    for (int i = 0; i < op.outputs_size(); ++i) {
      const auto& o = op.outputs(i);
      const std::string ow = where + ", output '" + o.name() + "'";
      if (o.name().empty()) fail(ow, "output without a name");
      if (scope_.count(o.name())) fail(ow, "var '" + o.name() + "' defined twice");
      const Type* declared = type(ctx, o.type(), ow);
      const Type* inferred = outs[i]->type();
      if (!is_compatible_type(inferred, declared))
        fail(ow, "declared type " + declared->str() + " does not match the inferred type " + inferred->str());
      outs[i]->set_name(o.name());
      define(o.name(), outs[i]);
    }
  }

 private:
  const BlobResolver& blobs_;
  std::string src_;
  Target target_;
  std::unordered_map<std::string, Var*> scope_;
  std::unordered_set<std::string> pending_;
  std::vector<std::string> defined_log_;
};

}  // namespace

std::shared_ptr<Program> read_model_proto(const std::string& bytes, const BlobResolver& blobs,
                                          const std::string& source,
                                          std::optional<Target> minimum_target) {
  spec::Model model;
  if (!model.ParseFromString(bytes)) throw FormatError(source + ": not a valid Core ML model protobuf");
  if (model.Type_case() != spec::Model::kMlProgram)
    throw FormatError(source + ": not an ML Program (only MIL program models can be loaded)");
  auto target = target_from_spec(model.specificationversion());
  if (!target)
    throw FormatError(source + ": unsupported specificationVersion " +
                      std::to_string(model.specificationversion()));
  const auto& pp = model.mlprogram();
  if (pp.version() != 1) throw FormatError(source + ": invalid program version " + std::to_string(pp.version()));
  if (pp.functions().empty()) throw FormatError(source + ": program without functions");
  if (minimum_target && *target < *minimum_target) target = minimum_target;
  Reader r(blobs, source, *target);

  auto prog = std::make_shared<Program>();
  // program attributes: only buildInfo (dict<string, string>)
  for (const auto& [k, v] : pp.attributes()) {
    if (k != "buildInfo") throw FormatError(source + ": unsupported program attribute '" + k + "'");
    if (v.value_case() != mil::Value::kImmediateValue ||
        v.immediatevalue().value_case() != mil::Value::ImmediateValue::kDictionary)
      throw FormatError(source + ": buildInfo must be an immediate dictionary");
    for (const auto& kv : v.immediatevalue().dictionary().values())
      prog->attributes()[r.string_value(kv.key(), "buildInfo key")] = r.string_value(kv.value(), "buildInfo value");
  }

  const auto& desc = model.description();
  // function order: the description's, then the rest by name
  std::vector<std::string> order;
  std::set<std::string> seen;
  for (const auto& fd : desc.functions())
    if (pp.functions().count(fd.name()) && seen.insert(fd.name()).second) order.push_back(fd.name());
  std::vector<std::string> rest;
  for (const auto& [n, _] : pp.functions())
    if (!seen.count(n)) rest.push_back(n);
  std::sort(rest.begin(), rest.end());
  order.insert(order.end(), rest.begin(), rest.end());

  for (const auto& n : order) {
    Ranges ranges;
    const google::protobuf::RepeatedPtrField<spec::FeatureDescription>* ins = &desc.input();
    const google::protobuf::RepeatedPtrField<spec::FeatureDescription>* outs = &desc.output();
    for (const auto& fd : desc.functions())
      if (fd.name() == n) {
        ins = &fd.input();
        outs = &fd.output();
      }
    for (const auto& fd : *ins) ranges[fd.name()] = &fd;
    r.function(*prog, n, pp.functions().at(n), ranges, outs);
  }
  std::string def = desc.defaultfunctionname();
  if (def.empty()) def = pp.functions().count("main") || order.size() != 1 ? "main" : order[0];
  if (!prog->function(def)) throw FormatError(source + ": default function '" + def + "' not found");
  prog->set_default_function_name(def);
  return prog;
}

}  // namespace milkit

namespace milkit {

std::map<std::string, std::vector<std::vector<int64_t>>> read_enumerated_shapes(const std::string& bytes) {
  CoreML::Specification::Model m;
  if (!m.ParseFromString(bytes)) throw FormatError("model.mlmodel is not a valid Model proto");
  std::map<std::string, std::vector<std::vector<int64_t>>> r;
  for (const auto& in : m.description().input()) {
    if (!in.type().has_multiarraytype()) continue;
    const auto& at = in.type().multiarraytype();
    if (!at.has_enumeratedshapes()) continue;
    auto& shapes = r[in.name()];
    for (const auto& s : at.enumeratedshapes().shapes())
      shapes.emplace_back(s.shape().begin(), s.shape().end());
  }
  return r;
}

}  // namespace milkit

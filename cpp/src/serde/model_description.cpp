// ModelDescription -> JSON for inspection tools (milkit info / diff / validate).
#include "milkit/serde/model_description.h"

#include <nlohmann/json.hpp>

#include "Model.pb.h"
#include "milkit/types/error.h"

namespace milkit {

namespace spec = CoreML::Specification;

namespace {

using nlohmann::json;

const char* array_dtype_name(int code) {
  switch (code) {
    case spec::ArrayFeatureType::FLOAT32: return "FLOAT32";
    case spec::ArrayFeatureType::DOUBLE: return "DOUBLE";
    case spec::ArrayFeatureType::INT32: return "INT32";
    case spec::ArrayFeatureType::INT8: return "INT8";
    case spec::ArrayFeatureType::FLOAT16: return "FLOAT16";
    default: return "INVALID";
  }
}

const char* color_space_name(int code) {
  switch (code) {
    case spec::ImageFeatureType::GRAYSCALE: return "GRAYSCALE";
    case spec::ImageFeatureType::RGB: return "RGB";
    case spec::ImageFeatureType::BGR: return "BGR";
    case spec::ImageFeatureType::GRAYSCALE_FLOAT16: return "GRAYSCALE_FLOAT16";
    default: return "INVALID";
  }
}

json array_type(const spec::ArrayFeatureType& a) {
  json j;
  j["kind"] = "multiArray";
  j["dataType"] = array_dtype_name(a.datatype());
  j["shape"] = json::array();
  for (int64_t d : a.shape()) j["shape"].push_back(d);
  if (a.has_shaperange()) {
    json r = json::array();
    for (const auto& s : a.shaperange().sizeranges())
      r.push_back(json::array({static_cast<int64_t>(s.lowerbound()), s.upperbound()}));
    j["shapeRange"] = r;
  }
  if (a.has_enumeratedshapes()) {
    json e = json::array();
    for (const auto& s : a.enumeratedshapes().shapes()) e.push_back(json(std::vector<int64_t>(s.shape().begin(), s.shape().end())));
    j["enumeratedShapes"] = e;
  }
  switch (a.defaultOptionalValue_case()) {
    case spec::ArrayFeatureType::kIntDefaultValue: j["defaultValue"] = a.intdefaultvalue(); break;
    case spec::ArrayFeatureType::kFloatDefaultValue: j["defaultValue"] = a.floatdefaultvalue(); break;
    case spec::ArrayFeatureType::kDoubleDefaultValue: j["defaultValue"] = a.doubledefaultvalue(); break;
    default: break;
  }
  return j;
}

json feature_type(const spec::FeatureType& t) {
  switch (t.Type_case()) {
    case spec::FeatureType::kMultiArrayType: return array_type(t.multiarraytype());
    case spec::FeatureType::kStateType: {
      json j{{"kind", "state"}};
      if (t.statetype().has_arraytype()) j["array"] = array_type(t.statetype().arraytype());
      return j;
    }
    case spec::FeatureType::kImageType: {
      const auto& im = t.imagetype();
      json j{{"kind", "image"},
             {"width", im.width()},
             {"height", im.height()},
             {"colorSpace", color_space_name(im.colorspace())}};
      if (im.has_enumeratedsizes()) {
        json sizes = json::array();
        for (const auto& sz : im.enumeratedsizes().sizes())
          sizes.push_back(json::array({sz.height(), sz.width()}));
        j["enumeratedSizes"] = sizes;
      }
      if (im.has_imagesizerange()) {
        const auto& r = im.imagesizerange();
        j["sizeRange"] = json{
            {"height", json::array({r.heightrange().lowerbound(), r.heightrange().upperbound()})},
            {"width", json::array({r.widthrange().lowerbound(), r.widthrange().upperbound()})}};
      }
      return j;
    }
    case spec::FeatureType::kInt64Type: return json{{"kind", "int64"}};
    case spec::FeatureType::kDoubleType: return json{{"kind", "double"}};
    case spec::FeatureType::kStringType: return json{{"kind", "string"}};
    case spec::FeatureType::kDictionaryType: return json{{"kind", "dictionary"}};
    case spec::FeatureType::kSequenceType: return json{{"kind", "sequence"}};
    default: return json{{"kind", "none"}};
  }
}

json features(const google::protobuf::RepeatedPtrField<spec::FeatureDescription>& fs) {
  json l = json::array();
  for (const auto& f : fs) {
    json j{{"name", f.name()}, {"type", feature_type(f.type())}};
    if (!f.shortdescription().empty()) j["shortDescription"] = f.shortdescription();
    if (f.type().isoptional()) j["isOptional"] = true;
    l.push_back(j);
  }
  return l;
}

}  // namespace

std::string model_description_json(const std::string& bytes, const std::string& source) {
  spec::Model m;
  if (!m.ParseFromString(bytes)) throw FormatError(source + ": not a valid Core ML model protobuf");
  const auto& d = m.description();
  json j;
  j["specificationVersion"] = m.specificationversion();
  j["isMLProgram"] = m.Type_case() == spec::Model::kMlProgram;
  j["isUpdatable"] = m.isupdatable();
  j["defaultFunctionName"] = d.defaultfunctionname();
  j["predictedFeatureName"] = d.predictedfeaturename();
  j["predictedProbabilitiesName"] = d.predictedprobabilitiesname();
  const auto& md = d.metadata();
  json ud = json::object();
  for (const auto& [k, v] : md.userdefined()) ud[k] = v;
  j["metadata"] = json{{"shortDescription", md.shortdescription()}, {"versionString", md.versionstring()},
                       {"author", md.author()}, {"license", md.license()}, {"userDefined", ud}};
  j["input"] = features(d.input());
  j["output"] = features(d.output());
  j["state"] = features(d.state());
  j["functions"] = json::array();
  for (const auto& f : d.functions())
    j["functions"].push_back(json{{"name", f.name()}, {"input", features(f.input())},
                                  {"output", features(f.output())}, {"state", features(f.state())}});
  // invalid UTF-8 in user strings is replaced, never thrown on
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace milkit

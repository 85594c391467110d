// model_description_json: the ModelDescription of a Model proto as JSON (milkit info / diff).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "Model.pb.h"
#include "milkit/serde/model_description.h"
#include "milkit/types/error.h"

using namespace milkit;
namespace spec = CoreML::Specification;
using nlohmann::json;

TEST_CASE("model_description_json: metadata, features, ranges, enumerated shapes, states", "[serde][description]") {
  spec::Model m;
  m.set_specificationversion(9);
  m.mutable_mlprogram()->set_version(1);
  auto* d = m.mutable_description();
  auto* md = d->mutable_metadata();
  md->set_author("Ada");
  md->set_license("MIT");
  md->set_versionstring("1.2");
  md->set_shortdescription("a test");
  (*md->mutable_userdefined())["com.github.apple.coremltools.version"] = "9.0";
  auto* x = d->add_input();
  x->set_name("x");
  x->set_shortdescription("tokens");
  auto* xa = x->mutable_type()->mutable_multiarraytype();
  xa->set_datatype(spec::ArrayFeatureType::FLOAT16);
  xa->add_shape(1);
  xa->add_shape(8);
  auto* r0 = xa->mutable_shaperange()->add_sizeranges();
  r0->set_lowerbound(1);
  r0->set_upperbound(1);
  auto* r1 = xa->mutable_shaperange()->add_sizeranges();
  r1->set_lowerbound(2);
  r1->set_upperbound(-1);
  auto* y = d->add_input();
  y->set_name("y");
  auto* ya = y->mutable_type()->mutable_multiarraytype();
  ya->set_datatype(spec::ArrayFeatureType::INT32);
  ya->add_shape(2);
  for (int64_t n : {2, 4}) ya->mutable_enumeratedshapes()->add_shapes()->add_shape(n);
  auto* s = d->add_state();
  s->set_name("cache");
  auto* sa = s->mutable_type()->mutable_statetype()->mutable_arraytype();
  sa->set_datatype(spec::ArrayFeatureType::FLOAT16);
  sa->add_shape(3);
  auto* o = d->add_output();
  o->set_name("out");
  o->mutable_type()->mutable_imagetype()->set_colorspace(spec::ImageFeatureType::RGB);
  d->set_defaultfunctionname("main");
  auto* f = d->add_functions();
  f->set_name("main");
  *f->add_input() = *x;

  json j = json::parse(model_description_json(m.SerializeAsString(), "m.mlmodel"));
  CHECK(j["specificationVersion"] == 9);
  CHECK(j["isMLProgram"] == true);
  CHECK(j["defaultFunctionName"] == "main");
  CHECK(j["metadata"]["author"] == "Ada");
  CHECK(j["metadata"]["license"] == "MIT");
  CHECK(j["metadata"]["versionString"] == "1.2");
  CHECK(j["metadata"]["shortDescription"] == "a test");
  CHECK(j["metadata"]["userDefined"]["com.github.apple.coremltools.version"] == "9.0");
  const json& jx = j["input"][0];
  CHECK(jx["name"] == "x");
  CHECK(jx["shortDescription"] == "tokens");
  CHECK(jx["type"]["kind"] == "multiArray");
  CHECK(jx["type"]["dataType"] == "FLOAT16");
  CHECK(jx["type"]["shape"] == json::array({1, 8}));
  CHECK(jx["type"]["shapeRange"] == json::parse("[[1, 1], [2, -1]]"));
  CHECK_FALSE(jx["type"].contains("enumeratedShapes"));
  CHECK(j["input"][1]["type"]["enumeratedShapes"] == json::parse("[[2], [4]]"));
  CHECK(j["input"][1]["type"]["dataType"] == "INT32");
  CHECK(j["state"][0]["type"]["kind"] == "state");
  CHECK(j["state"][0]["type"]["array"]["shape"] == json::array({3}));
  CHECK(j["output"][0]["type"]["kind"] == "image");
  CHECK(j["output"][0]["type"]["colorSpace"] == "RGB");
  CHECK(j["functions"][0]["name"] == "main");
  CHECK(j["functions"][0]["input"][0]["name"] == "x");
  CHECK(j["functions"][0]["output"].empty());
}

TEST_CASE("model_description_json: malformed bytes name the file", "[serde][description]") {
  CHECK_THROWS_AS(model_description_json("\xff\xff\xff", "bad.mlmodel"), FormatError);
  CHECK_THROWS_WITH(model_description_json("\xff\xff\xff", "bad.mlmodel"), Catch::Contains("bad.mlmodel"));
}

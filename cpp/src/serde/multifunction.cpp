// Function descriptions and weight references of multifunction packages, read from Model protos.
#include "milkit/serde/multifunction.h"

#include <algorithm>
#include <map>
#include <memory>

#include "MIL.pb.h"
#include "Model.pb.h"
#include "milkit/types/error.h"

namespace milkit {

namespace spec = CoreML::Specification;
namespace mil = CoreML::Specification::MILSpec;

namespace {

spec::FunctionDescription function_description(const spec::ModelDescription& d,
                                               const std::string& name, const std::string& model) {
  spec::FunctionDescription fd;
  if (d.functions().empty()) {
    if (name != "main") throw ValueError("function '" + name + "' not found in " + model);
    *fd.mutable_input() = d.input();
    *fd.mutable_output() = d.output();
    *fd.mutable_state() = d.state();
    fd.set_predictedfeaturename(d.predictedfeaturename());
    fd.set_predictedprobabilitiesname(d.predictedprobabilitiesname());
    return fd;
  }
  for (const auto& f : d.functions())
    if (f.name() == name) return f;
  throw ValueError("function '" + name + "' not found in " + model);
}

// The op's name attribute, when it is an immediate string scalar.
std::string op_name(const mil::Operation& op) {
  auto it = op.attributes().find("name");
  if (it == op.attributes().end() || !it->second.has_immediatevalue()) return "";
  const auto& t = it->second.immediatevalue().tensor();
  return t.has_strings() && t.strings().values_size() == 1 ? t.strings().values(0) : "";
}

void collect(const mil::Block& b, const std::string& fn, std::vector<BlobReference>& out) {
  for (const auto& op : b.operations()) {
    std::map<std::string, const mil::Value*> sorted;  // attribute maps have no order
    for (const auto& [k, v] : op.attributes())
      if (v.has_blobfilevalue()) sorted[k] = &v;
    for (const auto& [k, v] : sorted)
      out.push_back(
          {fn, op_name(op), k, v->blobfilevalue().filename(), v->blobfilevalue().offset()});
    for (const auto& nb : op.blocks()) collect(nb, fn, out);
  }
}

}  // namespace

std::string multifunction_description(const std::vector<FunctionSource>& functions,
                                      const std::string& default_function_name) {
  spec::ModelDescription desc;
  for (const FunctionSource& f : functions) {
    spec::Model m;
    if (!m.ParseFromString(f.model_bytes))
      throw FormatError("the source of function '" + f.target_name +
                        "' is not a valid Core ML model protobuf");
    spec::FunctionDescription fd = function_description(
        m.description(), f.source_name, "the source of function '" + f.target_name + "'");
    fd.set_name(f.target_name);
    *desc.add_functions() = std::move(fd);
  }
  desc.set_defaultfunctionname(default_function_name);
  std::string out;
  if (!desc.SerializeToString(&out)) throw ValueError("cannot serialize the model description");
  return out;
}

std::vector<BlobReference> blob_references(const std::string& model_bytes,
                                           const std::string& source) {
  auto m = std::make_unique<spec::Model>();
  if (!m->ParseFromString(model_bytes))
    throw FormatError(source + ": not a valid Core ML model protobuf");
  std::vector<BlobReference> out;
  if (!m->has_mlprogram()) return out;
  std::map<std::string, const mil::Function*> by_name;
  for (const auto& [name, f] : m->mlprogram().functions()) by_name[name] = &f;
  for (const auto& [name, f] : by_name) {
    auto it = f->block_specializations().find(f->opset());
    if (it != f->block_specializations().end()) collect(it->second, name, out);
  }
  return out;
}

}  // namespace milkit

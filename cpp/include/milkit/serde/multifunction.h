// milkit/serde/multifunction.h - the parts of a multifunction package that come from its source
// packages' Model protos: function descriptions, and which consts point at which weight blobs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace milkit {

/// One function of a multifunction package: the serialized Model proto it comes from, its name
/// there and its name in the new package.
struct FunctionSource {
  std::string model_bytes;  ///< The source model.mlmodel.
  std::string source_name;  ///< The function in the source ("main" for a one-function model).
  std::string target_name;  ///< The function's name in the multifunction package.
};

/// The serialized ModelDescription of a multifunction package, as coremltools' save_multifunction
/// makes it: one FunctionDescription per function, in order, copied from its source (a source
/// with no `functions` gives its input, output, state, predictedFeatureName and
/// predictedProbabilitiesName), renamed to its target name; then defaultFunctionName. Nothing
/// else (no metadata). Throws FormatError for bytes that are not a Model proto and ValueError
/// for a function its source does not have.
std::string multifunction_description(const std::vector<FunctionSource>& functions,
                                      const std::string& default_function_name);

/// A value of an ML Program stored in a weight file.
struct BlobReference {
  std::string function;   ///< The function holding the op.
  std::string op;         ///< The op's name.
  std::string attribute;  ///< The attribute holding the value ("val" for a const).
  std::string file;       ///< BlobFileValue.fileName.
  uint64_t offset = 0;    ///< BlobFileValue.offset (of the blob's metadata record).
};

/// Every op attribute of the model's ML Program (nested blocks included) whose value is stored
/// in a weight file, by function (sorted by name), then op order. Throws FormatError for bytes
/// that are not a Model proto; `source` names the file in messages.
std::vector<BlobReference> blob_references(const std::string& model_bytes,
                                           const std::string& source);

}  // namespace milkit

// milkit/serde/proto_reader.h - CoreML.Specification.Model (ML Program) bytes -> Program.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "milkit/ir/ir.h"
#include "milkit/types/target.h"

namespace milkit {

class BlobReader;

/// Resolves a BlobFileValue.fileName ("@model_path/weights/weight.bin") to an open reader.
/// Should throw FormatError / IOError for names it cannot resolve.
using BlobResolver = std::function<std::shared_ptr<BlobReader>(const std::string& file_name)>;

/// Parses a serialized Model holding an ML Program and rebuilds every function through
/// milkit::Builder at the target of the model's specificationVersion, so input validation and
/// type inference run again. Op names, output names and const values come from the proto;
/// every declared output type is checked against the inferred one (is_compatible_type).
/// Symbolic input dims become fresh symbols whose range comes from the ModelDescription's
/// shapeRange (except coremltools' default [1, 2], read as unbounded), or an image input's
/// imageSizeRange; imageType inputs and outputs become the functions' image inputs (channel first,
/// scale 1, no bias, enumerated and default sizes kept) and image outputs. `source` names the file
/// in messages. Throws FormatError for anything malformed or inconsistent. With
/// `minimum_target`, a model of an older specificationVersion is read at that target instead
/// (each op takes its version there, as coremltools' loading at a raised spec version does).
std::shared_ptr<Program> read_model_proto(const std::string& bytes, const BlobResolver& blobs,
                                          const std::string& source,
                                          std::optional<Target> minimum_target = std::nullopt);

/// The enumerated shapes of each input that has them, from a serialized Model proto.
std::map<std::string, std::vector<std::vector<int64_t>>> read_enumerated_shapes(const std::string& bytes);

}  // namespace milkit

// milkit/serde/proto_writer.h - Program -> CoreML.Specification.Model (ML Program) bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "milkit/ir/ir.h"
#include "milkit/types/target.h"

namespace milkit {

class BlobWriter;

/// Where blob values go: returns the weight file writer, opening it on first use.
using WeightSink = std::function<BlobWriter&()>;

/// The BlobFileValue.fileName coremltools writes for the package's weight file.
inline constexpr const char* kWeightFileName = "@model_path/weights/weight.bin";

/// The enumerated shapes of one input (coremltools' ct.EnumeratedShapes in `inputs`).
struct EnumeratedShapesSpec {
  /// The allowed shapes, in the order given.
  std::vector<std::vector<int64_t>> shapes;
  /// The default shape: written as the input's `shape` and first in `enumeratedShapes`.
  std::vector<int64_t> default_shape;
};

/// Options of write_model_proto.
struct ProtoWriteOptions {
  /// Deployment target: specificationVersion and the functions' opset string.
  Target target = Target::iOS15;
  /// Receives const values stored as blobs (coremltools' rule: >= 10 elements of fp16, fp32,
  /// int8, uint8 or a sub-byte type, plus int16, uint16, int32, uint32 from iOS18). Required
  /// when the program has such consts.
  WeightSink weights;
  /// Enumerated shapes by input name of the default function. As in coremltools, they apply
  /// only to inputs whose program shape is symbolic (static inputs keep their shape); such an
  /// input is described by the default shape plus `enumeratedShapes` (default first,
  /// duplicates dropped before iOS18) instead of a `shapeRange`.
  std::map<std::string, EnumeratedShapesSpec> enumerated_shapes;
  /// A serialized ModelDescription written as is instead of one made from the functions (a
  /// multifunction package copies the descriptions of the packages its functions come from).
  std::optional<std::string> description;
  /// Whether to write the program's buildInfo attribute (with milkit's version) and mirror it
  /// into metadata.userDefined; a package written from a given description has neither.
  bool build_info = true;
};

/// Whether coremltools stores a const value in the weight file (rather than immediate).
bool uses_weight_file(const Value& v, Target target);

/// Serializes `program` as a CoreML.Specification.Model holding an ML Program, the way
/// coremltools' MIL backend does: ModelDescription from the default function (or
/// FunctionDescriptions for several functions, iOS18+), ops bound by name with a `name`
/// attribute and typed outputs, consts immediate or blob, buildInfo from the program's
/// attributes. Blob values are written through options.weights in op order. Throws ValueError
/// for programs Core ML cannot represent (unsupported I/O dtypes, bf16 consts, opset newer than
/// the target, ...).
std::string write_model_proto(const Program& program, const ProtoWriteOptions& options);

}  // namespace milkit

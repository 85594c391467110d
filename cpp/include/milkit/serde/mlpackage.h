// milkit/serde/mlpackage.h - .mlpackage directories: atomic writing and validating reading.
//
//   X.mlpackage/
//     Manifest.json
//     Data/com.apple.CoreML/model.mlmodel
//     Data/com.apple.CoreML/weights/weight.bin   (only when some const is stored as a blob)
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "milkit/ir/ir.h"
#include "milkit/serde/proto_writer.h"
#include "milkit/types/target.h"

namespace milkit {

/// Options of write_mlpackage.
struct PackageOptions {
  /// Deployment target; default: the newest opset of the program's functions, at least iOS15.
  std::optional<Target> target;
  /// fsync files and directories before the final rename (durability).
  bool sync = true;
  /// Enumerated shapes by input name of the default function (see ProtoWriteOptions).
  std::map<std::string, EnumeratedShapesSpec> enumerated_shapes;
  /// A serialized ModelDescription to write as is (see ProtoWriteOptions::description).
  std::optional<std::string> description;
  /// Whether to write buildInfo and its metadata mirror (see ProtoWriteOptions::build_info).
  bool build_info = true;
};

/// The target write_mlpackage uses when none is given: the newest function opset, >= iOS15.
Target default_package_target(const Program& program);

/// Writes `program` as an .mlpackage at `path`, as is (no passes). Atomic: everything is
/// written into a temporary directory beside `path`, synced, then renamed into place; an
/// existing package at `path` is moved aside and removed only once the new one is in place.
/// On any error the temporary directory is removed and `path` is untouched.
/// Throws ValueError (unserializable program), IOError (file system).
void write_mlpackage(const Program& program, const PackageOptions& options, const std::string& path);

/// The Manifest.json text for the given item UUIDs (sorted keys, 4-space indent, trailing
/// newline), exactly as Core ML's ModelPackage writes it.
std::string manifest_json(const std::string& model_id, const std::string& weights_id);

/// A random version-4 UUID in lowercase text form.
std::string random_uuid();

/// Reads an .mlpackage directory (or a bare model.mlmodel file with its sibling `weights`
/// directory). Validates the Manifest (fileFormatVersion, the four keys of every item, item
/// paths that stay inside the package), then parses the model and rebuilds the program (see
/// read_model_proto). Weight values borrow a memory mapping of weight.bin.
/// Throws FormatError (malformed content) and IOError (missing / unreadable files).
/// `minimum_target` as in read_model_proto.
std::shared_ptr<Program> read_mlpackage(const std::string& path,
                                        std::optional<Target> minimum_target = std::nullopt);

}  // namespace milkit

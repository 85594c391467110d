// milkit/frontends/onnx.h - imports ONNX models (ModelProto) as MIL programs.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "milkit/ir/ir.h"
#include "milkit/types/target.h"

namespace milkit {

/// Options of the ONNX importer.
struct OnnxImportOptions {
  /// The opset the program is written in (MIL ops are picked for it).
  Target target = Target::iOS15;
  /// The folder external data paths are resolved in (and must stay inside); for a file, its folder.
  std::string base_dir;
  /// Where the model came from, for error messages ("model.onnx", "<ModelProto>").
  std::string source = "<ModelProto>";
  /// Input dims to fix, by input name: a value >= 0 replaces the model's dim (symbolic or not),
  /// -1 keeps it. A name that is not a graph input is an error.
  std::map<std::string, std::vector<int64_t>> input_dims;
};

/// What the importer learned about the model besides the program.
struct OnnxImportInfo {
  int64_t ir_version = 0;                   ///< ModelProto.ir_version.
  int64_t opset = 0;                        ///< The default ("ai.onnx") domain's opset.
  std::vector<std::string> input_names;     ///< Graph inputs (initializers left out), in order.
  std::vector<int> input_types;             ///< Their ONNX element types (TensorProto.DataType).
  std::vector<std::string> output_names;    ///< Graph outputs, in order.
  std::vector<int> output_types;            ///< Their ONNX element types.
  std::map<std::string, std::string> metadata;  ///< producer and metadata_props.
};

/// Imports a serialized ModelProto. Throws FormatError for a malformed model or tensor (naming
/// the node or tensor), ValueError listing every node whose operator milkit cannot express.
std::shared_ptr<Program> import_onnx(const void* data, size_t size, const OnnxImportOptions& options,
                                     OnnxImportInfo* info = nullptr);

/// Imports an .onnx file (external data resolved beside it). Throws IOError if unreadable.
std::shared_ptr<Program> import_onnx_file(const std::string& path, OnnxImportOptions options,
                                          OnnxImportInfo* info = nullptr);

/// The operators (default domain) the importer converts, sorted.
std::vector<std::string> onnx_supported_ops();

}  // namespace milkit

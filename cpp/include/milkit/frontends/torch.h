// milkit/frontends/torch.h - imports torch.export programs (the JSON-serialized ExportedProgram of
// a .pt2 archive, or one serialized from memory) as MIL programs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "milkit/ir/ir.h"
#include "milkit/ir/value.h"
#include "milkit/types/target.h"

namespace milkit {

/// Options of the torch.export importer.
struct TorchImportOptions {
  /// The opset the program is written in (mutated buffers need iOS18, where states exist).
  Target target = Target::iOS15;
  /// Where the program came from, for error messages ("model.pt2", "<ExportedProgram>").
  std::string source = "<ExportedProgram>";
  /// Input dims to fix, by user input name: a value >= 0 replaces the program's dim (symbolic or
  /// not), -1 keeps it. A name that is not a user input is an error.
  std::map<std::string, std::vector<int64_t>> input_dims;
};

/// What the importer learned about the program besides the MIL program.
struct TorchImportInfo {
  std::vector<std::string> input_names;   ///< User inputs, in order.
  std::vector<std::string> output_names;  ///< User outputs, in order.
  std::vector<std::string> state_names;   ///< Mutated buffers made states (their fqn), in order.
  std::vector<std::string> dialect;       ///< The program's verifiers ("TRAINING", "ATEN").
  int schema_major = 0;                   ///< Serializer schema version.
  int schema_minor = 0;                   ///< Serializer schema minor version.
  std::string torch_version;              ///< torch that exported it.
};

/// Tensors by fully-qualified name (parameters and buffers, or lifted constants), each in its own
/// torch dtype (int64, bf16, fp64 kept: the importer narrows them).
using TorchTensors = std::unordered_map<std::string, std::shared_ptr<const Value>>;

/// Imports a serialized ExportedProgram (model.json of a .pt2, schema 8.x) with its weights.
/// Throws FormatError for malformed JSON or graphs (naming the node), ValueError listing every
/// node whose operator milkit cannot express (with the user's source line).
std::shared_ptr<Program> import_torch_export(std::string_view json, const TorchTensors& weights,
                                             const TorchTensors& constants, const TorchImportOptions& options,
                                             TorchImportInfo* info = nullptr);

/// Imports a .pt2 file (torch.export.save); weights are mapped from the archive in place.
/// Throws IOError if unreadable, FormatError if malformed.
std::shared_ptr<Program> import_pt2_file(const std::string& path, TorchImportOptions options,
                                         TorchImportInfo* info = nullptr);

/// The operator targets the importer converts ("aten.add.Tensor" style, overload "" for every
/// overload), sorted.
std::vector<std::string> torch_supported_ops();

/// Why the importer cannot convert the operator of `target` ("torch.ops.aten.convolution_backward.default"
/// or "aten.convolution_backward"): gradients, sparse tensors, memory layout, ...; "" when no reason is
/// on record (an operator nobody has written a converter for yet).
std::string torch_unsupported_reason(const std::string& target);

/// The operators (or families, written with "*") the importer does not convert, with the reason, sorted.
std::vector<std::pair<std::string, std::string>> torch_unsupported_ops();

}  // namespace milkit

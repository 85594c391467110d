// milkit/frontends/pt2.h - reads the .pt2 archives of torch.export.save (program JSON and weights).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "milkit/ir/value.h"

namespace milkit {

/// One tensor entry of a .pt2 archive (a parameter, buffer or lifted constant), as stored.
///
/// The value keeps torch's dtype where MIL has one (fp32, fp16, bf16, fp8 e4m3fn / e5m2,
/// int8..int64, uint8..uint64, bool); fp64 is converted to fp32. A contiguous tensor stored
/// uncompressed borrows its bytes from a memory mapping of the archive (kept alive by the value's
/// buffer); a strided, compressed or converted one owns a contiguous copy.
struct Pt2Tensor {
  std::shared_ptr<const Value> value;  ///< dtype, shape and elements (row-major).
  bool is_param = false;               ///< Whether torch saved it as an nn.Parameter.
};

/// The parts of a .pt2 archive the importer needs.
struct Pt2Archive {
  std::string model_json;  ///< models/<name>.json: the serialized ExportedProgram
  std::string model_name;  ///< "model"
  std::unordered_map<std::string, Pt2Tensor> weights;    ///< fqn ("l.weight") -> tensor
  std::unordered_map<std::string, Pt2Tensor> constants;  ///< fqn of lifted constants -> tensor
  std::string source;                                    ///< the path, for messages
};

/// Opens a .pt2 file: IOError if unreadable, FormatError (naming the file and the entry) if
/// malformed.
///
/// Reads the archive written by torch.export.save (archive_format "pt2", schema major version 8):
/// the program JSON of the model named "model" (or of the only model), the weights config and the
/// constants config, and every raw tensor they list, honouring sizes, strides and storage_offset.
/// Throws ValueError for what is well-formed but unsupported: a dtype MIL lacks (complex, ...),
/// a tensor saved with torch's pickler (`use_pickle`, e.g. a tensor subclass or a script object),
/// a non-strided layout, a big-endian archive, several models without one named "model".
Pt2Archive read_pt2(const std::string& path);

}  // namespace milkit

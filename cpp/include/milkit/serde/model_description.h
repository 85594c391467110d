// milkit/serde/model_description.h - the ModelDescription of a serialized Model proto as JSON
// (what `milkit info` and `milkit diff` report about a package besides its program).
#pragma once

#include <string>

namespace milkit {

/// The description of a serialized Model proto as a JSON object text:
///   {"specificationVersion": 8, "isMLProgram": true, "isUpdatable": false,
///    "defaultFunctionName": "", "predictedFeatureName": "", "predictedProbabilitiesName": "",
///    "metadata": {"shortDescription", "versionString", "author", "license", "userDefined": {}},
///    "input": [feature...], "output": [feature...], "state": [feature...],
///    "functions": [{"name", "input", "output", "state"}]}
/// where a feature is {"name", "shortDescription", "isOptional", "type": <type>} and a type is
/// {"kind": "multiArray", "dataType": "FLOAT32" | ..., "shape": [...],
///  "shapeRange": [[lo, hi (-1: unbounded)], ...] | "enumeratedShapes": [[...], ...],
///  "defaultValue": <number>}, {"kind": "state", "array": <multiArray type>},
/// {"kind": "image", "width", "height", "colorSpace", "enumeratedSizes": [[height, width], ...] |
/// "sizeRange": {"height": [lo, hi], "width": [lo, hi] (-1: unbounded)}}, or {"kind": "int64" |
/// "double" | "string" | "dictionary" | "sequence" | "none"}. Absent keys are left out. Throws
/// FormatError when the bytes are not a Model proto; `source` names the file in messages.
std::string model_description_json(const std::string& bytes, const std::string& source);

}  // namespace milkit

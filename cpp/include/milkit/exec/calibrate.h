// milkit/exec/calibrate.h - activation calibration with the interpreter: the range of every
// activation over sample inputs, as coremltools' linear_quantize_activations collects it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "milkit/exec/tensor.h"
#include "milkit/ir/ir.h"

namespace milkit::calibration {

/// The range of the values of one tensor over the samples seen.
struct Range {
  double min = 0;  ///< Smallest value (NaN when a NaN was seen).
  double max = 0;  ///< Largest value (NaN when a NaN was seen).
};

/// The vars coremltools' calibration records (its ModelDebugger): every output of a non-const op
/// of the function body that a body output depends on through op inputs of the body (ops only
/// read inside nested blocks are not followed), except the function's outputs and vars whose
/// type is not a tensor of fp16, fp32, fp64 or int32 (those cannot be Core ML outputs). In
/// program order.
std::vector<Var*> calibrated_vars(const Function& fn);

/// The groups of var names that coremltools gives one shared range: the `values` and the output
/// of each such concat op (its output not a function output), groups with a common name merged.
std::vector<std::vector<std::string>> concat_groups(const Function& fn);

/// Runs every sample (input name -> tensor, as Plan::run takes them) through `fn` with the
/// interpreter and returns the range of each calibrated var (calibrated_vars), of each input of
/// the samples, and of each function output an op computes (beyond coremltools, so that an op
/// reading a function output can be quantized); a concat group's members present among the
/// first two share the group's range. The range is the union over all samples (coremltools keeps
/// the last sample's range only). Empty tensors are skipped. At most `group_size` vars are
/// observed per run (every var when <= 0), which bounds the memory of kept activations: each
/// group runs every sample once. The function's outputs are changed while it runs, and restored.
std::map<std::string, Range> calibrate(const std::shared_ptr<Function>& fn,
                                       const std::vector<std::map<std::string, Tensor>>& samples,
                                       int64_t group_size = -1);

}  // namespace milkit::calibration

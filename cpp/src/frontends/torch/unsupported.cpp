// The operators the torch.export importer does not convert, each with the reason, so the
// unsupported-op error and the guide's operator table say why instead of only "not supported".
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "converter.h"
#include "milkit/frontends/torch.h"

namespace milkit {
namespace {

const char* const kBackward =
    "a gradient (backward) operator: Core ML programs run inference only (export the model in eval "
    "mode, outside autograd)";
const char* const kSparse =
    "works on sparse tensors: Core ML multiarrays are dense (call .to_dense() before export)";
const char* const kLayout =
    "reads the memory layout (strides, storage offset): Core ML tensors have no layout to read";
const char* const kForeach =
    "a fused optimizer / training update over tensor lists: not part of inference";
const char* const kQuantized =
    "works on torch quantized tensors: convert the float model and compress it with "
    "milkit.optimize.coreml";

const char* const kSvd =
    "singular values are not supported: MIL has no singular value decomposition (matrix norms with ord "
    "2, -2 or 'nuc' need it)";

// Operators without a family pattern, with their reasons.
const std::vector<std::pair<std::string, std::string>>& named() {
  static const std::vector<std::pair<std::string, std::string>> v = {
      {"aten.set_", kLayout},
      {"aten.resize_",
       "resizes a tensor's storage in place: Core ML tensors are values, not storage"},
      {"aten.to_sparse", kSparse},
      {"aten._linalg_svd", kSvd},
      {"aten.linalg_svd", kSvd},
      {"aten.linalg_svdvals", kSvd},
      {"aten.svd", kSvd},
      {"aten.to_mkldnn", "converts to a oneDNN tensor layout, which has no meaning in Core ML"},
  };
  return v;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::string torch_unsupported_reason(const std::string& target) {
  // "torch.ops.aten.convolution_backward.default" -> "aten.convolution_backward"
  const std::string name = torch_detail::split_target(target).first;
  for (auto& [k, why] : named())
    if (k == name) return why;
  if (ends_with(name, "_backward") || ends_with(name, "_backward_data") ||
      ends_with(name, "_double_backward"))
    return kBackward;
  if (name.find("sparse") != std::string::npos || name.rfind("aten._to_sparse", 0) == 0)
    return kSparse;
  if (name.rfind("aten._foreach_", 0) == 0 || name.rfind("aten._fused_adam", 0) == 0 ||
      name.rfind("aten._fused_sgd", 0) == 0)
    return kForeach;
  if (name.rfind("quantized.", 0) == 0 || name.find("quantize_per_") != std::string::npos ||
      name.rfind("aten.q_", 0) == 0 || name.rfind("aten.int_repr", 0) == 0)
    return kQuantized;
  return "";
}

std::vector<std::pair<std::string, std::string>> torch_unsupported_ops() {
  std::vector<std::pair<std::string, std::string>> r = named();
  r.emplace_back("aten.*_backward", kBackward);
  r.emplace_back("aten.*sparse*", kSparse);
  r.emplace_back("aten._foreach_*", kForeach);
  r.emplace_back("quantized.*, aten.quantize_per_*", kQuantized);
  std::sort(r.begin(), r.end());
  return r;
}

}  // namespace milkit

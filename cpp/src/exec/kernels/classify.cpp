// Kernel of classify: the predicted label (the class of the highest probability, the first one
// on ties) and the dictionary class -> probability (fp64), as Core ML returns a classifier's
// outputs.
#include <cmath>

#include "kernels.h"

namespace milkit {

namespace {

void classify(KernelCtx& k) {
  const Tensor& p = k.in("probabilities");
  const Value* classes = k.value("classes");
  if (!classes || !classes->is_list()) k.fail("input 'classes' must be a const list");
  const int64_t n = classes->numel();
  if (p.numel() != n)
    k.fail("number of classes (" + std::to_string(n) + ") must match the size of 'probabilities' " + p.describe() +
           " (" + std::to_string(p.numel()) + " elements)");
  if (n == 0) k.fail("there are no classes");
  Tensor probs = Tensor::empty(DataType::Float64, {n});
  double* pv = probs.mutable_data<double>();
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    pv[i] = p.get(i);
    if (!std::isnan(pv[i]) && (best < 0 || pv[i] > pv[best])) best = i;
  }
  if (best < 0) best = 0;  // every probability is NaN
  const std::vector<int64_t> shape{n};
  if (classes->dtype() == DataType::String) {
    const auto& names = classes->string_values();
    k.set(0, Tensor::strings({}, {names[static_cast<size_t>(best)]}));
    k.set(1, Tensor::dict(Tensor::strings(shape, names), probs));
  } else {
    Tensor keys = Tensor::empty(DataType::Int64, shape);
    for (int64_t i = 0; i < n; ++i) keys.mutable_data<int64_t>()[i] = classes->as_int(i);
    Tensor label = Tensor::empty(DataType::Int64, {});
    label.mutable_data<int64_t>()[0] = keys.data<int64_t>()[best];
    k.set(0, label);
    k.set(1, Tensor::dict(keys, probs));
  }
}

}  // namespace

void register_classify_kernels(KernelRegistry& r) { r.add("classify", {classify, false}); }

}  // namespace milkit

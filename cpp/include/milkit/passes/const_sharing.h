// milkit/passes/const_sharing.h - const tensors shared across the functions of a program, the way
// coremltools' save_multifunction lets functions store one copy of a weight.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "milkit/ir/ir.h"

namespace milkit {

/// One const of a group of equal consts: its function and op name.
struct SharedConst {
  std::string function;  ///< The function holding the const.
  std::string op;        ///< The const op's name.
};

/// Makes equal const tensors of the program's functions share one value, so the weight writer
/// stores each of them once. As coremltools' const_deduplication across functions: the consts of
/// every function's top-level block (in function, then op order) holding at least one element
/// that is not a string are grouped by dtype, shape and the bytes of their first 100 elements,
/// then compared: equal bytes, or (floating dtypes only) every element within np.allclose's
/// absolute tolerance with rtol 0 (fp16 6e-8, anything else 1e-12). Every later const of a group
/// takes the first one's value. Values are compared in chunks straight from their buffers, so
/// memory-mapped weights are never copied whole. Returns the groups of two or more consts.
std::vector<std::vector<SharedConst>> share_consts_across_functions(Program& program);

}  // namespace milkit

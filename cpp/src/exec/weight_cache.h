// The process's cache of widened weights: the fp32 form of packed and in-place weights for the
// kernels that need a whole matrix (products of many rows, convolutions, other readers of a large
// constant). A widened copy is kept across runs while the total stays within
// MILKIT_WEIGHT_CACHE_MB (default a quarter of the machine's memory; 0 keeps none), the least
// recently used going first; a weight larger than the limit is widened for the call only.
// Private to cpp/src/exec.
#pragma once

#include <cstddef>

#include "milkit/exec/tensor.h"

namespace milkit {

class PackedWeight;

namespace exec {

/// The whole of `w` as fp32: the cached copy, or one decoded now (and cached when it fits).
Tensor widened(const PackedWeight& w);

/// Drops the cached copy of `w` (a weight being destroyed).
void forget_widened(const PackedWeight* w);

/// The cache's limit in bytes: MILKIT_WEIGHT_CACHE_MB when set, else a quarter of MemTotal.
size_t weight_cache_limit();

/// Bytes from environment variable `name` given in megabytes (fractions allowed; capped at
/// 2^50), or `fallback` when it is unset, empty, negative or not a number.
size_t env_megabytes(const char* name, size_t fallback);

}  // namespace exec
}  // namespace milkit

// milkit/exec/threads.h - the interpreter's worker threads.
#pragma once

#include <cstdint>
#include <functional>

namespace milkit {

/// Number of threads kernels use: MILKIT_NUM_THREADS when set, else every core.
int num_threads();
/// Sets the number of threads kernels use (1 runs everything on the calling thread; 0 restores
/// the default). BLAS runs single-threaded blocks that the pool splits (kernels/gemm.h).
void set_num_threads(int n);

/// Runs fn(begin, end) over [0, n) split into chunks of at least `grain` items, on up to
/// num_threads() threads (the caller is one of them). Falls back to the calling thread when the
/// range is small, the pool is busy with another caller (several predicts at once), or the
/// caller is itself running a chunk of a parallel_for (nested calls run where they are).
/// Exceptions thrown by fn are rethrown in the caller.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace milkit

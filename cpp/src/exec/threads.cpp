// The worker pool behind parallel_for.
#include "milkit/exec/threads.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

extern "C" void openblas_set_num_threads(int);

namespace milkit {

namespace {

int default_threads() {
  if (const char* e = std::getenv("MILKIT_NUM_THREADS")) {
    int n = std::atoi(e);
    if (n > 0) return std::min(n, 256);
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
}

std::atomic<int> g_threads{0};

// A fixed set of workers that take chunks of one job at a time. One job runs at once; a caller
// that finds the pool busy runs its job alone.
class Pool {
 public:
  static Pool& get() {
    static Pool* p = new Pool();  // never destroyed: workers may outlive static destruction
    return *p;
  }

  bool try_run(int64_t n, int64_t chunks, const std::function<void(int64_t, int64_t)>& fn,
               int want_threads) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    ensure_workers(want_threads - 1);
    {
      std::lock_guard<std::mutex> lk(m_);
      fn_ = &fn;
      n_ = n;
      chunks_ = chunks;
      next_.store(0);
      done_.store(0);
      error_ = nullptr;
      active_ = std::min<int64_t>(want_threads - 1, static_cast<int64_t>(workers_.size()));
      gen_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    work();
    spin_until([&] { return done_.load(std::memory_order_acquire) == active_; });
    std::unique_lock<std::mutex> lk(m_);
    done_cv_.wait(lk, [&] { return done_.load() == active_; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void ensure_workers(int n) {
    while (static_cast<int>(workers_.size()) < n) {
      int idx = static_cast<int>(workers_.size());
      workers_.emplace_back([this, idx] { loop(idx); });
      workers_.back().detach();
    }
  }

  void work() {
    for (;;) {
      int64_t c = next_.fetch_add(1);
      if (c >= chunks_) return;
      int64_t b = n_ * c / chunks_, e = n_ * (c + 1) / chunks_;
      try {
        (*fn_)(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lk(m_);
        if (!error_) error_ = std::current_exception();
        next_.store(chunks_);
      }
    }
  }

  // Spins (about 100 us) until ready() holds: kernels come in quick succession, and waking a
  // sleeping thread costs tens of microseconds per job.
  template <typename F>
  static void spin_until(F ready) {
    auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
    for (int i = 0; !ready(); ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      __asm__ __volatile__("yield");
#endif
      if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return;
    }
  }

  void loop(int idx) {
    uint64_t seen = 0;
    for (;;) {
      spin_until([&] { return gen_.load(std::memory_order_acquire) != seen; });
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return gen_.load() != seen; });
        seen = gen_.load();
        if (idx >= active_) continue;
      }
      work();
      {
        std::lock_guard<std::mutex> lk(m_);
        done_.fetch_add(1, std::memory_order_release);
      }
      done_cv_.notify_all();
    }
  }

  std::mutex busy_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunks_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> done_{0};
  int64_t active_ = 0;
  std::atomic<uint64_t> gen_{0};
  std::exception_ptr error_;
};

}  // namespace

int num_threads() {
  // OpenBLAS computes single-threaded blocks; the pool does the splitting (see kernels/gemm.h)
  static const bool blas_single = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)blas_single;
  int n = g_threads.load();
  if (n <= 0) {
    n = default_threads();
    g_threads.store(n);
  }
  return n;
}

void set_num_threads(int n) { g_threads.store(n <= 0 ? default_threads() : std::min(n, 256)); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int t = num_threads();
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(n / grain, static_cast<int64_t>(t) * 4);
  if (t <= 1 || chunks <= 1 || !Pool::get().try_run(n, chunks, fn, t)) fn(0, n);
}

}  // namespace milkit

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

/// Whether this thread is running chunks of a pool job: a parallel_for inside one (a kernel
/// calling another, a weight decoded inside a task) runs on this thread, without asking the pool
/// (the caller of the outer job holds its busy lock, which try_lock must not be called on again
/// by its owner).
thread_local bool t_in_job = false;

// A fixed set of workers that take chunks of one job at a time. One job runs at once; a caller
// that finds the pool busy runs its job alone.
//
// Chunks are claimed through one word holding the job's generation and the next chunk, so a
// worker that wakes late claims nothing from a finished job, and the caller waits for the chunks
// to be done, not for every worker to show up: a worker that the OS has not run yet (asleep,
// descheduled, or its core halted by the hypervisor) costs nothing once the others have taken
// all the chunks. Waiting for every worker made a job take a worker's wake-up time, measured at
// 0.3 ms per conv after another runtime's threads had run on the same cores.
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
    Job job{&fn, n, chunks, 0};
    {
      std::lock_guard<std::mutex> lk(m_);
      job.gen = gen_.load() + 1;
      job_ = job;
      done_.store(0);
      failed_.store(false);
      error_ = nullptr;
      active_ = std::min<int64_t>(want_threads - 1, static_cast<int64_t>(workers_.size()));
      claim_.store(tag(job.gen) << 32, std::memory_order_release);
      gen_.store(job.gen, std::memory_order_release);
    }
    cv_.notify_all();
    work(job);
    spin_until([&] { return done_.load(std::memory_order_acquire) == chunks; });
    std::unique_lock<std::mutex> lk(m_);
    done_cv_.wait(lk, [&] { return done_.load() == chunks; });
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  struct Job {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n, chunks;
    uint64_t gen;
  };

  // the generation as kept in claim_'s upper half (it wraps after 2^32 jobs)
  static uint64_t tag(uint64_t gen) { return gen & 0xffffffffu; }

  void ensure_workers(int n) {
    while (static_cast<int>(workers_.size()) < n) {
      int idx = static_cast<int>(workers_.size());
      workers_.emplace_back([this, idx] { loop(idx); });
      workers_.back().detach();
    }
  }

  // Claims and runs chunks of `job` while it is the current job and has chunks left. The job
  // stays alive while a claimed chunk runs: the caller returns only when every chunk is done.
  void work(const Job& job) {
    struct InJob {
      bool was = t_in_job;
      InJob() { t_in_job = true; }
      ~InJob() { t_in_job = was; }
    } in_job;
    for (;;) {
      uint64_t s = claim_.load(std::memory_order_acquire);
      int64_t c;
      do {
        c = static_cast<int64_t>(s & 0xffffffffu);
        if ((s >> 32) != tag(job.gen) || c >= job.chunks) return;
      } while (!claim_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel));
      if (!failed_.load(std::memory_order_relaxed)) {
        int64_t b = job.n * c / job.chunks, e = job.n * (c + 1) / job.chunks;
        try {
          (*job.fn)(b, e);
        } catch (...) {
          std::lock_guard<std::mutex> lk(m_);
          if (!error_) error_ = std::current_exception();
          failed_.store(true);
        }
      }
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == job.chunks) {
        { std::lock_guard<std::mutex> lk(m_); }  // the caller is waiting or sees the count
        done_cv_.notify_all();
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
      Job job;
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return gen_.load() != seen; });
        seen = gen_.load();
        if (idx >= active_) continue;
        job = job_;
      }
      work(job);
    }
  }

  std::mutex busy_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  Job job_{nullptr, 0, 0, 0};        // the current job (under m_)
  std::atomic<uint64_t> claim_{0};   // generation << 32 | next chunk
  std::atomic<int64_t> done_{0};     // chunks of the current job finished
  std::atomic<bool> failed_{false};  // a chunk threw: the rest are counted, not run
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
  if (t <= 1 || chunks <= 1 || t_in_job || !Pool::get().try_run(n, chunks, fn, t)) fn(0, n);
}

}  // namespace milkit

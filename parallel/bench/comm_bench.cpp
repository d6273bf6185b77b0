// Communication benchmark: run under mpiexec, e.g.
//   mpiexec -n 4 --oversubscribe build/parallel/ustrain_comm_bench [MB] [ITERATIONS]
//
// Prints, for a buffer of MB megabytes of f32 (default 16):
// - all_reduce, reduce_scatter and all_gather times with algorithm and bus bandwidth
//   (bus bandwidth as nccl-tests define it: all_reduce moves 2 (n-1)/n of the buffer per
//   rank, reduce_scatter and all_gather (n-1)/n);
// - how much of an all_reduce hides under compute when issued asynchronously: a GEMM-like
//   busy loop sized to take about as long as the all_reduce runs alone, then the two
//   together; hidden = (compute + comm - together) / comm;
// - the communication volume rank 0 counted (Communicator::volume()).
// Times are medians over the iterations, averaged over ranks.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "parallel/comm/communicator.h"
#include "parallel/launch.h"
#include "parallel/world.h"

namespace ustrain {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A small matrix product repeated: compute-bound, in cache, single-threaded.
class BusyLoop {
 public:
  BusyLoop() : a_(kN * kN, 0.5f), b_(kN * kN, 0.25f), c_(kN * kN, 0.0f) {}
  void run(long repeats) {
    for (long r = 0; r < repeats; ++r)
      for (int i = 0; i < kN; ++i)
        for (int k = 0; k < kN; ++k) {
          const float aik = a_[i * kN + k];
          for (int j = 0; j < kN; ++j) c_[i * kN + j] += aik * b_[k * kN + j];
        }
  }
  float checksum() const { return c_[0]; }
  static double flops(long repeats) { return 2.0 * kN * kN * kN * static_cast<double>(repeats); }

 private:
  static constexpr int kN = 64;
  std::vector<float> a_, b_, c_;
};

class Bench {
 public:
  Bench(World& world, int iterations) : world_(world), all_(world.everyone()), iterations_(iterations) {}

  // Median seconds of `body` over the iterations, after a warm-up, averaged over ranks.
  double time(const std::function<void()>& body) {
    std::vector<double> samples;
    for (int i = -2; i < iterations_; ++i) {
      all_->barrier().wait();
      const Clock::time_point t0 = Clock::now();
      body();
      if (i >= 0) samples.push_back(seconds_since(t0));
    }
    std::nth_element(samples.begin(), samples.begin() + static_cast<long>(samples.size() / 2), samples.end());
    float median = static_cast<float>(samples[samples.size() / 2]);
    all_->all_reduce(Tensor(&median, Shape{1}), ReduceOp::avg).wait();
    return median;
  }

  Communicator& all() { return *all_; }
  bool leader() const { return world_.rank() == 0; }

 private:
  World& world_;
  std::unique_ptr<Communicator> all_;
  int iterations_;
};

void report(Bench& b, const char* op, double seconds, double buffer_bytes, double bus_factor) {
  if (!b.leader()) return;
  const double algbw = buffer_bytes / seconds / 1e9;
  fmt::print("  {:<15} {:8.2f} ms   algbw {:6.2f} GB/s   busbw {:6.2f} GB/s\n", op, seconds * 1e3, algbw,
             algbw * bus_factor);
}

int run(int argc, char** argv) {
  const double megabytes = argc > 1 ? std::atof(argv[1]) : 16.0;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 10;
  World world(discover_process());
  Bench bench(world, iterations);
  Communicator& comm = bench.all();
  const int n = comm.size();
  const ShardLayout layout(static_cast<std::int64_t>(megabytes * 1e6 / 4), n);
  const double bytes = static_cast<double>(layout.padded) * 4;
  std::vector<float> full(static_cast<std::size_t>(layout.padded), 1.0f), shard(static_cast<std::size_t>(layout.shard));
  std::vector<std::uint16_t> full_bf16(full.size(), 0x3f80);
  const Tensor full_t(full.data(), Shape{layout.padded});
  const Tensor shard_t(shard.data(), Shape{layout.shard});
  if (bench.leader())
    fmt::print("{} ranks, {:.1f} MB f32 buffer ({} elements), median of {} iterations\n", n, bytes / 1e6,
               layout.padded, iterations);

  const double t_ar = bench.time([&] { comm.all_reduce(full_t).wait(); });
  report(bench, "all_reduce", t_ar, bytes, 2.0 * (n - 1) / n);
  const double t_rs = bench.time([&] { comm.reduce_scatter(shard_t, full_t).wait(); });
  report(bench, "reduce_scatter", t_rs, bytes, 1.0 * (n - 1) / n);
  const double t_ag = bench.time([&] { comm.all_gather(full_t, shard_t).wait(); });
  report(bench, "all_gather", t_ag, bytes, 1.0 * (n - 1) / n);
  const double t_bf = bench.time([&] {
    comm.all_reduce(Tensor(full_bf16.data(), Shape{layout.padded}, DType::bf16)).wait();
  });
  report(bench, "all_reduce bf16", t_bf, bytes / 2, 2.0 * (n - 1) / n);

  // Latency: a one-element all_reduce, 200 per sample.
  float one = 1.0f;
  const double t_small = bench.time([&] {
    for (int i = 0; i < 200; ++i) comm.all_reduce(Tensor(&one, Shape{1})).wait();
  }) / 200;
  if (bench.leader()) fmt::print("  {:<15} {:8.1f} us   (latency of a 1-element f32 all_reduce)\n", "all_reduce 4 B", t_small * 1e6);

  // Size the busy loop to the all_reduce, timed as it will run: on every rank at once.
  BusyLoop loop;
  const double t_trial = bench.time([&] { loop.run(200); });
  std::int32_t repeats = static_cast<std::int32_t>(std::max(1.0, 200 * t_ar / t_trial));
  comm.broadcast(Tensor(&repeats, Shape{1}, DType::i32), 0).wait();  // the same work everywhere
  const double t_compute = bench.time([&] { loop.run(repeats); });
  const double t_together = bench.time([&] {
    Work w = comm.all_reduce(full_t);
    loop.run(repeats);
    w.wait();
  });
  // The same with a caller that waits instead of computing (as a CPU does while its GPU
  // computes): isolates the progress engine from the competition for cores.
  const auto pause = std::chrono::duration<double>(t_ar);
  const double t_sleep = bench.time([&] { std::this_thread::sleep_for(pause); });
  const double t_sleep_together = bench.time([&] {
    Work w = comm.all_reduce(full_t);
    std::this_thread::sleep_for(pause);
    w.wait();
  });
  const auto hidden = [&](double alone, double together) {
    return 100 * std::clamp((alone + t_ar - together) / t_ar, 0.0, 1.0);
  };
  if (bench.leader()) {
    fmt::print("overlap with an async all_reduce of the buffer ({:.2f} ms alone):\n", t_ar * 1e3);
    fmt::print("  busy loop ({:.1f} GFLOP/s) {:7.2f} ms alone, {:7.2f} ms together: {:3.0f}% of the all_reduce hidden\n",
               BusyLoop::flops(repeats) / t_compute / 1e9, t_compute * 1e3, t_together * 1e3,
               hidden(t_compute, t_together));
    fmt::print("  idle caller             {:7.2f} ms alone, {:7.2f} ms together: {:3.0f}% of the all_reduce hidden\n",
               t_sleep * 1e3, t_sleep_together * 1e3, hidden(t_sleep, t_sleep_together));
    if (loop.checksum() <= 0) fmt::print("  (busy loop checksum wrong)\n");
    fmt::print("volume counted on rank 0 (everything above, the timing's own barriers and averages included):\n{}",
               comm.volume().summary());
  }
  return 0;
}

}  // namespace
}  // namespace ustrain

int main(int argc, char** argv) {
  try {
    return ustrain::run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

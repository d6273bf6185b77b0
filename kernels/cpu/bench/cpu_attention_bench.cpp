// ustrain_cpu_attention_bench: the CPU attention's forward + backward time per step under
// document masking and a sliding window against plain causal attention (not a test): a self
// block (the whole sequence on one rank, as training at cp = 1 runs it), the best of --repeat
// timed runs after one warm-up, the masks interleaved so that a busy machine slows each alike.
// Besides the times it prints the work each mask needs (allowed (query, key) pairs) and the
// score entries the kernel's query tiles compute, both against causal.
//
//   ustrain_cpu_attention_bench [--heads H] [--kv-heads K] [--head-dim D] [--threads T] [--repeat R]
//                               [--doc-seq S] [--doc-batch B] [--doc-mean N] [--doc-lengths FILE]
//                               [--window-seq S] [--window W]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/block_mask_rows.h"
#include "kernels/cpu/bench/packed_documents.h"
#include "kernels/cpu/cpu_backend.h"

namespace {

using namespace ustrain;

struct Options {
  std::int64_t heads = 8, kv_heads = 4, head_dim = 32, doc_seq = 2048, doc_batch = 8, doc_mean = 256;
  std::int64_t window_seq = 8192, window = 512;
  std::string doc_lengths;
  int threads = 0, repeat = 3;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      fmt::print(stderr, "{} needs a value; see the usage at the top of cpu_attention_bench.cpp\n", a);
      std::exit(2);
    }
    const std::string v = argv[++i];
    const std::int64_t n = std::atoll(v.c_str());
    if (a == "--heads") o.heads = n;
    else if (a == "--kv-heads") o.kv_heads = n;
    else if (a == "--head-dim") o.head_dim = n;
    else if (a == "--threads") o.threads = static_cast<int>(n);
    else if (a == "--repeat") o.repeat = static_cast<int>(n);
    else if (a == "--doc-seq") o.doc_seq = n;
    else if (a == "--doc-batch") o.doc_batch = n;
    else if (a == "--doc-mean") o.doc_mean = n;
    else if (a == "--doc-lengths") o.doc_lengths = v;
    else if (a == "--window-seq") o.window_seq = n;
    else if (a == "--window") o.window = n;
    else {
      fmt::print(stderr, "unknown option {}; see the usage at the top of cpu_attention_bench.cpp\n", a);
      std::exit(2);
    }
  }
  if (o.threads <= 0) o.threads = omp_get_max_threads();
  return o;
}

// One self block's tensors and its forward + backward under a mask.
struct SelfBlock {
  std::int64_t batch, seq, heads, kv_heads, head_dim;
  std::vector<float> qkv, out, lse, dout, dqkv;
  SelfBlock(const Options& o, std::int64_t b, std::int64_t s)
      : batch(b), seq(s), heads(o.heads), kv_heads(o.kv_heads), head_dim(o.head_dim) {
    const std::int64_t width = (heads + 2 * kv_heads) * head_dim;
    std::mt19937 random(7);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    qkv.resize(static_cast<std::size_t>(b * s * width));
    for (float& x : qkv) x = uniform(random);
    dout.resize(static_cast<std::size_t>(b * s * heads * head_dim));
    for (float& x : dout) x = uniform(random);
    out.resize(dout.size());
    dqkv.resize(qkv.size());
    lse.resize(static_cast<std::size_t>(b * heads * s));
  }
  void step(CpuBackend& cpu, const AttentionMask& mask) {
    const Shape qs{batch, seq, (heads + 2 * kv_heads) * head_dim}, os{batch, seq, heads * head_dim};
    const Shape ls{batch, heads, seq};
    const SeqRange all{0, seq};
    const Tensor q(qkv.data(), qs), o(out.data(), os), l(lse.data(), ls), d_o(dout.data(), os), d(dqkv.data(), qs);
    const int h = static_cast<int>(heads), hkv = static_cast<int>(kv_heads);
    cpu.attention_block_forward(o, l, q, all, Tensor(), all, mask, h, hkv);
    cpu.attention_block_backward(d, Tensor(), d_o, q, all, Tensor(), all, o, l, mask, h, hkv);
  }
};

// The best seconds of `repeat` runs of each of `runs`, interleaved, after one warm-up each.
std::vector<double> best_seconds(int repeat, const std::vector<std::function<void()>>& runs) {
  std::vector<double> best(runs.size(), 1e30);
  for (const auto& run : runs) run();
  for (int r = 0; r < repeat; ++r)
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      runs[i]();
      best[i] = std::min(best[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  return best;
}

// Allowed (query, key) pairs and the score entries of the kernel's tiles of a self block.
std::pair<std::int64_t, std::int64_t> work_of(const AttentionMask& mask, std::int64_t batch, std::int64_t seq) {
  const BlockMaskRows rows(mask, batch, seq, seq);
  std::int64_t allowed = 0;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t r = 0; r < seq; ++r) allowed += rows.keys(b, r).size();
  return {allowed, rows.tiled_entries(kAttentionQueryTile)};
}

void compare(CpuBackend& cpu, SelfBlock& block, const AttentionMask& masked, const std::string& what, int repeat) {
  const AttentionMask causal = AttentionMask::causal();
  const std::vector<double> t =
      best_seconds(repeat, {[&] { block.step(cpu, causal); }, [&] { block.step(cpu, masked); }});
  const auto [causal_pairs, causal_tiles] = work_of(causal, block.batch, block.seq);
  const auto [masked_pairs, masked_tiles] = work_of(masked, block.batch, block.seq);
  fmt::print("{}\n  causal {:9.1f} ms   masked {:9.1f} ms   time {:.3f}x   pairs {:.3f}x   tile entries {:.3f}x\n",
             what, 1e3 * t[0], 1e3 * t[1], t[1] / t[0], double(masked_pairs) / double(causal_pairs),
             double(masked_tiles) / double(causal_tiles));
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  omp_set_num_threads(o.threads);
  CpuBackend cpu(o.threads);
  fmt::print("CPU attention forward + backward per step, heads {}/{}, head dim {}; {} threads; best of {}\n", o.heads,
             o.kv_heads, o.head_dim, o.threads, o.repeat);
  try {
    bench::DocumentLengths lengths = o.doc_lengths.empty()
                                         ? bench::DocumentLengths(static_cast<double>(o.doc_mean), 11)
                                         : bench::DocumentLengths(o.doc_lengths);
    std::vector<std::int32_t> ids = bench::packed_windows(lengths, o.doc_batch, o.doc_seq);
    SelfBlock documents(o, o.doc_batch, o.doc_seq);  // several windows: a fairer sample of documents
    AttentionMask by_document = AttentionMask::causal();
    by_document.q_documents = by_document.k_documents = Tensor(ids.data(), Shape{o.doc_batch, o.doc_seq}, DType::i32);
    const std::int64_t count = ids.empty() ? 0 : o.doc_batch + [&] {
      std::int64_t n = 0;
      for (std::size_t i = 1; i < ids.size(); ++i) n += ids[i] > ids[i - 1] ? 1 : 0;
      return n;
    }();
    compare(cpu, documents, by_document,
            fmt::format("documents: {} x {} tokens, {} documents (mean {:.0f} tokens, {})", o.doc_batch, o.doc_seq,
                        count, double(o.doc_batch * o.doc_seq) / double(count),
                        lengths.listed() ? o.doc_lengths : "geometric"),
            o.repeat);
    SelfBlock windowed(o, 1, o.window_seq);
    AttentionMask window = AttentionMask::causal();
    window.window = o.window;
    compare(cpu, windowed, window,
            fmt::format("window: {} tokens, W = {} (W / S = {:.4f})", o.window_seq, o.window,
                        double(o.window) / double(o.window_seq)),
            o.repeat);
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  }
  return 0;
}

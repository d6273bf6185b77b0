// ustrain_cpu_gemm_bench: the CPU GEMM libraries side by side at a model's linear-layer shapes
// (not a test). For every linear layer of a Llama of the given sizes, its three GEMMs
// (forward, input gradient, weight gradient, as kernels/cpu/cpu_linear.cpp calls them) run
// through OpenBLAS as the fp32 backend runs it (cpu::parallel_sgemm: single-threaded OpenBLAS
// calls split over OpenMP threads), oneDNN's fp32 matmul, and oneDNN's bf16 matmul (what
// bf16 storage runs), and attention's per-head GEMMs on one thread; GFLOP/s each, the best of --repeat timed runs after one warm-up, the
// libraries interleaved so that a busy machine slows each alike.
//
//   ustrain_cpu_gemm_bench [--tokens N] [--seq S] [--d-model D] [--ffn F] [--heads H] [--kv-heads K]
//                          [--vocab V] [--threads T] [--repeat R]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/onednn_gemm.h"
#include "kernels/cpu/onednn_matmul_plan.h"
#include "kernels/cpu/parallel_gemm.h"

namespace {

using ustrain::cpu::GemmShape;
using ustrain::cpu::matmul_plan;
using ustrain::cpu::MatmulPlan;

struct Options {
  std::int64_t tokens = 2048, seq = 256, d_model = 256, ffn = 704, heads = 8, kv_heads = 4, vocab = 257;
  int threads = 0, repeat = 5;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::int64_t {
      if (i + 1 >= argc) {
        fmt::print(stderr, "{} needs a number\n", a);
        std::exit(2);
      }
      return std::atoll(argv[++i]);
    };
    if (a == "--tokens") o.tokens = next();
    else if (a == "--seq") o.seq = next();
    else if (a == "--d-model") o.d_model = next();
    else if (a == "--ffn") o.ffn = next();
    else if (a == "--heads") o.heads = next();
    else if (a == "--kv-heads") o.kv_heads = next();
    else if (a == "--vocab") o.vocab = next();
    else if (a == "--threads") o.threads = static_cast<int>(next());
    else if (a == "--repeat") o.repeat = static_cast<int>(next());
    else {
      fmt::print(stderr,
                 "usage: ustrain_cpu_gemm_bench [--tokens N] [--seq S] [--d-model D] [--ffn F] [--heads H] [--kv-heads K] "
                 "[--vocab V] [--threads T] [--repeat R]\n");
      std::exit(a == "--help" || a == "-h" ? 0 : 2);
    }
  }
  if (o.threads <= 0) o.threads = omp_get_max_threads();
  return o;
}

// oneDNN fp32 matmul, one primitive per shape (as Bf16Gemm does for bf16).
class OnednnF32 {
 public:
  void run(const GemmShape& s, const float* a, const float* b, float* c) {
    auto it = plans_.find(s);
    if (it == plans_.end()) it = plans_.emplace(s, matmul_plan(s, dnnl::memory::data_type::f32, engine_)).first;
    MatmulPlan& p = it->second;
    dnnl::memory am(p.a, engine_, const_cast<float*>(a)), bm(p.b, engine_, const_cast<float*>(b)), cm(p.c, engine_, c);
    p.primitive.execute(stream_, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream_.wait();
  }

 private:
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::map<GemmShape, MatmulPlan> plans_;
};

// The three GEMMs of a linear layer of `in` -> `out` features on `rows` tokens, as
// cpu_linear.cpp shapes them (row-major, weight (out, in)).
std::vector<std::pair<std::string, GemmShape>> linear_gemms(std::int64_t rows, std::int64_t in, std::int64_t out) {
  return {{"forward", {.trans_b = true, .m = rows, .n = out, .k = in, .lda = in, .ldb = in, .ldc = out}},
          {"input grad", {.m = rows, .n = in, .k = out, .lda = out, .ldb = in, .ldc = in}},
          {"weight grad",
           {.trans_a = true, .m = out, .n = in, .k = rows, .lda = out, .ldb = in, .ldc = in, .accumulate = true}}};
}

double best_seconds(int repeat, const std::function<void()>& run) {
  double best = 1e30;
  for (int r = 0; r < repeat; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  omp_set_num_threads(o.threads);
  const std::int64_t d = o.d_model, dh = d / o.heads, qkv = (o.heads + 2 * o.kv_heads) * dh;
  const std::vector<std::pair<std::string, std::pair<std::int64_t, std::int64_t>>> layers = {
      {"qkv", {d, qkv}}, {"attn out", {d, d}}, {"gate/up", {d, 2 * o.ffn}}, {"down", {o.ffn, d}}, {"head", {d, o.vocab}}};
  fmt::print("CPU GEMMs at {} tokens, d_model {}, ffn {}, heads {}/{}, vocab {}; {} threads; best of {} (GFLOP/s)\n",
             o.tokens, d, o.ffn, o.heads, o.kv_heads, o.vocab, o.threads, o.repeat);
  fmt::print("{:<10} {:<12} {:>6} {:>6} {:>6} {:>14} {:>12} {:>12}  {}\n", "layer", "gemm", "m", "n", "k",
             "openblas fp32", "onednn fp32", "onednn bf16", "fp32 winner");
  // Attention's per-head GEMMs as kernels/cpu/cpu_attention.cpp calls them on single threads
  // (one sequence of --seq positions, head size dh): scores Q K^T, P V, and the backward's.
  std::vector<std::tuple<std::string, std::string, GemmShape>> gemms;
  for (const auto& [layer, io] : layers)
    for (const auto& [what, s] : linear_gemms(o.tokens, io.first, io.second)) gemms.emplace_back(layer, what, s);
  const std::int64_t sq = o.seq;
  gemms.emplace_back("attention", "Q K^T", GemmShape{.trans_b = true, .m = sq, .n = sq, .k = dh, .lda = dh, .ldb = dh, .ldc = sq});
  gemms.emplace_back("attention", "P V", GemmShape{.m = sq, .n = dh, .k = sq, .lda = sq, .ldb = dh, .ldc = dh});
  gemms.emplace_back("attention", "dP^T dO",
                     GemmShape{.trans_a = true, .m = sq, .n = dh, .k = sq, .lda = sq, .ldb = dh, .ldc = dh, .accumulate = true});
  ustrain::cpu::Bf16Gemm bf16;
  OnednnF32 f32;
  double total_blas = 0, total_dnnl = 0, total_bf16 = 0;
  int blas_wins = 0, dnnl_wins = 0;
  for (const auto& [layer, what, s] : gemms) {
    {
      const int threads = layer == "attention" ? 1 : o.threads;
      const std::int64_t a_size = s.m * s.k, b_size = s.k * s.n;
      std::vector<float> a(static_cast<std::size_t>(a_size)), b(static_cast<std::size_t>(b_size)),
          c(static_cast<std::size_t>(s.m * s.n), 0.0f);
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 40503u) % 1000) / 1000.0f - 0.5f;
      std::vector<std::uint16_t> a16(a.size()), b16(b.size());
      ustrain::cpu::narrow(a16.data(), ustrain::DType::bf16, a.data(), a_size);
      ustrain::cpu::narrow(b16.data(), ustrain::DType::bf16, b.data(), b_size);
      const auto blas = [&] {
        ustrain::cpu::parallel_sgemm(threads, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans,
                                     static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, a.data(),
                                     static_cast<int>(s.lda), b.data(), static_cast<int>(s.ldb), s.accumulate ? 1.0f : 0.0f,
                                     c.data(), static_cast<int>(s.ldc));
      };
      const auto dnnl32 = [&] {
        omp_set_num_threads(threads);
        f32.run(s, a.data(), b.data(), c.data());
        omp_set_num_threads(o.threads);
      };
      const auto dnnl16 = [&] {
        omp_set_num_threads(threads);
        bf16.run(s, a16.data(), b16.data(), c.data());
        omp_set_num_threads(o.threads);
      };
      blas();  // warm-up: primitives built, pages touched
      dnnl32();
      dnnl16();
      double t_blas = 1e30, t_dnnl = 1e30, t_bf16 = 1e30;
      for (int r = 0; r < o.repeat; ++r) {  // interleaved
        t_blas = std::min(t_blas, best_seconds(1, blas));
        t_dnnl = std::min(t_dnnl, best_seconds(1, dnnl32));
        t_bf16 = std::min(t_bf16, best_seconds(1, dnnl16));
      }
      const double flops = 2.0 * static_cast<double>(s.m * s.n * s.k);
      total_blas += t_blas, total_dnnl += t_dnnl, total_bf16 += t_bf16;
      (t_blas <= t_dnnl ? blas_wins : dnnl_wins)++;
      fmt::print("{:<10} {:<12} {:>6} {:>6} {:>6} {:>14.1f} {:>12.1f} {:>12.1f}  {}\n", layer, what, s.m, s.n, s.k,
                 flops / t_blas / 1e9, flops / t_dnnl / 1e9, flops / t_bf16 / 1e9,
                 t_blas <= t_dnnl ? "openblas" : "onednn");
    }
  }
  fmt::print("all GEMMs above once each: openblas fp32 {:.2f} ms, onednn fp32 {:.2f} ms, onednn bf16 {:.2f} ms; "
             "fp32 faster: openblas {} of {}, onednn {}\n",
             1e3 * total_blas, 1e3 * total_dnnl, 1e3 * total_bf16, blas_wins, blas_wins + dnnl_wins, dnnl_wins);
  return 0;
}

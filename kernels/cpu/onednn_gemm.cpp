#include "kernels/cpu/onednn_gemm.h"

#include <map>
#include <string>
#include <utility>

#include "kernels/cpu/onednn_matmul_plan.h"
#include "kernels/cpu/scoped_omp_threads.h"
#include "kernels/error.h"

namespace ustrain::cpu {

using dnnl::memory;

struct Bf16Gemm::Impl {
  int threads = 0;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<GemmShape, MatmulPlan> plans;
  std::string last_implementation;

  MatmulPlan& plan_for(const GemmShape& s) {
    auto it = plans.find(s);
    if (it != plans.end()) return it->second;
    MatmulPlan p = matmul_plan(s, memory::data_type::bf16, engine);
    last_implementation = p.implementation;
    return plans.emplace(s, std::move(p)).first->second;
  }
};

Bf16Gemm::Bf16Gemm(int threads) : impl_(std::make_unique<Impl>()) { impl_->threads = threads; }
Bf16Gemm::~Bf16Gemm() = default;

void Bf16Gemm::run(const GemmShape& s, const std::uint16_t* a, const std::uint16_t* b, float* c) {
  if (s.m == 0 || s.n == 0) return;
  // oneDNN expects a primitive to run with the thread count it was created under: both happen here.
  const ScopedOmpThreads scope(impl_->threads);
  try {
    MatmulPlan& p = impl_->plan_for(s);
    // oneDNN takes non-const handles; it only reads the inputs.
    memory am(p.a, impl_->engine, const_cast<std::uint16_t*>(a));
    memory bm(p.b, impl_->engine, const_cast<std::uint16_t*>(b));
    memory cm(p.c, impl_->engine, c);
    p.primitive.execute(impl_->stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    impl_->stream.wait();
  } catch (const dnnl::error& e) {
    USTRAIN_ASSERT(false, "oneDNN bf16 matmul (" + std::to_string(s.m) + " x " + std::to_string(s.n) + " x " +
                              std::to_string(s.k) + "): " + e.what());
  }
}

std::string Bf16Gemm::implementation() const { return impl_->last_implementation; }

}  // namespace ustrain::cpu

#include "kernels/cpu/onednn_gemm.h"

#include <map>
#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/scoped_omp_threads.h"
#include "kernels/error.h"

namespace ustrain::cpu {

using dnnl::memory;

struct Bf16Gemm::Impl {
  int threads = 0;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  struct Plan {
    dnnl::matmul primitive;
    memory::desc a, b, c;
  };
  std::map<GemmShape, Plan> plans;
  std::string last_implementation;

  Plan& plan_for(const GemmShape& s) {
    auto it = plans.find(s);
    if (it != plans.end()) return it->second;
    // Row-major views; a transposed operand is the same memory read with swapped strides.
    const memory::desc a({s.m, s.k}, memory::data_type::bf16,
                         s.trans_a ? memory::dims{1, s.lda} : memory::dims{s.lda, 1});
    const memory::desc b({s.k, s.n}, memory::data_type::bf16,
                         s.trans_b ? memory::dims{1, s.ldb} : memory::dims{s.ldb, 1});
    const memory::desc c({s.m, s.n}, memory::data_type::f32, memory::dims{s.ldc, 1});
    dnnl::primitive_attr attr;
    if (s.accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine);
    last_implementation = pd.impl_info_str();
    return plans.emplace(s, Plan{dnnl::matmul(pd), a, b, c}).first->second;
  }
};

Bf16Gemm::Bf16Gemm(int threads) : impl_(std::make_unique<Impl>()) { impl_->threads = threads; }
Bf16Gemm::~Bf16Gemm() = default;

void Bf16Gemm::run(const GemmShape& s, const std::uint16_t* a, const std::uint16_t* b, float* c) {
  if (s.m == 0 || s.n == 0) return;
  // oneDNN expects a primitive to run with the thread count it was created under: both happen here.
  const ScopedOmpThreads scope(impl_->threads);
  try {
    Impl::Plan& p = impl_->plan_for(s);
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

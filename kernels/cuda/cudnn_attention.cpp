#include "kernels/cuda/cudnn_attention.h"

#include <array>
#include <cmath>
#include <compare>
#include <limits>
#include <map>
#include <vector>

#include "kernels/cuda/attention_layout.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cudnn_attention_graph.h"

namespace ustrain::cuda {
namespace {

constexpr std::size_t kHalfBytes = 2;  // bf16 and f16: the only dtypes cudnn_supports admits

enum class Pass : std::uint8_t { forward, backward };

struct PlanKey {
  std::int64_t batch, seq, heads, kv_heads, head_dim;
  DType act;
  Pass pass;
  auto operator<=>(const PlanKey&) const = default;
};

std::string describe(const PlanKey& k) {
  return std::string("attention ") + (k.pass == Pass::forward ? "forward" : "backward") + " (B=" +
         std::to_string(k.batch) + ", S=" + std::to_string(k.seq) + ", H=" + std::to_string(k.heads) +
         ", Hkv=" + std::to_string(k.kv_heads) + ", Dh=" + std::to_string(k.head_dim) + ", " +
         (k.act == DType::bf16 ? "bf16" : "f16") + ")";
}

// A shape's plan, the graph it runs, and the host scalars it passes by value (cuDNN reads
// them through the pointers in each variant pack, so they live as long as the plan).
struct CachedPlan {
  std::string name;
  AttentionGraph graph;
  ExecutionPlan plan;
  std::size_t scratch_bytes = 0;  // our fp32 scratch ahead of cuDNN's own workspace
  float scale = 1.0f;
  float neg_inf = -std::numeric_limits<float>::infinity();
  float one = 1.0f;

  std::size_t workspace_bytes() const {
    return scratch_bytes + align_scratch(static_cast<std::size_t>(plan.workspace_bytes));
  }
};

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// The element `view.offset` of a half-precision buffer.
void* at(const void* base, const StridedView& view) {
  return const_cast<char*>(static_cast<const char*>(base)) + view.offset * static_cast<std::int64_t>(kHalfBytes);
}

}  // namespace

struct CudnnAttention::Impl {
  cudnnHandle_t handle = nullptr;
  std::map<PlanKey, std::unique_ptr<CachedPlan>> plans;  // null: cuDNN has no engine for the shape
  void* workspace = nullptr;
  std::size_t workspace_size = 0;
  std::string last_refusal;

  Impl() { check_cudnn(cudnnCreate(&handle), "cudnnCreate"); }

  ~Impl() {
    plans.clear();  // plans reference the handle
    if (handle != nullptr) cudnnDestroy(handle);
    if (workspace != nullptr) cudaFree(workspace);  // nothing to do about a failure here
  }

  // The cached plan for the shape, built at its first call; null when cuDNN refuses it.
  CachedPlan* plan_for(const PlanKey& key, const AttentionDims& a) {
    if (const auto found = plans.find(key); found != plans.end()) return found->second.get();
    std::unique_ptr<CachedPlan> plan;
    try {
      plan = build(key, a);
    } catch (const CudnnNotSupported& refusal) {
      last_refusal = describe(key) + ": " + refusal.what();
    }
    if (plan != nullptr) reserve(plan->workspace_bytes());  // before caching: a failed allocation caches nothing
    CachedPlan* result = plan.get();
    plans.emplace(key, std::move(plan));
    return result;
  }

  std::unique_ptr<CachedPlan> build(const PlanKey& key, const AttentionDims& a) {
    auto p = std::make_unique<CachedPlan>();
    p->name = describe(key);
    const cudnnDataType_t io = key.act == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    p->graph = key.pass == Pass::forward ? attention_forward_graph(handle, a, io)
                                         : attention_backward_graph(handle, a, io);
    p->plan = make_execution_plan(p->graph);
    p->scratch_bytes = key.pass == Pass::backward ? backward_scratch(a).bytes : 0;
    p->scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.head_dim)));  // as the CPU reference
    return p;
  }

  // Grows the workspace to `bytes`. Only a shape's first call gets here with more than is
  // held; the device is drained first so that no queued kernel still uses the old buffer.
  void reserve(std::size_t bytes) {
    if (bytes <= workspace_size) return;
    if (workspace != nullptr) {
      USTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
      USTRAIN_CUDA_CHECK(cudaFree(workspace));
      workspace = nullptr;
      workspace_size = 0;
    }
    USTRAIN_CUDA_CHECK(cudaMalloc(&workspace, bytes));
    workspace_size = bytes;
  }

  char* scratch() const { return static_cast<char*>(workspace); }

  // Runs the plan on `stream`; by_uid holds the device pointer of each io tensor.
  void execute(CachedPlan& p, std::array<void*, kUidCount>& by_uid, cudaStream_t stream) {
    USTRAIN_ASSERT(workspace_size >= p.workspace_bytes(), p.name + ": workspace smaller than its plan needs");
    by_uid[kUidScale] = &p.scale;
    by_uid[kUidNegInf] = &p.neg_inf;
    by_uid[kUidOne] = &p.one;
    std::vector<void*> pointers;
    for (const std::int64_t uid : p.graph.uids) {
      void* ptr = by_uid.at(static_cast<std::size_t>(uid));
      USTRAIN_ASSERT(ptr != nullptr, p.name + ": no pointer for tensor uid " + std::to_string(uid));
      pointers.push_back(ptr);
    }
    void* plan_workspace = p.plan.workspace_bytes > 0 ? scratch() + p.scratch_bytes : nullptr;

    CudnnDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack for " + p.name);
    pack.set_int64s(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS), p.graph.uids.data(),
                    static_cast<std::int64_t>(p.graph.uids.size()))
        .set_pointers(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS), pointers)
        .set_pointer(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_VARIANT_PACK_WORKSPACE), plan_workspace)
        .finalize();
    check_cudnn(cudnnSetStream(handle, stream), "cudnnSetStream for " + p.name);
    check_cudnn(cudnnBackendExecute(handle, p.plan.plan.get(), pack.get()), "cudnnBackendExecute for " + p.name);
  }
};

CudnnAttention::CudnnAttention() : impl_(std::make_unique<Impl>()) {}
CudnnAttention::~CudnnAttention() = default;

bool CudnnAttention::forward(void* out, float* lse, const void* qkv, std::int64_t B, std::int64_t S, int H, int Hkv,
                             int Dh, DType act, cudaStream_t stream) {
  const AttentionDims a{B, S, H, Hkv, Dh};
  if (!cudnn_supports(a, act) || !aligned16(out) || !aligned16(lse) || !aligned16(qkv)) return false;
  CachedPlan* plan = impl_->plan_for({B, S, H, Hkv, Dh, act, Pass::forward}, a);
  if (plan == nullptr) return false;

  std::array<void*, kUidCount> by_uid{};
  by_uid[kUidQ] = at(qkv, query_view(a));
  by_uid[kUidK] = at(qkv, key_view(a));
  by_uid[kUidV] = at(qkv, value_view(a));
  by_uid[kUidO] = out;
  by_uid[kUidStats] = lse;
  impl_->execute(*plan, by_uid, stream);
  return true;
}

bool CudnnAttention::backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse,
                              std::int64_t B, std::int64_t S, int H, int Hkv, int Dh, DType act, cudaStream_t stream) {
  const AttentionDims a{B, S, H, Hkv, Dh};
  if (!cudnn_supports(a, act)) return false;
  for (const void* p : {static_cast<const void*>(dqkv), dout, qkv, out, static_cast<const void*>(lse)})
    if (!aligned16(p)) return false;
  CachedPlan* plan = impl_->plan_for({B, S, H, Hkv, Dh, act, Pass::backward}, a);
  if (plan == nullptr) return false;

  const BackwardScratch scratch = backward_scratch(a);
  std::array<void*, kUidCount> by_uid{};
  by_uid[kUidQ] = at(qkv, query_view(a));
  by_uid[kUidK] = at(qkv, key_view(a));
  by_uid[kUidV] = at(qkv, value_view(a));
  by_uid[kUidO] = const_cast<void*>(out);
  by_uid[kUidDO] = const_cast<void*>(dout);
  by_uid[kUidStats] = const_cast<float*>(lse);
  by_uid[kUidDQ] = at(dqkv, query_view(a));
  by_uid[kUidDK] = at(dqkv, key_view(a));
  by_uid[kUidDV] = at(dqkv, value_view(a));
  // cuDNN (9.6 on) initialises the dQ accumulator itself: no memset here.
  by_uid[kUidDqAccum] = impl_->scratch() + scratch.dq_accum_offset;
  by_uid[kUidRowDot] = impl_->scratch() + scratch.row_dot_offset;
  impl_->execute(*plan, by_uid, stream);
  return true;
}

std::size_t CudnnAttention::workspace_bytes() const { return impl_->workspace_size; }

const std::string& CudnnAttention::last_refusal() const { return impl_->last_refusal; }

}  // namespace ustrain::cuda

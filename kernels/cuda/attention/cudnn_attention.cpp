#include "kernels/cuda/attention/cudnn_attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <compare>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "kernels/cuda/attention/attention_blocks.h"
#include "kernels/cuda/attention/attention_layout.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_resources.h"
#include "kernels/cuda/attention/cudnn_attention_graph.h"
#include "kernels/cuda/attention/cudnn_plan_key.h"
#include "kernels/cuda/elementwise.h"

namespace ustrain::cuda {
namespace {

constexpr std::size_t kHalfBytes = 2;  // bf16 and f16: the only dtypes cudnn_supports admits

// cuDNN 9.6 made its fused backward initialise the fp32 dQ accumulator itself; before it, the
// caller must zero it for every call (what cuDNN's frontend does there). We zero it then, one
// memset per backward, rather than refuse the fused backward on those versions.
constexpr std::size_t kCudnnZeroesDqAccum = 90600;

// The frontend spells a sliding window (its diagonal band's left bound) since cuDNN 9.2; a
// window runs our kernel before it.
constexpr std::size_t kCudnnSlidingWindow = 90200;

// What a shape's first call decides from: why cuDNN should not take it ("" when it should), the
// graph that runs it, and the scratch its calls stage through ahead of the plan's workspace.
struct ShapeSpec {
  std::string gap;
  std::function<AttentionGraph(const PlanTarget&, cudnnDataType_t)> graph;
  std::size_t scratch_bytes = 0;
  std::int64_t head_dim = 0;
  std::int64_t window = 0;
};

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
  float window = 0.0f;

  std::size_t workspace_bytes() const {
    return scratch_bytes + align_scratch(static_cast<std::size_t>(plan.workspace_bytes));
  }
};

// What became of a shape at its first call; later calls only look it up.
struct ShapeEntry {
  bool offered = false;               // inside cudnn_supports()
  std::unique_ptr<CachedPlan> plan;   // null when not offered or refused
  std::string refusal;                // why cuDNN refused an offered shape
  bool misalignment_logged = false;
};

// Why the installed cuDNN should not take a shape of this reason and window ("" when it should).
std::string version_gap(std::string reason, std::int64_t window) {
  if (reason.empty() && window > 0 && cudnnGetVersion() < kCudnnSlidingWindow)
    return "a sliding window needs cuDNN 9.2 or later, this is " + std::to_string(cudnnGetVersion());
  return reason;
}

// What cuDNN runs a whole causal sequence's pass, or one block's pass, with.
ShapeSpec whole_spec(const AttentionDims& a, DType act, Pass pass) {
  const std::string gap = version_gap(cudnn_unsupported_reason(a, act), a.window);
  if (pass == Pass::forward)
    return {gap, [a](const PlanTarget& t, cudnnDataType_t io) { return attention_forward_graph(t, a, io); }, 0,
            a.head_dim, a.window};
  return {gap, [a](const PlanTarget& t, cudnnDataType_t io) { return attention_backward_graph(t, a, io); },
          backward_scratch(a).bytes, a.head_dim, a.window};
}

ShapeSpec block_spec(const BlockAttentionDims& a, DType act, Pass pass) {
  const std::string gap = version_gap(cudnn_block_unsupported_reason(a, act), a.window);
  if (pass == Pass::forward)
    return {gap, [a](const PlanTarget& t, cudnnDataType_t io) { return attention_block_forward_graph(t, a, io); },
            block_forward_scratch(a, kHalfBytes).bytes, a.head_dim, a.window};
  return {gap, [a](const PlanTarget& t, cudnnDataType_t io) { return attention_block_backward_graph(t, a, io); },
          block_backward_scratch(a, kHalfBytes).bytes, a.head_dim, a.window};
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

bool all_aligned16(std::initializer_list<const void*> buffers) {
  return std::all_of(buffers.begin(), buffers.end(), [](const void* p) { return aligned16(p); });
}

// The element `view.offset` of a half-precision buffer.
void* at(const void* base, const StridedView& view) {
  return const_cast<char*>(static_cast<const char*>(base)) + view.offset * static_cast<std::int64_t>(kHalfBytes);
}

// An execution's device pointer of each io tensor, by uid.
using Bindings = std::array<void*, kUidCount>;

// Bindings that start with Q at view q of q_buffer and K and V at views k and v of kv_buffer.
Bindings bind_qkv(const void* q_buffer, const StridedView& q, const void* kv_buffer, const StridedView& k,
                  const StridedView& v) {
  Bindings by_uid{};
  by_uid[kUidQ] = at(q_buffer, q);
  by_uid[kUidK] = at(kv_buffer, k);
  by_uid[kUidV] = at(kv_buffer, v);
  return by_uid;
}

}  // namespace

struct CudnnAttention::Impl {
  cudnnHandle_t handle = nullptr;
  bool require_cudnn = false;
  bool zero_dq_accum = cudnnGetVersion() < kCudnnZeroesDqAccum;
  std::map<PlanKey, ShapeEntry> shapes;
  CudnnAttention::TakeScratch take_scratch;

  Impl(bool require, CudnnAttention::TakeScratch take) : require_cudnn(require), take_scratch(std::move(take)) {
    check_cudnn(cudnnCreate(&handle), "cudnnCreate");
  }

  ~Impl() {
    shapes.clear();  // plans reference the handle
    if (handle != nullptr) cudnnDestroy(handle);
  }

  // What became of the shape, deciding it now when it is new. `spec()` gives the ShapeSpec;
  // it is asked only then.
  template <class Spec>
  ShapeEntry& entry_for(const PlanKey& key, const Spec& spec) {
    auto found = shapes.find(key);
    if (found == shapes.end()) found = shapes.emplace(key, first_call(key, spec())).first;
    return found->second;
  }

  // The scratch a call of the shape takes when cuDNN runs it; 0 when it does not.
  template <class Spec>
  std::size_t scratch_bytes(const PlanKey& key, const Spec& spec) {
    const ShapeEntry& entry = entry_for(key, spec);
    return entry.plan != nullptr ? entry.plan->workspace_bytes() : 0;
  }

  // The plan to run the shape with, or null when the caller's kernel runs it (see the header).
  template <class Spec>
  CachedPlan* plan_for(const PlanKey& key, const Spec& spec, bool buffers_aligned) {
    ShapeEntry& entry = entry_for(key, spec);
    if (!entry.offered) return nullptr;
    if (entry.plan == nullptr) return refused(key, entry.refusal);
    if (!buffers_aligned) {
      const std::string reason = "a buffer is not 16-byte aligned";
      if (!std::exchange(entry.misalignment_logged, true))
        spdlog::warn("{} not run by cuDNN: {}{}", describe(key), reason, fallback_note());
      return refused(key, reason);
    }
    return entry.plan.get();
  }

  // Decides a shape at its first call, logging the outcome unless cuDNN takes it.
  ShapeEntry first_call(const PlanKey& key, const ShapeSpec& spec) {
    ShapeEntry entry;
    if (!spec.gap.empty()) {
      spdlog::log(key.act == DType::f32 ? spdlog::level::debug : spdlog::level::info,
                  "{} is outside cuDNN's fused attention ({}): our kernel runs it", describe(key), spec.gap);
      return entry;
    }
    entry.offered = true;
    try {
      entry.plan = build(key, spec);
    } catch (const CudnnNotSupported& refusal) {
      entry.refusal = refusal.what();
      spdlog::warn("cuDNN refused {}: {}{}", describe(key), entry.refusal, fallback_note());
    }
    return entry;
  }

  const char* fallback_note() const { return require_cudnn ? "" : "; our kernel runs it"; }

  // Null for the fallback, or under require_cudnn an error naming cuDNN's reason.
  CachedPlan* refused(const PlanKey& key, const std::string& reason) const {
    if (require_cudnn)
      throw std::runtime_error(describe(key) + ": cuDNN refused the shape and USTRAIN_REQUIRE_CUDNN=1 forbids " +
                               "the fallback kernel: " + reason);
    return nullptr;
  }

  std::unique_ptr<CachedPlan> build(const PlanKey& key, const ShapeSpec& spec) {
    auto p = std::make_unique<CachedPlan>();
    p->name = describe(key);
    const cudnnDataType_t io = key.act == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    const PlanTarget gpu{handle, nullptr};
    p->graph = spec.graph(gpu, io);
    p->plan = make_execution_plan(p->graph, gpu);
    p->scratch_bytes = spec.scratch_bytes;
    p->scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(spec.head_dim)));  // as the CPU reference
    p->window = static_cast<float>(spec.window);  // exact: kMaxCudnnWindow bounds it
    return p;
  }

  // The call's scratch: our staging from its start, the plan's own workspace after it.
  char* scratch_for(const CachedPlan& p) const { return static_cast<char*>(take_scratch(p.workspace_bytes(), p.name)); }

  // The backward's fp32 scratch operands, the dQ accumulator zeroed where cuDNN does not.
  void bind_backward_scratch(Bindings& by_uid, char* dq_accum, std::int64_t dq_accum_elements, char* row_dot,
                             cudaStream_t stream) const {
    by_uid[kUidDqAccum] = dq_accum;
    by_uid[kUidRowDot] = row_dot;
    const auto dq_accum_bytes = static_cast<std::size_t>(dq_accum_elements) * sizeof(float);
    if (zero_dq_accum) USTRAIN_CUDA_CHECK(cudaMemsetAsync(dq_accum, 0, dq_accum_bytes, stream));
  }

  // Runs the plan on `stream` in `scratch` (scratch_for(p)); by_uid holds the device pointer
  // of each io tensor.
  void execute(CachedPlan& p, Bindings& by_uid, char* scratch, cudaStream_t stream) {
    by_uid[kUidScale] = &p.scale;
    by_uid[kUidNegInf] = &p.neg_inf;
    by_uid[kUidOne] = &p.one;
    by_uid[kUidWindow] = &p.window;
    std::vector<void*> pointers;
    for (const std::int64_t uid : p.graph.uids) {
      void* ptr = by_uid.at(static_cast<std::size_t>(uid));
      USTRAIN_ASSERT(ptr != nullptr, p.name + ": no pointer for tensor uid " + std::to_string(uid));
      pointers.push_back(ptr);
    }
    void* plan_workspace = p.plan.workspace_bytes > 0 ? scratch + p.scratch_bytes : nullptr;

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

CudnnAttention::CudnnAttention(bool require_cudnn, TakeScratch take_scratch)
    : impl_(std::make_unique<Impl>(require_cudnn, std::move(take_scratch))) {}
CudnnAttention::~CudnnAttention() = default;

bool CudnnAttention::forward(void* out, float* lse, const void* qkv, std::int64_t B, std::int64_t S, int H, int Hkv,
                             int Dh, std::int64_t window, DType act, cudaStream_t stream) {
  const AttentionDims a{B, S, H, Hkv, Dh, window};
  const auto spec = [&] { return whole_spec(a, act, Pass::forward); };
  CachedPlan* plan = impl_->plan_for(whole_key(a, act, Pass::forward), spec, all_aligned16({out, lse, qkv}));
  if (plan == nullptr) return false;

  Bindings by_uid = bind_qkv(qkv, query_view(a), qkv, key_view(a), value_view(a));
  by_uid[kUidO] = out;
  by_uid[kUidStats] = lse;
  impl_->execute(*plan, by_uid, impl_->scratch_for(*plan), stream);
  return true;
}

bool CudnnAttention::backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse,
                              std::int64_t B, std::int64_t S, int H, int Hkv, int Dh, std::int64_t window, DType act,
                              cudaStream_t stream) {
  const AttentionDims a{B, S, H, Hkv, Dh, window};
  const auto spec = [&] { return whole_spec(a, act, Pass::backward); };
  CachedPlan* plan =
      impl_->plan_for(whole_key(a, act, Pass::backward), spec, all_aligned16({dqkv, dout, qkv, out, lse}));
  if (plan == nullptr) return false;

  const BackwardScratch scratch = backward_scratch(a);
  char* base = impl_->scratch_for(*plan);
  Bindings by_uid = bind_qkv(qkv, query_view(a), qkv, key_view(a), value_view(a));
  by_uid[kUidO] = const_cast<void*>(out);
  by_uid[kUidDO] = const_cast<void*>(dout);
  by_uid[kUidStats] = const_cast<float*>(lse);
  by_uid[kUidDQ] = at(dqkv, query_view(a));
  by_uid[kUidDK] = at(dqkv, key_view(a));
  by_uid[kUidDV] = at(dqkv, value_view(a));
  impl_->bind_backward_scratch(by_uid, base + scratch.dq_accum_offset, dq_accum_view(a).numel(),
                               base + scratch.row_dot_offset, stream);
  impl_->execute(*plan, by_uid, base, stream);
  return true;
}

bool CudnnAttention::block_forward(float* out, float* lse, const void* qkv, const void* kv, std::int64_t q_begin,
                                   std::int64_t k_begin, const BlockAttentionDims& a, DType act, cudaStream_t stream) {
  const void* q_rows = at(qkv, {{}, {}, q_begin * a.qkv_width()});  // the block's first query row
  const void* k_rows = at(kv, {{}, {}, k_begin * a.kv_width()});    // and key row
  const auto spec = [&] { return block_spec(a, act, Pass::forward); };
  CachedPlan* plan =
      impl_->plan_for(block_key(a, act, Pass::forward), spec, all_aligned16({out, lse, q_rows, k_rows}));
  if (plan == nullptr) return false;

  char* base = impl_->scratch_for(*plan);
  void* o = base + block_forward_scratch(a, kHalfBytes).out_offset;  // (B, q_rows, H Dh) in act
  Bindings by_uid = bind_qkv(q_rows, block_query_view(a), k_rows, block_key_view(a), block_value_view(a));
  by_uid[kUidO] = o;
  by_uid[kUidStats] = lse;
  impl_->execute(*plan, by_uid, base, stream);
  convert(out, DType::f32, o, act, a.batch * a.q_rows * a.out_width(), stream);
  return true;
}

bool CudnnAttention::block_backward(float* dq, float* dkv, const void* dout, const void* qkv, const void* kv,
                                    const void* out, const float* lse, std::int64_t q_begin, std::int64_t k_begin,
                                    const BlockAttentionDims& a, DType act, cudaStream_t stream) {
  const std::int64_t OW = a.out_width(), KW = a.kv_width();
  const void* q_rows = at(qkv, {{}, {}, q_begin * a.qkv_width()});
  const void* k_rows = at(kv, {{}, {}, k_begin * KW});
  const void* o_rows = at(out, {{}, {}, q_begin * OW});
  const void* do_rows = at(dout, {{}, {}, q_begin * OW});
  const auto spec = [&] { return block_spec(a, act, Pass::backward); };
  CachedPlan* plan = impl_->plan_for(block_key(a, act, Pass::backward), spec,
                                     all_aligned16({q_rows, k_rows, o_rows, do_rows}));
  if (plan == nullptr) return false;

  const BlockScratch scratch = block_backward_scratch(a, kHalfBytes);
  char* base = impl_->scratch_for(*plan);
  // The merged lse's rows of the block, packed (B, H, q_rows): cuDNN reads them 16-byte aligned.
  float* block_lse = reinterpret_cast<float*>(base + scratch.lse_offset);
  const std::size_t row_bytes = static_cast<std::size_t>(a.q_rows) * sizeof(float);
  USTRAIN_CUDA_CHECK(cudaMemcpy2DAsync(block_lse, row_bytes, lse + q_begin,
                                       static_cast<std::size_t>(a.q_seq) * sizeof(float), row_bytes,
                                       static_cast<std::size_t>(a.batch * a.heads), cudaMemcpyDeviceToDevice, stream));
  void* block_dq = base + scratch.dq_offset;    // (B, q_rows, H Dh) in act
  void* block_dkv = base + scratch.dkv_offset;  // (B, kv_rows, 2 Hkv Dh) in act
  Bindings by_uid = bind_qkv(q_rows, block_query_view(a), k_rows, block_key_view(a), block_value_view(a));
  by_uid[kUidO] = const_cast<void*>(o_rows);
  by_uid[kUidDO] = const_cast<void*>(do_rows);
  by_uid[kUidStats] = block_lse;
  by_uid[kUidDQ] = block_dq;
  by_uid[kUidDK] = at(block_dkv, block_key_grad_view(a));
  by_uid[kUidDV] = at(block_dkv, block_value_grad_view(a));
  impl_->bind_backward_scratch(by_uid, base + scratch.dq_accum_offset, block_dq_accum_view(a).numel(),
                               base + scratch.row_dot_offset, stream);
  impl_->execute(*plan, by_uid, base, stream);
  // The block's gradients, in act, into the fp32 sums at its rows.
  attention_add_rows(dq + q_begin * OW, a.q_seq, block_dq, act, a.batch, a.q_rows, OW, stream);
  attention_add_rows(dkv + k_begin * KW, a.kv_seq, block_dkv, act, a.batch, a.kv_rows, KW, stream);
  return true;
}

std::size_t CudnnAttention::scratch_bytes(const AttentionDims& a, DType act, bool backward) {
  const Pass pass = backward ? Pass::backward : Pass::forward;
  return impl_->scratch_bytes(whole_key(a, act, pass), [&] { return whole_spec(a, act, pass); });
}

std::size_t CudnnAttention::block_scratch_bytes(const BlockAttentionDims& a, DType act, bool backward) {
  const Pass pass = backward ? Pass::backward : Pass::forward;
  return impl_->scratch_bytes(block_key(a, act, pass), [&] { return block_spec(a, act, pass); });
}

}  // namespace ustrain::cuda

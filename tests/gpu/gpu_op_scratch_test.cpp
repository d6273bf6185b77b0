// The CUDA backend's planned op scratch: the bytes it reports for a recorded op cover what the
// op takes (cuDNN's plan workspace added to the deviceless figure), ops run in the arena handed
// to it, and an op needing more than the arena is an internal error naming the op.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "kernels/record/op_scratch.h"
#include "kernels/record/recording_backend.h"
#include "tests/unit/kernels/whole_attention.h"

namespace ustrain::gpu_test {
namespace {

Tensor recorded(RecordingBackend& be, Shape shape, DType dtype) {
  return Tensor(be.allocate(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype)), shape, dtype, Device::cuda);
}

TEST_F(GpuTest, EmbeddingBackwardRunsInThePlannedOpScratchAndMoreIsAnInternalError) {
  const std::int64_t n = 3000, vocab = 500, dim = 64;
  RecordingBackend recorder(Device::cuda);
  recorder.embedding_backward(recorded(recorder, {vocab, dim}, DType::f32), recorded(recorder, {n}, DType::i32),
                              recorded(recorder, {n, dim}, DType::f32));
  const std::size_t planned = gpu().op_scratch_bytes(recorder.ops().back());
  EXPECT_EQ(planned, cuda_op_scratch_bytes(recorder.ops().back()));

  auto ids = random_ids(static_cast<std::size_t>(n), static_cast<std::int32_t>(vocab), 21);
  auto dout = random_values(static_cast<std::size_t>(n * dim), 22, DType::f32);
  std::vector<float> want(static_cast<std::size_t>(vocab * dim), 0.0f);
  cpu().embedding_backward(host(want, {vocab, dim}), host_ids(ids, {n}), host(dout, {n, dim}));

  void* arena = gpu().allocate(planned);
  gpu().use_op_scratch(arena, planned);
  {
    auto dtable = on_device(gpu(), std::vector<float>(want.size(), 0.0f), {vocab, dim}, DType::f32);
    auto dids = ids_on_device(gpu(), ids);
    auto ddout = on_device(gpu(), dout, {n, dim}, DType::f32);
    gpu().embedding_backward(*dtable, *dids, *ddout);
    expect_close(dtable->download(), want, fp32_tolerance(Measure::norm_rel), "embedding backward in the planned scratch");

    auto more_ids = ids_on_device(gpu(), random_ids(static_cast<std::size_t>(2 * n), static_cast<std::int32_t>(vocab), 23));
    auto more_dout = on_device(gpu(), random_values(static_cast<std::size_t>(2 * n * dim), 24, DType::f32),
                               {2 * n, dim}, DType::f32);
    try {
      gpu().embedding_backward(*dtable, *more_ids, *more_dout);
      ADD_FAILURE() << "an op needing more than the planned op scratch ran";
    } catch (const std::logic_error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("embedding_backward"), std::string::npos) << message;
      EXPECT_NE(message.find(std::to_string(planned)), std::string::npos) << message;
    }
  }
  gpu().use_op_scratch(nullptr, 0);  // taken back before it is released
  gpu().release(arena);
}

TEST_F(GpuTest, CudnnAttentionsPlanWorkspaceIsAddedToTheDevicelessFigure) {
  const std::int64_t B = 2, S = 256, H = 8, Hkv = 4, Dh = 64;
  RecordingBackend recorder(Device::cuda);
  const Tensor qkv = recorded(recorder, {B, S, (H + 2 * Hkv) * Dh}, DType::bf16);
  const Tensor out = recorded(recorder, {B, S, H * Dh}, DType::bf16);
  const Tensor lse = recorded(recorder, {B, H, S}, DType::f32);
  test::whole_attention_forward(recorder, out, lse, qkv, H, Hkv);
  test::whole_attention_backward(recorder, qkv, out, qkv, out, lse, H, Hkv);
  for (const RecordedOp& op : recorder.ops())
    EXPECT_GE(gpu().op_scratch_bytes(op), cuda_op_scratch_bytes(op)) << op.name;
}

}  // namespace
}  // namespace ustrain::gpu_test

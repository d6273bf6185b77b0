// Our cuDNN attention graphs, built by the code the CUDA backend runs (cudnn_attention_graph.h)
// and planned for an H100 described in JSON instead of a GPU's handle: every graph of the
// shapes we train must reach a plan whose kernels cuDNN has built, failing at most when it
// loads them into the driver (the stub libcuda.so.1 that CTest puts first on LD_LIBRARY_PATH;
// see tests/gpu_plan/CMakeLists.txt). Graphs of shapes cuDNN must refuse must find no plan, so
// a check that passed everything would fail here.
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "kernels/cuda/attention/attention_layout.h"
#include "kernels/cuda/attention/cudnn_attention_graph.h"

namespace ustrain::cuda {
namespace {

// An H100 SXM 80GB as cuDNN's device-property descriptor reads it (its field names).
constexpr const char* kH100 = R"({
  "deviceName": "NVIDIA H100 80GB HBM3", "deviceVer": 900, "driverVer": 13000, "cudaDeviceId": 0,
  "pciDeviceId": 8960, "multiProcessorCount": 132, "smClockRateKHz": 1980000, "memClockRateKHz": 2619000,
  "l2CacheSize": 52428800, "totalGlobalMem": 85520809984, "warpSize": 32,
  "maxGridSize": [2147483647, 65535, 65535], "maxBlockSize": [1024, 1024, 64], "maxThreadsPerBlock": 1024,
  "maxThreadsPerSM": 2048, "maxCtasPerSM": 32, "regsPerBlock": 65536, "maxRegistersPerSM": 65536,
  "maxSharedMemoryPerBlock": 49152, "maxSharedMemoryPerBlockOptin": 232448, "reservedSharedMemoryPerBlock": 1024,
  "isTccDriver": 0, "supportCoopLaunch": 1
})";

struct Shape {
  std::string name;
  AttentionDims dims;
  std::string error;  // why the shape could not be read (a recipe), failing its tests
};

// Attention as a recipe trains it on one GPU: micro_batch sequences of seq_len tokens.
Shape recipe_shape(const std::string& name, const std::string& recipe) {
  Shape s{name, {}, ""};
  try {
    const toml::table t = toml::parse_file(std::string(USTRAIN_SOURCE_DIR) + "/" + recipe);
    const auto need = [&](const char* path) {
      const auto v = t.at_path(path).value<std::int64_t>();
      if (!v) throw std::runtime_error(std::string("no integer ") + path);
      return *v;
    };
    const std::int64_t heads = need("model.n_heads");
    s.dims = {need("train.micro_batch"), need("train.seq_len"), heads, need("model.n_kv_heads"),
              need("model.d_model") / heads};
  } catch (const std::exception& e) {
    s.error = recipe + ": " + e.what();
  }
  return s;
}

// The shape under a sliding window of 1/fraction of its sequence.
Shape windowed(Shape s, std::int64_t fraction) {
  s.dims.window = s.dims.seq / fraction;
  return s;
}

std::vector<Shape> trained_shapes() {
  return {
      // tests/gpu/gpu_matmul_ops_test.cpp's attention cases that cuDNN should take (B, S, H, Hkv, Dh);
      // the first is also gpu_self_attention_test.cpp's causal self block that cuDNN takes.
      {"gpu_test_gqa", {2, 128, 8, 2, 64}, ""},
      {"gpu_test_long", {1, 1024, 8, 2, 64}, ""},
      {"gpu_test_odd", {1, 77, 4, 2, 40}, ""},
      {"gpu_test_mha128", {2, 200, 4, 4, 128}, ""},
      {"gpu_test_mqa", {3, 9, 6, 1, 16}, ""},
      recipe_shape("quickstart", "recipes/quickstart.toml"),
      recipe_shape("bench_1b", "recipes/bench-1b.toml"),
      // Sliding windows (the causal graph with its diagonal band): tests/gpu's windowed cases
      // that cuDNN takes, a window of one key, and a recipe's sequence under a window of 1/4 of it.
      {"gpu_test_gqa_window", {2, 128, 8, 2, 64, 32}, ""},
      {"gpu_test_mha128_window", {2, 200, 4, 4, 128, 77}, ""},
      {"window_of_one", {1, 64, 4, 2, 64, 1}, ""},
      windowed(recipe_shape("bench_1b_window", "recipes/bench-1b.toml"), 4),
  };
}

enum class Pass { forward, backward };

struct GraphCase {
  Shape shape;
  DType act;
  Pass pass;
};

// For gtest's messages (instead of the parameter's bytes).
void PrintTo(const GraphCase& c, std::ostream* os) {
  *os << c.shape.name << " " << dtype_name(c.act) << (c.pass == Pass::forward ? " forward" : " backward");
}

cudnnDataType_t cudnn_type(DType act) {
  return act == DType::bf16 ? CUDNN_DATA_BFLOAT16 : act == DType::f16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

AttentionGraph build(const PlanTarget& target, const AttentionDims& a, DType act, Pass pass) {
  return pass == Pass::forward ? attention_forward_graph(target, a, cudnn_type(act))
                               : attention_backward_graph(target, a, cudnn_type(act));
}

std::string dims_text(const AttentionDims& a) {
  return "B=" + std::to_string(a.batch) + " S=" + std::to_string(a.seq) + " H=" + std::to_string(a.heads) +
         " Hkv=" + std::to_string(a.kv_heads) + " Dh=" + std::to_string(a.head_dim) +
         (a.window > 0 ? " window=" + std::to_string(a.window) : "");
}

class CudnnAttentionPlan : public ::testing::TestWithParam<GraphCase> {
 protected:
  CudnnDescriptor device_ = described_device(kH100);
  PlanTarget h100_{nullptr, device_.get()};
};

TEST_P(CudnnAttentionPlan, ReachesAPlanForAnH100) {
  const GraphCase& c = GetParam();
  ASSERT_TRUE(c.shape.error.empty()) << c.shape.error;
  const std::string what = c.shape.name + " " + dims_text(c.shape.dims) + " " + dtype_name(c.act);
  // The backend offers cuDNN exactly these shapes; a trained shape outside them would quietly
  // run our kernel.
  ASSERT_EQ(cudnn_unsupported_reason(c.shape.dims, c.act), "") << what;

  const AttentionGraph graph = build(h100_, c.shape.dims, c.act, c.pass);
  const PlanSearch search = search_execution_plans(graph, h100_);
  EXPECT_TRUE(search.accepted()) << what << ": " << search.summary()
                                 << " (a plan must fail only at the module load, CUDA_ERROR_STUB_LIBRARY; run "
                                    "through ctest, which puts the stub libcuda.so.1 first on LD_LIBRARY_PATH)";
}

std::vector<GraphCase> graph_cases() {
  std::vector<GraphCase> cases;
  for (const Shape& s : trained_shapes())
    for (const DType act : {DType::bf16, DType::f16})
      for (const Pass pass : {Pass::forward, Pass::backward}) cases.push_back({s, act, pass});
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<GraphCase>& info) {
  const GraphCase& c = info.param;
  return c.shape.name + "_" + dtype_name(c.act) + (c.pass == Pass::forward ? "_forward" : "_backward");
}

INSTANTIATE_TEST_SUITE_P(Trained, CudnnAttentionPlan, ::testing::ValuesIn(graph_cases()), case_name);

// ---- blocks of the sequence (context parallelism) ----

struct BlockCase {
  std::string name;
  BlockAttentionDims dims;
  std::string error;
};

// The rank-local blocks of a recipe's sequence split over two ranks: S/2 queries against S/2
// keys, causal (the rank's own part) or not (the other's).
BlockCase recipe_block(const std::string& name, const std::string& recipe, bool causal) {
  const Shape whole = recipe_shape(name, recipe);
  const AttentionDims& a = whole.dims;
  const std::int64_t half = a.seq / 2;
  return {name, {a.batch, half, half, half, half, a.heads, a.kv_heads, a.head_dim, causal}, whole.error};
}

std::vector<BlockCase> block_cases() {
  // (B, Sq, Skv, q rows, kv rows, H, Hkv, Dh, causal): tests/gpu/gpu_attention_blocks_test.cpp's
  // blocks that cuDNN should take, and those of its split sequences.
  return {
      {"gpu_test_gqa_unequal", {2, 70, 45, 40, 37, 8, 2, 64, false}, ""},
      {"gpu_test_mqa_unequal", {3, 9, 20, 9, 16, 6, 1, 16, false}, ""},
      {"gpu_test_mha128_causal", {2, 64, 64, 64, 64, 4, 2, 128, true}, ""},
      {"split_gqa_off_diagonal", {2, 96, 96, 56, 40, 8, 2, 64, false}, ""},
      {"split_gqa_diagonal", {2, 96, 96, 56, 56, 8, 2, 64, true}, ""},
      {"split_mha_odd", {1, 77, 77, 27, 30, 4, 4, 40, false}, ""},
      {"split_mha_odd_diagonal", {1, 77, 77, 30, 30, 4, 4, 40, true}, ""},
      {"split_mqa_diagonal", {3, 33, 33, 16, 16, 6, 1, 16, true}, ""},
      {"split_gqa128_off_diagonal", {2, 130, 130, 66, 64, 4, 2, 128, false}, ""},
      recipe_block("quickstart_cp2_own", "recipes/quickstart.toml", true),
      recipe_block("quickstart_cp2_other", "recipes/quickstart.toml", false),
      recipe_block("bench_1b_cp2_own", "recipes/bench-1b.toml", true),
      recipe_block("bench_1b_cp2_other", "recipes/bench-1b.toml", false),
      // A rank's own causal block under a sliding window (the band on the block's diagonal).
      {"split_gqa_diagonal_window", {2, 96, 96, 56, 56, 8, 2, 64, true, 24}, ""},
      {"split_mqa_diagonal_window", {3, 33, 33, 16, 16, 6, 1, 16, true, 5}, ""},
  };
}

struct BlockGraphCase {
  BlockCase block;
  DType act;
  Pass pass;
};

void PrintTo(const BlockGraphCase& c, std::ostream* os) {
  *os << c.block.name << " " << dtype_name(c.act) << (c.pass == Pass::forward ? " forward" : " backward");
}

AttentionGraph build_block(const PlanTarget& target, const BlockAttentionDims& a, DType act, Pass pass) {
  return pass == Pass::forward ? attention_block_forward_graph(target, a, cudnn_type(act))
                               : attention_block_backward_graph(target, a, cudnn_type(act));
}

std::string block_text(const BlockAttentionDims& a) {
  std::string t = "B=";  // appended piece by piece: GCC 12 misreads chains of temporaries (-Wrestrict)
  for (const auto& [label, value] :
       {std::pair<const char*, std::int64_t>{"", a.batch}, {" Sq=", a.q_seq}, {" Skv=", a.kv_seq}, {" q=", a.q_rows},
        {" kv=", a.kv_rows}, {" H=", a.heads}, {" Hkv=", a.kv_heads}, {" Dh=", a.head_dim}}) {
    t += label;
    t += std::to_string(value);
  }
  t += a.causal ? " causal" : " no mask";
  if (a.window > 0) t += " window=" + std::to_string(a.window);
  return t;
}

class CudnnBlockAttentionPlan : public ::testing::TestWithParam<BlockGraphCase> {
 protected:
  CudnnDescriptor device_ = described_device(kH100);
  PlanTarget h100_{nullptr, device_.get()};
};

TEST_P(CudnnBlockAttentionPlan, ReachesAPlanForAnH100) {
  const BlockGraphCase& c = GetParam();
  ASSERT_TRUE(c.block.error.empty()) << c.block.error;
  const std::string what = c.block.name + " " + block_text(c.block.dims) + " " + dtype_name(c.act);
  ASSERT_EQ(cudnn_block_unsupported_reason(c.block.dims, c.act), "") << what;
  const PlanSearch search = search_execution_plans(build_block(h100_, c.block.dims, c.act, c.pass), h100_);
  EXPECT_TRUE(search.accepted()) << what << ": " << search.summary();
}

std::vector<BlockGraphCase> block_graph_cases() {
  std::vector<BlockGraphCase> cases;
  for (const BlockCase& b : block_cases())
    for (const DType act : {DType::bf16, DType::f16})
      for (const Pass pass : {Pass::forward, Pass::backward}) cases.push_back({b, act, pass});
  return cases;
}

std::string block_case_name(const ::testing::TestParamInfo<BlockGraphCase>& info) {
  const BlockGraphCase& c = info.param;
  return c.block.name + "_" + dtype_name(c.act) + (c.pass == Pass::forward ? "_forward" : "_backward");
}

INSTANTIATE_TEST_SUITE_P(Blocks, CudnnBlockAttentionPlan, ::testing::ValuesIn(block_graph_cases()), block_case_name);

TEST(CudnnBlockAttentionSupport, CausalBlocksOfUnequalLengthRunOurKernel) {
  // End-aligned causal with 33 queries against 130 keys: cuDNN's top-left mask would differ.
  EXPECT_NE(cudnn_block_unsupported_reason({1, 100, 130, 33, 130, 4, 4, 40, true}, DType::bf16), "");
  EXPECT_EQ(cudnn_block_unsupported_reason({1, 100, 130, 33, 130, 4, 4, 40, false}, DType::bf16), "");
  EXPECT_NE(cudnn_block_unsupported_reason({1, 100, 130, 1, 130, 4, 4, 40, false}, DType::bf16), "");  // one query
  EXPECT_NE(cudnn_block_unsupported_reason({1, 100, 130, 64, 64, 4, 4, 40, false}, DType::f32), "");
}

TEST(CudnnBlockAttentionSupport, WindowsOnlyOnTheCausalDiagonal) {
  EXPECT_EQ(cudnn_block_unsupported_reason({1, 100, 130, 64, 64, 4, 4, 40, true, 16}, DType::bf16), "");
  // Without the causal mask the band would need a shifted diagonal: our kernel runs it.
  EXPECT_NE(cudnn_block_unsupported_reason({1, 100, 130, 64, 64, 4, 4, 40, false, 16}, DType::bf16), "");
  EXPECT_NE(cudnn_unsupported_reason({1, 100, 4, 4, 40, -1}, DType::bf16), "");
  EXPECT_NE(cudnn_unsupported_reason({1, 100, 4, 4, 40, kMaxCudnnWindow + 1}, DType::bf16), "");
}

// Graphs cuDNN must refuse, built by the same code: the check above can fail.
class CudnnAttentionRefusal : public CudnnAttentionPlan {};

TEST_F(CudnnAttentionRefusal, HeadDimNotAMultipleOf8FindsNoPlan) {
  // Dh 60: the views into qkv are not 16-byte aligned, though the graph says they are.
  const AttentionDims a{2, 128, 8, 2, 60};
  EXPECT_FALSE(cudnn_supports(a, DType::bf16));
  for (const Pass pass : {Pass::forward, Pass::backward}) {
    const PlanSearch search = search_execution_plans(build(h100_, a, DType::bf16, pass), h100_);
    EXPECT_FALSE(search.accepted()) << (pass == Pass::forward ? "forward" : "backward") << ": " << search.summary();
  }
}

TEST_F(CudnnAttentionRefusal, BlockWithHeadDimNotAMultipleOf8FindsNoPlan) {
  const BlockAttentionDims a{2, 96, 96, 56, 40, 8, 2, 60, false};
  EXPECT_FALSE(cudnn_block_supports(a, DType::bf16));
  for (const Pass pass : {Pass::forward, Pass::backward}) {
    const PlanSearch search = search_execution_plans(build_block(h100_, a, DType::bf16, pass), h100_);
    EXPECT_FALSE(search.accepted()) << (pass == Pass::forward ? "forward" : "backward") << ": " << search.summary();
  }
}

TEST_F(CudnnAttentionRefusal, WindowedGraphWithHeadDimNotAMultipleOf8FindsNoPlan) {
  // The window's band is in the graph cuDNN checks: a shape it must refuse stays refused.
  const AttentionDims a{2, 128, 8, 2, 60, 32};
  for (const Pass pass : {Pass::forward, Pass::backward}) {
    const PlanSearch search = search_execution_plans(build(h100_, a, DType::bf16, pass), h100_);
    EXPECT_FALSE(search.accepted()) << (pass == Pass::forward ? "forward" : "backward") << ": " << search.summary();
  }
}

TEST_F(CudnnAttentionRefusal, Fp32BackwardFindsNoPlan) {
  const AttentionDims a{2, 128, 8, 2, 64};
  EXPECT_FALSE(cudnn_supports(a, DType::f32));
  const PlanSearch search = search_execution_plans(build(h100_, a, DType::f32, Pass::backward), h100_);
  EXPECT_FALSE(search.accepted()) << search.summary();
}

}  // namespace
}  // namespace ustrain::cuda

#include "tests/unit/core/checkpoint/safetensors_hf_reference.h"

#include <unistd.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numbers>

#include "core/model/rng.h"

namespace ustrain::hf_reference {
namespace {

const char* kRecipe = R"(
[model]
vocab_size = 257
d_model = 16
n_layers = 2
n_heads = 4
n_kv_heads = 2
ffn_hidden = 24
max_seq_len = 16
rope_theta = 100.0
[data]
path = "unused"
tokenizer = "byte"
[train]
micro_batch = 1
global_batch = 1
seq_len = 16
)";

}  // namespace

Recipe interop_recipe(bool tied) {
  return parse_recipe(kRecipe, "interop.toml", {tied ? "model.tied_embeddings=true" : "model.tied_embeddings=false"});
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::map<std::string, std::vector<double>> read_safetensors(const std::string& path, std::string* dtype_out) {
  const std::string bytes = slurp(path);
  EXPECT_GE(bytes.size(), 8u);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  EXPECT_EQ((8 + n) % 8, 0u);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header.at("__metadata__").at("format"), "pt");  // what transformers requires
  std::map<std::string, std::vector<double>> tensors;
  std::uint64_t data_end = 0;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string dtype = e.at("dtype");
    const std::size_t size = dtype == "F32" ? 4 : 2;
    std::uint64_t numel = 1;
    for (const auto& d : e.at("shape")) numel *= d.get<std::uint64_t>();
    const std::uint64_t begin = e.at("data_offsets")[0], end = e.at("data_offsets")[1];
    EXPECT_EQ(end - begin, numel * size) << name;
    data_end = std::max(data_end, end);
    std::vector<double>& t = tensors[name];
    for (std::uint64_t i = 0; i < numel; ++i) {
      const char* p = bytes.data() + 8 + n + begin + i * size;
      if (dtype == "F32") {
        float f;
        std::memcpy(&f, p, 4);
        t.push_back(f);
      } else {
        EXPECT_EQ(dtype, "BF16");
        std::uint32_t bits = static_cast<std::uint32_t>(static_cast<unsigned char>(p[0])) << 16 |
                             static_cast<std::uint32_t>(static_cast<unsigned char>(p[1])) << 24;
        float f;
        std::memcpy(&f, &bits, 4);
        t.push_back(f);
      }
    }
    if (dtype_out) *dtype_out = dtype;
  }
  EXPECT_EQ(8 + n + data_end, bytes.size()) << "data must end where the last tensor ends";
  return tensors;
}

namespace {

std::vector<double> matvec(const std::vector<double>& w, const std::vector<double>& x, std::size_t out) {
  std::vector<double> y(out, 0.0);
  const std::size_t in = x.size();
  for (std::size_t o = 0; o < out; ++o)
    for (std::size_t i = 0; i < in; ++i) y[o] += w[o * in + i] * x[i];
  return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
  return y;
}

// Hugging Face's inverse frequencies: theta^(-2i/hd), and for rope_scaling of type llama3 its
// rule as transformers writes it: divide by factor where the wavelength exceeds
// original / low_freq_factor, then blend where it lies between that and original /
// high_freq_factor.
std::vector<double> inverse_frequencies(const ModelSection& m, std::size_t hd) {
  std::vector<double> inv_freq;
  for (std::size_t i = 0; i < hd; i += 2)
    inv_freq.push_back(1.0 / std::pow(m.rope_theta, static_cast<double>(i) / static_cast<double>(hd)));
  if (m.rope_scaling != "llama3") return inv_freq;
  const double old_context = static_cast<double>(m.rope_original_max_seq_len);
  const double low_freq_wavelen = old_context / m.rope_low_freq_factor;
  const double high_freq_wavelen = old_context / m.rope_high_freq_factor;
  for (double& f : inv_freq) {
    const double wavelen = 2 * std::numbers::pi / f;
    const double llama = wavelen > low_freq_wavelen ? f / m.rope_scaling_factor : f;
    const double smooth = (old_context / wavelen - m.rope_low_freq_factor) /
                          (m.rope_high_freq_factor - m.rope_low_freq_factor);
    const double smoothed = (1 - smooth) * llama / m.rope_scaling_factor + smooth * llama;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    f = medium ? smoothed : llama;
  }
  return inv_freq;
}

// Rotates every head of `x` (heads * hd values) for position `pos`.
void rope(std::vector<double>& x, std::size_t hd, std::size_t pos, const std::vector<double>& inv_freq,
          bool rotate_half) {
  for (std::size_t h = 0; h < x.size() / hd; ++h) {
    double* v = x.data() + h * hd;
    for (std::size_t i = 0; i < hd / 2; ++i) {
      const double angle = static_cast<double>(pos) * inv_freq[i];
      const double c = std::cos(angle), s = std::sin(angle);
      double& a = rotate_half ? v[i] : v[2 * i];
      double& b = rotate_half ? v[i + hd / 2] : v[2 * i + 1];
      const double a0 = a, b0 = b;
      a = a0 * c - b0 * s;
      b = b0 * c + a0 * s;
    }
  }
}

// The MLP of layer `layer` (its prefix `p`, "model.layers.L.") applied to the normed `h`.
using MlpFn = std::function<std::vector<double>(int layer, const std::string& p, const std::vector<double>& h)>;

// A SwiGLU MLP: down(silu(gate h) * up h), its width taken from the gate's shape.
std::vector<double> swiglu(const std::vector<double>& gate_w, const std::vector<double>& up_w,
                           const std::vector<double>& down_w, const std::vector<double>& h) {
  const std::size_t F = gate_w.size() / h.size();
  const auto gate = matvec(gate_w, h, F);
  const auto up = matvec(up_w, h, F);
  std::vector<double> act(F);
  for (std::size_t i = 0; i < F; ++i) act[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
  return matvec(down_w, act, h.size());
}

// The decoder both families share: embedding, pre-norm blocks of rotary GQA attention (with
// q/k/v biases when `qkv_bias`; within m.sliding_window when set, Mistral's convention: t sees
// u when 0 <= t - u < W) and `mlp`, final norm, head: every position's logits.
std::vector<std::vector<double>> decoder_logits(const Weights& w, const ModelSection& m,
                                                const std::vector<std::int32_t>& ids, bool rotate_half, bool qkv_bias,
                                                const MlpFn& mlp) {
  const std::size_t S = ids.size(), D = static_cast<std::size_t>(m.d_model), H = static_cast<std::size_t>(m.n_heads);
  const std::size_t KV = static_cast<std::size_t>(m.n_kv_heads), hd = D / H;
  const std::size_t V = static_cast<std::size_t>(m.vocab_size);
  const auto add_bias = [&](std::vector<double>& y, const std::string& name) {
    if (!qkv_bias) return;
    const auto& b = w.at(name);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += b[i];
  };
  const std::vector<double> inv_freq = inverse_frequencies(m, hd);
  const auto& E = w.at("model.embed_tokens.weight");
  std::vector<std::vector<double>> x(S);
  for (std::size_t t = 0; t < S; ++t)
    x[t].assign(E.begin() + static_cast<std::ptrdiff_t>(ids[t] * D), E.begin() + static_cast<std::ptrdiff_t>((ids[t] + 1) * D));
  for (int l = 0; l < m.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    std::vector<std::vector<double>> q(S), k(S), v(S);
    for (std::size_t t = 0; t < S; ++t) {
      const auto h = rmsnorm(x[t], w.at(p + "input_layernorm.weight"), m.norm_eps);
      q[t] = matvec(w.at(p + "self_attn.q_proj.weight"), h, H * hd);
      k[t] = matvec(w.at(p + "self_attn.k_proj.weight"), h, KV * hd);
      v[t] = matvec(w.at(p + "self_attn.v_proj.weight"), h, KV * hd);
      add_bias(q[t], p + "self_attn.q_proj.bias");  // before RoPE, as Linear(bias=True) adds it
      add_bias(k[t], p + "self_attn.k_proj.bias");
      add_bias(v[t], p + "self_attn.v_proj.bias");
      rope(q[t], hd, t, inv_freq, rotate_half);
      rope(k[t], hd, t, inv_freq, rotate_half);
    }
    for (std::size_t t = 0; t < S; ++t) {
      std::vector<double> att(H * hd, 0.0);
      for (std::size_t h = 0; h < H; ++h) {
        const std::size_t g = h / (H / KV);  // repeat_kv: kv head g serves H / KV query heads
        const auto window = static_cast<std::size_t>(m.sliding_window);
        const std::size_t from = window > 0 && t + 1 > window ? t + 1 - window : 0;
        std::vector<double> score(t + 1, -1e300);
        double mx = -1e300;
        for (std::size_t u = from; u <= t; ++u) {
          double dot = 0;
          for (std::size_t i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[u][g * hd + i];
          score[u] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, score[u]);
        }
        double z = 0;
        for (double& s : score) z += (s = std::exp(s - mx));  // 0 outside the window
        for (std::size_t u = from; u <= t; ++u)
          for (std::size_t i = 0; i < hd; ++i) att[h * hd + i] += score[u] / z * v[u][g * hd + i];
      }
      const auto o = matvec(w.at(p + "self_attn.o_proj.weight"), att, D);
      for (std::size_t i = 0; i < D; ++i) x[t][i] += o[i];
      const auto h2 = rmsnorm(x[t], w.at(p + "post_attention_layernorm.weight"), m.norm_eps);
      const auto down = mlp(l, p, h2);
      for (std::size_t i = 0; i < D; ++i) x[t][i] += down[i];
    }
  }
  const auto& head = m.tied_embeddings ? E : w.at("lm_head.weight");
  std::vector<std::vector<double>> logits(S);
  for (std::size_t t = 0; t < S; ++t) logits[t] = matvec(head, rmsnorm(x[t], w.at("model.norm.weight"), m.norm_eps), V);
  return logits;
}

// Their mean cross-entropy against `targets`.
double decoder_loss(const Weights& w, const ModelSection& m, const std::vector<std::int32_t>& ids,
                    const std::vector<std::int32_t>& targets, bool rotate_half, bool qkv_bias, const MlpFn& mlp) {
  const std::size_t S = ids.size();
  double loss = 0;
  for (std::size_t t = 0; const std::vector<double>& logits : decoder_logits(w, m, ids, rotate_half, qkv_bias, mlp)) {
    double mx = -1e300, z = 0;
    for (double v : logits) mx = std::max(mx, v);
    for (double v : logits) z += std::exp(v - mx);
    loss += std::log(z) + mx - logits[static_cast<std::size_t>(targets[t++])];
  }
  return loss / static_cast<double>(S);
}

// Softmax over all experts' logits, the top k (torch.topk: the largest first), renormalised
// when `renormalize`; returns (expert, weight) pairs and lowers `gap` to the distance between
// the k-th and the (k+1)-th probability.
std::vector<std::pair<std::size_t, double>> route(const std::vector<double>& logits, std::size_t k, bool renormalize,
                                                  double* gap) {
  double mx = -1e300, z = 0;
  for (double v : logits) mx = std::max(mx, v);
  std::vector<double> p(logits.size());
  for (std::size_t e = 0; e < p.size(); ++e) z += (p[e] = std::exp(logits[e] - mx));
  for (double& v : p) v /= z;
  std::vector<std::size_t> order(p.size());
  for (std::size_t e = 0; e < order.size(); ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
  if (gap && k < p.size()) *gap = std::min(*gap, p[order[k - 1]] - p[order[k]]);
  double sum = 0;
  for (std::size_t j = 0; j < k; ++j) sum += p[order[j]];
  std::vector<std::pair<std::size_t, double>> chosen;
  for (std::size_t j = 0; j < k; ++j) chosen.emplace_back(order[j], renormalize ? p[order[j]] / sum : p[order[j]]);
  return chosen;
}

}  // namespace

double reference_loss(const Weights& w, const ModelSection& m, const std::vector<std::int32_t>& ids,
                      const std::vector<std::int32_t>& targets, bool rotate_half) {
  const MlpFn dense = [&](int, const std::string& p, const std::vector<double>& h) {
    return swiglu(w.at(p + "mlp.gate_proj.weight"), w.at(p + "mlp.up_proj.weight"), w.at(p + "mlp.down_proj.weight"), h);
  };
  return decoder_loss(w, m, ids, targets, rotate_half, /*qkv_bias=*/false, dense);
}

std::vector<std::vector<double>> reference_logits(const Weights& w, const ModelSection& m,
                                                  const std::vector<std::int32_t>& ids) {
  const MlpFn dense = [&](int, const std::string& p, const std::vector<double>& h) {
    return swiglu(w.at(p + "mlp.gate_proj.weight"), w.at(p + "mlp.up_proj.weight"), w.at(p + "mlp.down_proj.weight"), h);
  };
  return decoder_logits(w, m, ids, /*rotate_half=*/true, /*qkv_bias=*/false, dense);
}

double reference_moe_loss(const Weights& w, const nlohmann::json& c, const std::vector<std::int32_t>& ids,
                          const std::vector<std::int32_t>& targets, double* routing_gap) {
  ModelSection m;  // the decoder's sizes, from config.json alone
  m.d_model = c.at("hidden_size");
  m.n_layers = c.at("num_hidden_layers");
  m.n_heads = c.at("num_attention_heads");
  m.n_kv_heads = c.at("num_key_value_heads");
  m.vocab_size = c.at("vocab_size");
  m.norm_eps = c.at("rms_norm_eps");
  m.rope_theta = c.at("rope_theta");
  m.tied_embeddings = c.at("tie_word_embeddings");
  if (c.contains("sliding_window") && !c["sliding_window"].is_null() && c.value("use_sliding_window", true))
    m.sliding_window = c["sliding_window"];
  const std::string type = c.at("model_type");
  const auto k = c.at("num_experts_per_tok").get<std::size_t>();
  double gap = 1e300;
  MlpFn mlp;
  bool qkv_bias = false;
  if (type == "mixtral") {  // MixtralSparseMoeBlock: softmax, top-k, always renormalised
    const auto E = c.at("num_local_experts").get<std::size_t>();
    mlp = [&, E](int, const std::string& p, const std::vector<double>& h) {
      const std::string b = p + "block_sparse_moe.";
      std::vector<double> out(h.size(), 0.0);
      for (const auto& [e, g] : route(matvec(w.at(b + "gate.weight"), h, E), k, true, &gap)) {
        const std::string x = b + "experts." + std::to_string(e) + ".";
        const auto y = swiglu(w.at(x + "w1.weight"), w.at(x + "w3.weight"), w.at(x + "w2.weight"), h);
        for (std::size_t i = 0; i < out.size(); ++i) out[i] += g * y[i];
      }
      return out;
    };
  } else {  // Qwen2MoeSparseMoeBlock in the layers Qwen2MoeDecoderLayer makes sparse, Qwen2MoeMLP elsewhere
    EXPECT_EQ(type, "qwen2_moe");
    qkv_bias = c.value("qkv_bias", true);
    const auto E = c.at("num_experts").get<std::size_t>();
    const auto step = c.at("decoder_sparse_step").get<int>();
    const auto mlp_only = c.at("mlp_only_layers").get<std::vector<int>>();
    const bool renormalize = c.at("norm_topk_prob");
    mlp = [&, E, step, mlp_only, renormalize](int l, const std::string& p, const std::vector<double>& h) {
      const bool sparse = std::find(mlp_only.begin(), mlp_only.end(), l) == mlp_only.end() && E > 0 && (l + 1) % step == 0;
      if (!sparse)
        return swiglu(w.at(p + "mlp.gate_proj.weight"), w.at(p + "mlp.up_proj.weight"), w.at(p + "mlp.down_proj.weight"), h);
      std::vector<double> out(h.size(), 0.0);
      for (const auto& [e, g] : route(matvec(w.at(p + "mlp.gate.weight"), h, E), k, renormalize, &gap)) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        const auto y = swiglu(w.at(x + "gate_proj.weight"), w.at(x + "up_proj.weight"), w.at(x + "down_proj.weight"), h);
        for (std::size_t i = 0; i < out.size(); ++i) out[i] += g * y[i];
      }
      const std::string s = p + "mlp.shared_expert.";
      const auto shared = swiglu(w.at(s + "gate_proj.weight"), w.at(s + "up_proj.weight"), w.at(s + "down_proj.weight"), h);
      const double gate = 1.0 / (1.0 + std::exp(-matvec(w.at(p + "mlp.shared_expert_gate.weight"), h, 1)[0]));
      for (std::size_t i = 0; i < out.size(); ++i) out[i] += gate * shared[i];
      return out;
    };
  }
  const double loss = decoder_loss(w, m, ids, targets, /*rotate_half=*/true, qkv_bias, mlp);
  if (routing_gap) *routing_gap = gap;
  return loss;
}

void HfInterop::SetUp() {
  dir_ = std::filesystem::temp_directory_path() /
         ("ustrain_hf_" + std::to_string(::getpid()) + "_" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
}

void HfInterop::TearDown() { std::filesystem::remove_all(dir_); }

HfInterop::Model::Model(const ModelSection& m) : model(m, 1, m.max_seq_len, Recompute::none) {
  model.plan(plan);
  memory = std::make_unique<PlannedMemory>(plan, *backend);
  model.bind(*memory, *backend);
}

const float* HfInterop::Model::values(const std::string& name) const {
  for (std::size_t i = 0; i < model.params().specs().size(); ++i)
    if (model.params().specs()[i].name == name) return model.params()[static_cast<int>(i)].value.f32();
  return nullptr;
}

std::string HfInterop::save_checkpoint(const Recipe& recipe, Model& m, const std::string& name) {
  for (std::size_t i = 0; i < m.model.params().specs().size(); ++i) {
    const ParamSpec& s = m.model.params().specs()[i];
    const Tensor& t = m.model.params()[static_cast<int>(i)].value;
    fill_normal(t.f32(), static_cast<std::size_t>(t.numel()), hash_string(s.name), s.init_std > 0 ? 0.5 : 0.2);
    if (s.init_std == 0)
      for (std::int64_t k = 0; k < t.numel(); ++k) t.f32()[k] += 1.0f;  // norm gains near 1
  }
  CheckpointWriterConfig c;
  c.root = path(name);
  c.async = false;
  c.recipe_toml = to_toml(recipe);
  c.ustrain_version = "test";
  CheckpointWriter(c, SaveFaults()).save(m.model.params(), *m.backend, {5, 0, 0, 0, "", 1.0, {}});
  return path(name) + "/step-00000005";
}

}  // namespace ustrain::hf_reference

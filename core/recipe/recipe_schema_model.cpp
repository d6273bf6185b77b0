// The recipe schema's [model] rows: the decoder's architecture, one row per key.
#include "core/recipe/recipe_key_rules.h"

namespace ustrain::recipe_rules {

std::vector<KeySpec> model_keys() {
  return {
      key(USTRAIN_RECIPE_FIELD(model.vocab_size), at_least(0),
          "Vocabulary size: embedding rows and output classes; 0 takes the dataset's (its manifest), a set value must "
          "be at least that"),
      key(USTRAIN_RECIPE_FIELD(model.d_model), at_least(1),
          "Model width: size of the residual stream"),
      key(USTRAIN_RECIPE_FIELD(model.n_layers), between(one_in, Bound{65536.0, true}),
          "Number of transformer blocks"),
      key(USTRAIN_RECIPE_FIELD(model.n_heads), at_least(1),
          "Query heads; head_dim = d_model / n_heads must be even"),
      key(USTRAIN_RECIPE_FIELD(model.n_kv_heads), at_least(1),
          "Key/value heads for grouped-query attention; must divide n_heads"),
      key(USTRAIN_RECIPE_FIELD(model.ffn_hidden), at_least(1),
          "Hidden width of the SwiGLU feed-forward block"),
      key(USTRAIN_RECIPE_FIELD(model.rope_theta), above(0), "Base frequency of RoPE"),
      key(USTRAIN_RECIPE_FIELD(model.rope_scaling), one_of({"none", "llama3"}),
          "RoPE frequency scaling: llama3 stretches the low frequencies for a longer context, as Llama 3.1 and "
          "3.2 do (the rope_* keys below); none uses theta alone"),
      key(USTRAIN_RECIPE_FIELD(model.rope_scaling_factor), above(0),
          "llama3 scaling: low frequencies are divided by this factor"),
      key(USTRAIN_RECIPE_FIELD(model.rope_low_freq_factor), above(0),
          "llama3 scaling: wavelengths above rope_original_max_seq_len / this are fully scaled"),
      key(USTRAIN_RECIPE_FIELD(model.rope_high_freq_factor), above(0),
          "llama3 scaling: wavelengths below rope_original_max_seq_len / this are kept; must exceed "
          "rope_low_freq_factor"),
      key(USTRAIN_RECIPE_FIELD(model.rope_original_max_seq_len), at_least(1),
          "llama3 scaling: the context length the model was first trained with"),
      key(USTRAIN_RECIPE_FIELD(model.norm_eps), above(0), "Epsilon inside RMSNorm"),
      key(USTRAIN_RECIPE_FIELD(model.tied_embeddings), any_value(),
          "Share the embedding matrix with the output head"),
      key(USTRAIN_RECIPE_FIELD(model.max_seq_len), at_least(1),
          "Longest sequence the model handles: length of the RoPE table"),
      key(USTRAIN_RECIPE_FIELD(model.sliding_window), at_least(0),
          "Sliding-window attention (Mistral's): token i attends to token j only when 0 <= i - j < this; 0 "
          "attends to every earlier token of the window"),
      key(USTRAIN_RECIPE_FIELD(model.init_std), above(0),
          "Standard deviation of the normal weight initialisation"),
      // Bounded as n_layers is: far above any published model (a few hundred experts), while each
      // expert declares parameters of its own and the expert dispatcher counts experts in an int.
      key(USTRAIN_RECIPE_FIELD(model.n_experts), between(zero_in, Bound{65536.0, true}),
          "Routed experts of each mixture-of-experts layer; 0 keeps every MLP dense"),
      key(USTRAIN_RECIPE_FIELD(model.experts_per_token), at_least(1),
          "Experts each token is routed to (top-k), at most n_experts; every token is routed (no capacity limit, "
          "nothing dropped)"),
      key(USTRAIN_RECIPE_FIELD(model.expert_ffn_hidden), at_least(0),
          "Hidden width of each routed expert's SwiGLU; 0 takes ffn_hidden"),
      key(USTRAIN_RECIPE_FIELD(model.n_shared_experts), at_least(0),
          "Shared experts every token of an MoE layer also passes through (as one SwiGLU of n_shared_experts x "
          "shared_expert_ffn_hidden units)"),
      key(USTRAIN_RECIPE_FIELD(model.shared_expert_ffn_hidden), at_least(0),
          "Hidden width of each shared expert; 0 takes the routed experts' width"),
      key(USTRAIN_RECIPE_FIELD(model.moe_layer_interval), at_least(1),
          "Every n-th layer after the first dense ones is an MoE layer (1: all of them); the others are dense"),
      key(USTRAIN_RECIPE_FIELD(model.first_dense_layers), at_least(0),
          "Layers at the bottom that stay dense (DeepSeek's first_k_dense_replace)"),
      key(USTRAIN_RECIPE_FIELD(model.router_score), one_of({"softmax", "sigmoid"}),
          "Router score of each expert from its logit (computed in fp32); the top-k scores pick the experts"),
      key(USTRAIN_RECIPE_FIELD(model.router_renormalize), any_value(),
          "Divide the chosen experts' scores by their sum to make the gate weights"),
      key(USTRAIN_RECIPE_FIELD(model.router_z_loss), at_least(0.0),
          "Coefficient of the router z-loss: the mean over tokens of the squared log-sum-exp of the router "
          "logits, added to the training loss; 0 disables it"),
      key(USTRAIN_RECIPE_FIELD(model.router_seq_aux_loss), at_least(0.0),
          "Coefficient alpha of the sequence-level balance loss (DeepSeek-V3): per sequence and MoE layer alpha "
          "sum_i f_i P_i (f_i: the expert's share of the sequence's top-k choices times E / k; P_i: its mean "
          "normalised score), averaged over the global batch's sequences and added to the training loss; 0 "
          "disables it"),
      key(USTRAIN_RECIPE_FIELD(model.router_bias_update_rate), at_least(0.0),
          "Auxiliary-loss-free balancing (DeepSeek-V3): a per-expert bias added to the router scores only to "
          "choose the top-k; after each step it moves by this much towards balance (up for experts below the "
          "mean load of the global batch, down above it); 0 disables it"),
  };
}

}  // namespace ustrain::recipe_rules

// The recipe schema table: one row per key, by section. Defaults are not repeated here: they
// are whatever a default-constructed Recipe holds (core/recipe/recipe.h).
#include "core/recipe/recipe_schema.h"

#include <iterator>

#include "core/recipe/recipe_key_rules.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

using namespace recipe_rules;

std::vector<KeySpec> run_keys() {
  return {
      key(USTRAIN_RECIPE_FIELD(run.name), plain_name(),
          "Name of the run; its directory is output_dir/name"),
      key(USTRAIN_RECIPE_FIELD(run.seed), at_least(0),
          "Seed for weight initialisation and data order"),
      key(USTRAIN_RECIPE_FIELD(run.output_dir), non_empty(),
          "Directory that holds the run directories"),
  };
}

std::vector<KeySpec> data_keys() {
  return {
      key(USTRAIN_RECIPE_FIELD(data.path), any_value(),
          "Dataset directory written by `ustrain data convert`; required unless data.blend is set"),
      key(USTRAIN_RECIPE_FIELD(data.tokenizer), one_of({"auto", "byte", "sentencepiece", "huggingface", "external"}),
          "Kind of tokenizer the datasets were encoded with; auto takes the dataset's (its manifest), a set value must "
          "match it; a sentencepiece model or a tokenizer.json (huggingface, tiktoken files included) travels in its "
          "dataset directory, external means ids converted from Megatron, llm.c or NumPy files"),
      key(USTRAIN_RECIPE_FIELD(data.blend), any_value(),
          "Several datasets mixed by weight instead of data.path: \"DIR:WEIGHT,DIR:WEIGHT\" (weights "
          "are normalised, to a resolution of 1/10000)"),
      key(USTRAIN_RECIPE_FIELD(data.prefetch), at_least(0),
          "Micro-batches a background thread reads ahead; 0 reads on the training thread"),
      key(USTRAIN_RECIPE_FIELD(data.verify), one_of({"checksums", "sizes"}),
          "What opening the data checks besides the manifest: checksums reads every shard once, sizes "
          "only compares file sizes (for very large datasets; ids are still checked as they are read)"),
  };
}

std::vector<KeySpec> train_keys() {
  return {
      key(USTRAIN_RECIPE_FIELD(train.steps), at_least(1), "Optimizer steps to run"),
      key(USTRAIN_RECIPE_FIELD(train.micro_batch), at_least(1),
          "Sequences per micro-batch on each data-parallel rank"),
      key(USTRAIN_RECIPE_FIELD(train.global_batch), at_least(1),
          "Sequences per optimizer step, all ranks together; a multiple of "
          "micro_batch * parallel.dp"),
      key(USTRAIN_RECIPE_FIELD(train.seq_len), at_least(1),
          "Tokens per training sequence; at most model.max_seq_len"),
      key(USTRAIN_RECIPE_FIELD(train.grad_clip), at_least(0),
          "Clip the global gradient norm to this value; 0 disables clipping"),
      key(USTRAIN_RECIPE_FIELD(train.precision), one_of({"fp32", "bf16", "fp16", "fp8"}),
          "Compute precision: fp32; or bf16 / fp16 (on the GPU, or on the CPU modelling its numerics) computing with a bf16 / fp16 copy of the "
          "weights, fp32 master weights, gradients and Adam moments; fp16 adds dynamic loss scaling. fp8: bf16 as above, except that the GEMMs of "
          "the decoder layers' linear layers take FP8 inputs (e4m3 activations and weights, train.fp8_grad_format "
          "gradients) with fp32 accumulation, scaled as train.fp8_recipe says; the output head and MoE routers stay "
          "bf16. On the CPU FP8 is emulated exactly (quantise, then multiply the dequantised values in fp32), a "
          "correctness model rather than a fast path; on CUDA (Hopper) the GEMMs are cuBLASLt FP8 GEMMs, for dense "
          "models whose GEMM sizes are multiples of 16"),
      key(USTRAIN_RECIPE_FIELD(train.fp8_recipe), one_of({"delayed", "current", "rowwise", "blockwise"}),
          "fp8 scaling: delayed (one scale per tensor from the amax history of earlier steps, TransformerEngine's "
          "default), current (one scale per tensor from its own amax), rowwise (a power-of-two scale per row along "
          "the reduction axis, torchao's default) or blockwise (power-of-two scales per 1x128 tile of activations "
          "and gradients and per 128x128 block of weights, DeepSeek-V3's)"),
      key(USTRAIN_RECIPE_FIELD(train.fp8_grad_format), one_of({"e5m2", "e4m3"}),
          "fp8: the format of the gradients the backward GEMMs take: e5m2 (more range, TransformerEngine's "
          "hybrid format) or e4m3 (more precision)"),
      key(USTRAIN_RECIPE_FIELD(train.fp8_amax_history), between(Bound{1, true}, Bound{65536, true}),
          "fp8 delayed scaling: steps of amax history; each tensor's scale comes from the largest amax of the "
          "last this many steps (saved in checkpoints)"),
      key(USTRAIN_RECIPE_FIELD(train.fp8_margin), between(Bound{0, true}, Bound{16, true}),
          "fp8: scales are divided by 2^margin, leaving that many binades of headroom above each amax"),
      key(USTRAIN_RECIPE_FIELD(train.recompute), one_of({"none", "selective", "full"}),
          "Activation recomputation in the backward pass, trading compute for memory"),
      key(USTRAIN_RECIPE_FIELD(train.document_mask), any_value(),
          "Document masking: a token attends only to earlier tokens of its own document, where a document ends "
          "with the dataset's end-of-document token (inclusive); false attends across the documents packed into "
          "a window. Every target counts in the loss either way; RoPE positions run on through the window"),
      key(USTRAIN_RECIPE_FIELD(train.eval_interval), at_least(0),
          "Steps between validation passes; 0 disables them"),
      key(USTRAIN_RECIPE_FIELD(train.eval_batches), at_least(0),
          "Batches of train.global_batch sequences per validation pass (the same sequences whatever the layout); "
          "at least 1 when eval_interval > 0"),
      key(USTRAIN_RECIPE_FIELD(train.max_bad_steps), at_least(1),
          "Steps in a row whose loss or gradient norm is not finite (NaN or infinite) before training stops with an "
          "error; each such step is skipped without updating the model"),
      key(USTRAIN_RECIPE_FIELD(train.replica_check_interval), at_least(0),
          "Steps between checks that the data-parallel replicas of the parameters are still equal (a CRC-32 per "
          "rank, compared over each replica group; also before every checkpoint); a rank that differs stops "
          "training, named, before anything is saved; 0 disables the checks"),
      key(USTRAIN_RECIPE_FIELD(train.replica_check_grads), any_value(),
          "Whether the replica checks also compare the gradients once reduced, before the update, at ZeRO stage 0 "
          "(at stages 1-3 each rank reduces only its shard of them)"),
      key(USTRAIN_RECIPE_FIELD(train.loss_scale_init), between(one_in, Bound{kMaxLossScale, true}),
          "fp16 only: the loss scale training starts with (a resumed run continues with its checkpoint's); a step "
          "whose gradients overflow is skipped and halves it, and it never grows past 2^32"),
      key(USTRAIN_RECIPE_FIELD(train.loss_scale_growth_interval), at_least(1),
          "fp16 only: steps in a row with finite gradients after which the loss scale doubles"),
  };
}

std::vector<KeySpec> optim_keys() {
  return {
      key(USTRAIN_RECIPE_FIELD(optim.name), one_of({"adamw", "muon"}),
          "Optimizer: adamw, or muon for the hidden layers' matrices (AdamW for the rest)"),
      key(USTRAIN_RECIPE_FIELD(optim.lr), above(0), "Peak learning rate"),
      key(USTRAIN_RECIPE_FIELD(optim.beta1), between(zero_in, one_out),
          "AdamW decay rate of the first moment"),
      key(USTRAIN_RECIPE_FIELD(optim.beta2), between(zero_in, one_out),
          "AdamW decay rate of the second moment"),
      key(USTRAIN_RECIPE_FIELD(optim.eps), above(0), "AdamW epsilon in the denominator"),
      key(USTRAIN_RECIPE_FIELD(optim.weight_decay), at_least(0),
          "Decoupled weight decay (AdamW's, and Muon's on its matrices)"),
      key(USTRAIN_RECIPE_FIELD(optim.muon_momentum), between(zero_in, one_out), "Muon: momentum decay rate"),
      key(USTRAIN_RECIPE_FIELD(optim.muon_nesterov), any_value(), "Muon: Nesterov momentum"),
      key(USTRAIN_RECIPE_FIELD(optim.muon_ns_steps), between(Bound{1, true}, Bound{20, true}),
          "Muon: Newton-Schulz iterations that orthogonalize each update"),
  };
}

std::vector<KeySpec> schedule_keys() {
  return {
      key(USTRAIN_RECIPE_FIELD(schedule.warmup_steps), at_least(0),
          "Steps of linear warm-up to optim.lr; more than train.steps warms up over all of them, with a warning"),
      key(USTRAIN_RECIPE_FIELD(schedule.decay), one_of({"cosine", "linear", "wsd", "constant"}),
          "Shape of the learning-rate decay after warm-up"),
      key(USTRAIN_RECIPE_FIELD(schedule.min_lr), at_least(0),
          "Learning rate reached at the last step; at most optim.lr"),
      key(USTRAIN_RECIPE_FIELD(schedule.wsd_decay_fraction), between(zero_out, one_in),
          "wsd only: share of all steps spent in the final decay"),
  };
}

std::vector<KeySpec> parallel_keys() {
  return {
      key(USTRAIN_RECIPE_FIELD(parallel.layout), one_of({"manual", "auto"}),
          "Manual trains with the keys below as given; auto asks the planner (`ustrain plan`) for the fastest "
          "layout that fits the processes launched and their device, and trains with it: dp, tp, pp, cp, ep, zero, "
          "dp_shard, sp, pp_schedule and virtual_stages keep the values set by hand (recipe file or --set) and "
          "the others are searched, with train.micro_batch and train.recompute (kept when given with --set)"),
      key(USTRAIN_RECIPE_FIELD(parallel.dp), at_least(0),
          "Data-parallel ranks; 0 takes the processes launched divided by tp * pp * cp"),
      key(USTRAIN_RECIPE_FIELD(parallel.tp), at_least(1),
          "Tensor-parallel ranks: attention heads, MLP units and the vocabulary are split over them (Megatron-style)"),
      key(USTRAIN_RECIPE_FIELD(parallel.sp), any_value(),
          "Sequence parallelism with tensor parallelism: norms and residual adds run on 1/tp of the tokens, "
          "all-gather before and reduce-scatter after the split GEMMs; no effect at tp = 1"),
      key(USTRAIN_RECIPE_FIELD(parallel.pp), at_least(1), "Pipeline-parallel stages"),
      key(USTRAIN_RECIPE_FIELD(parallel.cp), at_least(1),
          "Context-parallel ranks: every sequence is split over them and attention runs as a ring; train.seq_len "
          "must divide by 2 * cp"),
      key(USTRAIN_RECIPE_FIELD(parallel.ep), at_least(1),
          "Expert-parallel ranks, borrowed from the dp * cp ranks (no extra processes); divides dp * cp; with tp > 1 "
          "needs `parallel.sp = true`"),
      key(USTRAIN_RECIPE_FIELD(parallel.ep_capacity_factor), between(Bound{0.0, false}, Bound{1024.0, true}),
          "Rows an expert-parallel rank receives per dispatch round, as a multiple of the rows it routes itself "
          "(micro-batch tokens x experts_per_token; 1 is a perfectly balanced load); a step whose routing sends a "
          "rank more takes extra rounds (counted in the metrics), never drops a token"),
      key(USTRAIN_RECIPE_FIELD(parallel.zero), between(zero_in, Bound{3.0, true}),
          "ZeRO stage: 0 off, 1 shards optimizer state, 2 also gradients, 3 also parameters"),
      key(USTRAIN_RECIPE_FIELD(parallel.dp_shard), at_least(0),
          "Hybrid sharding (HSDP): ZeRO shards over blocks of this many consecutive data-parallel ranks and "
          "replicates across the blocks, whose gradient shards are all-reduced; divides dp; below dp needs "
          "parallel.zero >= 1; 0 shards over all of dp"),
      key(USTRAIN_RECIPE_FIELD(parallel.overlap_comm), any_value(),
          "Overlap data-parallel communication with compute (gradient reduction during backward, "
          "ZeRO-3 prefetch); false waits until it is needed, to measure what overlap hides"),
      key(USTRAIN_RECIPE_FIELD(parallel.pp_schedule),
          one_of({"afab", "1f1b", "interleaved", "zero-bubble"}), "Pipeline schedule"),
      key(USTRAIN_RECIPE_FIELD(parallel.virtual_stages), at_least(1),
          "Model chunks per pipeline rank, for the interleaved schedule"),
      key(USTRAIN_RECIPE_FIELD(parallel.comm_timeout_s), between(Bound{1.0, true}, Bound{86400.0, true}),
          "Seconds a collective or transfer waits before asking the ranks it waits for what they are doing: one "
          "that does not answer within 5 s (stopped, dead, unreachable) ends the job with its rank named; ranks "
          "that answer are waited for up to 30 minutes"),
      key(USTRAIN_RECIPE_FIELD(parallel.startup_timeout_s), between(Bound{1.0, true}, Bound{86400.0, true}),
          "The same for the start-up handshake (the ranks' agreement on recipe, build and resume point), which "
          "also ends there when a rank has not arrived"),
      key(USTRAIN_RECIPE_FIELD(parallel.device_comm), one_of({"auto", "nccl", "staged"}),
          "How GPU tensors travel between ranks: nccl (each rank has a GPU of its own), staged (device -> host "
          "-> MPI -> device: ranks that share a GPU, which NCCL refuses; slow), auto (nccl unless two ranks "
          "find they use the same GPU). On the CPU, staged sends the tensors through the same path with host copies"),
  };
}

std::vector<KeySpec> checkpoint_keys() {
  return {
      key(USTRAIN_RECIPE_FIELD(checkpoint.interval), at_least(0),
          "Steps between checkpoints; 0 saves only at the end (a stop by signal always saves)"),
      key(USTRAIN_RECIPE_FIELD(checkpoint.keep_last), at_least(1),
          "Newest checkpoints kept on disk; older ones are deleted unless keep_every keeps them"),
      key(USTRAIN_RECIPE_FIELD(checkpoint.keep_every), at_least(0),
          "Also keep for good every checkpoint whose step is a multiple of this; 0 keeps none"),
      key(USTRAIN_RECIPE_FIELD(checkpoint.async), any_value(),
          "Write checkpoints on a background thread; training pauses only to copy the state to "
          "host memory"),
      key(USTRAIN_RECIPE_FIELD(checkpoint.init_from), any_value(),
          "Checkpoint directory whose weights start a new run, e.g. one made by `ustrain ckpt "
          "import`; empty starts from random weights"),
  };
}

std::vector<KeySpec> log_keys() {
  return {
      key(USTRAIN_RECIPE_FIELD(log.interval), at_least(1), "Steps between metric lines"),
      key(USTRAIN_RECIPE_FIELD(log.jsonl), any_value(),
          "Also write metrics as JSON lines into the run directory"),
      key(USTRAIN_RECIPE_FIELD(log.tensorboard), any_value(),
          "Also write metrics as TensorBoard events into the run directory (`tensorboard --logdir RUN_DIR`)"),
      key(USTRAIN_RECIPE_FIELD(log.level), one_of({"trace", "debug", "info", "warn", "error"}),
          "Least severe message printed on the console"),
      key(USTRAIN_RECIPE_FIELD(log.trace_steps), any_value(),
          "Steps to record as a timeline, e.g. \"10-12\" or \"10\" (at most 20 steps, within 1..train.steps): "
          "forward and backward per layer and micro-batch, optimizer, data, checkpoints and every collective, "
          "written to RUN_DIR/trace/trace.json for https://ui.perfetto.dev; empty records nothing"),
  };
}

std::vector<KeySpec> eval_keys() {
  return {
      key(USTRAIN_RECIPE_FIELD(eval.tasks), path_list(),
          "Multiple-choice task files (JSONL, as `ustrain eval --task` reads them) scored during training, e.g. "
          "[\"hellaswag.jsonl\"]: acc and acc_norm per task in the metrics; empty scores none"),
      key(USTRAIN_RECIPE_FIELD(eval.interval), at_least(0),
          "Steps between task evaluations; they also run after the last step; 0 = only then"),
  };
}

std::vector<KeySpec> device_keys() {
  return {
      key(USTRAIN_RECIPE_FIELD(device.type), one_of({"cpu", "cuda"}),
          "Compute backend: cpu (fp32 reference, OpenBLAS) or cuda (one NVIDIA GPU: cuBLASLt, cuDNN, fused kernels)"),
      key(USTRAIN_RECIPE_FIELD(device.threads), at_least(0), "CPU threads; 0 uses all cores"),
      key(USTRAIN_RECIPE_FIELD(device.memory_check), one_of({"refuse", "warn"}),
          "What a model or memory plan larger than the memory available does: refuse stops before anything is "
          "allocated; warn says so and runs anyway (when more memory is free than the host or cgroup reports)"),
  };
}


// In the order of recipe_sections(), each section's keys in the order they are documented.
std::vector<KeySpec> build_keys() {
  std::vector<KeySpec> keys;
  for (std::vector<KeySpec> (*section)() : {run_keys, model_keys, data_keys, train_keys, optim_keys, schedule_keys, parallel_keys, checkpoint_keys, log_keys, eval_keys, device_keys}) {
    std::vector<KeySpec> part = section();
    keys.insert(keys.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  return keys;
}

}  // namespace

const std::vector<SectionSpec>& recipe_sections() {
  static const std::vector<SectionSpec> sections = {
      {"run", "Identity of the run and where it writes"},
      {"model", "Llama-style decoder architecture"},
      {"data", "Training data"},
      {"train", "Training loop: steps, batch and sequence sizes, precision"},
      {"optim", "Optimizer: AdamW, or Muon with AdamW"},
      {"schedule", "Learning-rate schedule"},
      {"parallel", "Parallel layout: ranks per mesh dimension"},
      {"checkpoint", "Checkpoints: saving, retention and starting weights"},
      {"log", "Console and metrics logging"},
      {"eval", "Downstream evaluation on multiple-choice tasks during training"},
      {"device", "Compute device"},
  };
  return sections;
}

const std::vector<KeySpec>& recipe_keys() {
  static const std::vector<KeySpec> keys = build_keys();
  return keys;
}

const SectionSpec* find_section(std::string_view name) {
  for (const SectionSpec& s : recipe_sections()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const KeySpec* find_key(std::string_view dotted_key) {
  for (const KeySpec& k : recipe_keys()) {
    if (k.key == dotted_key) return &k;
  }
  return nullptr;
}

}  // namespace ustrain

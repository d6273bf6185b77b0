// Tensor and sequence parallelism as the model sees it: one small object that the transformer
// block and the model's ends call around their matrix multiplies. At tp = 1 every operation
// is the identity and nothing is copied.
//
// Megatron's paired operations, for a column-parallel GEMM followed by a row-parallel one:
//
//                     forward                         backward
//   gather (f)        identity     | all-gather (sp)  all-reduce | reduce-scatter (sp)
//   reduce (g)        all-reduce   | reduce-scatter   identity   | all-gather (sp)
//
// so a layer needs only two calls, used in both passes: gather() before a column-parallel
// GEMM (and before a row-parallel GEMM's backward), reduce() after a row-parallel GEMM (and
// after a column-parallel GEMM's input gradient). Under sequence parallelism the residual
// stream, norms and residual adds hold rows [r * N/tp, (r + 1) * N/tp) of the N = B * S token
// rows on rank r: gather() all-gathers them before the GEMMs, reduce() reduce-scatters back.
//
// The vocabulary-parallel embedding and cross-entropy are here too: each rank holds a block of
// vocabulary rows (VocabShard); the embedding's partial lookups are summed by reduce(), and
// the loss combines every shard's log-sum-exp, so no rank ever holds full-vocabulary logits.
//
// Operations on device tensors go through a device communicator and are ordered on the
// compute stream (Work::join_compute): the host does not wait between a layer's kernels.
#pragma once

#include "kernels/backend.h"
#include "parallel/comm/communicator.h"

namespace ustrain {

class TensorParallel {
 public:
  TensorParallel() = default;  // one rank: the whole model, no communication
  // `tp` is the tensor-parallel group's communicator for the model's tensors; `shard` the
  // vocabulary rows of this rank.
  TensorParallel(Communicator& tp, bool sequence_parallel, VocabShard shard);

  int size() const { return tp_ ? tp_->size() : 1; }
  int rank() const { return tp_ ? tp_->rank() : 0; }
  bool sequence_parallel() const { return sp_; }
  const VocabShard& shard() const { return shard_; }

  // This rank's rows of `full` (N, C): rows [r * N/tp, (r + 1) * N/tp) under sp, else all.
  Tensor own_rows(Tensor full) const;
  // Every rank's rows of `local`, as full rows (N, C): `local` itself without sp, else the
  // first N rows of `scratch` after an all-gather (in place when local is own_rows(scratch)).
  Tensor gather(Tensor local, Tensor scratch);
  // Where a GEMM writes full-row partial sums that reduce() then adds up: `local` itself
  // without sp (it has every row), else the first N rows of `scratch`.
  Tensor partial_buffer(Tensor local, Tensor scratch) const;
  // The sum over the ranks of `partial` (N, C), as this rank's rows: `partial` reduced in
  // place without sp, else reduce-scattered into `local`.
  Tensor reduce(Tensor partial, Tensor local);

  // `t` summed over the ranks in place, whatever sp: small per-token quantities whose every
  // rank holds a partial sum (an MoE layer's gate gradients).
  void sum(Tensor t);

  // The embedding of `ids` (N) into this rank's rows `out` of the residual stream; `scratch`
  // holds N full rows under sp.
  void embed(Backend& be, Tensor out, Tensor ids, Tensor table, Tensor scratch);
  // dtable += the gradient of the lookup, from this rank's rows `dout`.
  void embed_backward(Backend& be, Tensor dtable, Tensor ids, Tensor dout, Tensor scratch);
  // losses (N) and the global lse (N) from this rank's logits (N, Vs); `parts` (tp, 2, N) is
  // scratch for the gathered statistics (unused at tp = 1).
  void loss(Backend& be, Tensor losses, Tensor lse, Tensor logits, Tensor targets, Tensor parts);
  // dlogits (N, Vs), in place allowed.
  void loss_backward(Backend& be, Tensor dlogits, Tensor logits, Tensor lse, Tensor targets, float dloss);

  // Host seconds spent issuing tensor-parallel communication and waiting for it since the last
  // reset: on the CPU the whole time of the collectives (none of it overlaps compute), on a GPU
  // only the issuing (the compute stream waits, not the host).
  double comm_seconds() const { return comm_seconds_; }
  void reset_comm_seconds() { comm_seconds_ = 0; }

 private:
  Tensor rows_of(Tensor buffer, std::int64_t n) const;

  Communicator* tp_ = nullptr;
  bool sp_ = false;
  VocabShard shard_{};
  double comm_seconds_ = 0;
};

}  // namespace ustrain

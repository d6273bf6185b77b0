#include "parallel/tensor_parallel.h"

#include <string>

#include "kernels/scoped_seconds.h"

namespace ustrain {

TensorParallel::TensorParallel(Communicator& tp, bool sequence_parallel, VocabShard shard)
    : tp_(tp.size() > 1 ? &tp : nullptr), sp_(sequence_parallel && tp.size() > 1), shard_(shard) {}

Tensor TensorParallel::rows_of(Tensor buffer, std::int64_t n) const {
  USTRAIN_ASSERT(buffer.shape.rows() >= n, "tensor-parallel scratch " + buffer.shape.str() + " holds fewer than " +
                                               std::to_string(n) + " rows");
  const Tensor flat = buffer.view(Shape{buffer.shape.rows(), buffer.shape.last()});
  return flat.slice(0, n);
}

Tensor TensorParallel::own_rows(Tensor full) const {
  if (!sp_) return full;
  const std::int64_t rows = full.shape.rows();
  USTRAIN_ASSERT(rows % size() == 0, "sequence parallelism splits " + std::to_string(rows) + " rows over " +
                                         std::to_string(size()) + " ranks");
  const std::int64_t n = rows / size();
  return full.view(Shape{rows, full.shape.last()}).slice(n * rank(), n * (rank() + 1));
}

Tensor TensorParallel::gather(Tensor local, Tensor scratch) {
  if (!sp_) return local;
  const Tensor full = rows_of(scratch, local.shape.rows() * size());
  const ScopedSeconds timer(comm_seconds_);
  tp_->all_gather(full, local.view(Shape{local.shape.rows(), local.shape.last()})).join_compute();
  return full;
}

Tensor TensorParallel::partial_buffer(Tensor local, Tensor scratch) const {
  return sp_ ? rows_of(scratch, local.shape.rows() * size()) : local;
}

Tensor TensorParallel::reduce(Tensor partial, Tensor local) {
  if (!tp_) return partial;
  const ScopedSeconds timer(comm_seconds_);
  if (!sp_) {
    tp_->all_reduce(partial).join_compute();
    return partial;
  }
  tp_->reduce_scatter(local.view(Shape{local.shape.rows(), local.shape.last()}), partial).join_compute();
  return local;
}

void TensorParallel::sum(Tensor t) {
  if (!tp_ || tp_->size() == 1) return;
  const ScopedSeconds timer(comm_seconds_);
  tp_->all_reduce(t).join_compute();
}

void TensorParallel::embed(Backend& be, Tensor out, Tensor ids, Tensor table, Tensor scratch) {
  if (!tp_) {
    be.embedding_forward(out, ids, table);
    return;
  }
  const Tensor partial = partial_buffer(out, scratch);  // (N, D): zero rows for other shards' ids
  be.embedding_forward_shard(partial, ids, table, shard_);
  reduce(partial, out);
}

void TensorParallel::embed_backward(Backend& be, Tensor dtable, Tensor ids, Tensor dout, Tensor scratch) {
  if (!tp_) {
    be.embedding_backward(dtable, ids, dout);
    return;
  }
  be.embedding_backward_shard(dtable, ids, gather(dout, scratch), shard_);
}

void TensorParallel::loss(Backend& be, Tensor losses, Tensor lse, Tensor logits, Tensor targets, Tensor parts) {
  if (!tp_) {
    be.cross_entropy_forward(losses, lse, logits, targets);
    return;
  }
  const std::int64_t n = targets.numel();
  const Tensor all = parts.view(Shape{parts.numel()}).slice(0, 2 * n * size());  // (tp, 2, N) flat
  const Tensor mine = all.slice(2 * n * rank(), 2 * n * (rank() + 1));
  be.cross_entropy_shard_stats(mine, logits, targets, shard_);
  {
    const ScopedSeconds timer(comm_seconds_);
    tp_->all_gather(all, mine).join_compute();
  }
  be.cross_entropy_combine(losses, lse, all, targets);
}

void TensorParallel::loss_backward(Backend& be, Tensor dlogits, Tensor logits, Tensor lse, Tensor targets,
                                   float dloss) {
  if (!tp_)
    be.cross_entropy_backward(dlogits, logits, lse, targets, dloss);
  else
    be.cross_entropy_backward_shard(dlogits, logits, lse, targets, dloss, shard_);
}

}  // namespace ustrain

// Context parallelism's attention: every sequence is split over the cp ranks, each rank keeps
// its queries, and the key/value blocks (2 Hkv Dh values per token) travel around the ring of
// cp ranks, so that a C S-token context needs the activation memory of S tokens per rank.
//
// Load balance under the causal mask (zig-zag): a sequence is cut into 2C chunks and rank i
// holds chunks i and 2C - 1 - i, in that order (parallel/context_split.h). Against the kv of rank j:
//   j == i   both chunks, causal: the local order is the global order;
//   j <  i   every query row against the front chunk of the kv, no mask (the back chunk of
//            the kv comes after every query of rank i);
//   j >  i   the back chunk of the queries against all of the kv, no mask (the front chunk of
//            the queries comes before all of it);
// so every rank computes c (2c + 1) + (C - 1) 2c^2 score entries for chunks of c tokens.
//
// Each block's mask is derived from the one mask the attention sub-layer chooses
// (kernels/attention_mask.h): the kinds above for a causal mask, whole blocks of the
// sub-layer's kind otherwise, its first absolute positions from the split. A window or
// document ids depend on absolute positions, which are contiguous within a chunk only; so
// under them a block is one chunk of the queries against one chunk of the kv (up to four per
// step), and a block with no allowed pair is skipped:
//   causal   the kv chunk after the query chunk;
//   window   the kv chunk's last key W or more positions before the query chunk's first query;
//   documents no document shared (their ids' ranges disjoint in every sequence).
// Document ids are indexed by absolute position (kernels/attention_mask.h): every rank holds
// the ids of the whole window, which the loader derives from the window's tokens anyway (a
// document's id depends on every end-of-document token before it), so the ids of the keys of
// any rank are a slice of them and never travel; each block reads its own slice.
//
// Forward: step t computes the blocks of rank (i - t) while the next kv arrives from the
// previous rank (one batched send/receive), and merges the partial results by log-sum-exp.
// Backward: the kv blocks go around again, each with the fp32 partial sum of its dk/dv, which
// every rank adds its share to before passing it on; after C steps each sum is back home.
// At cp = 1 the schedule is one block, the whole sequence against its own keys (a self block,
// kernels/backend.h): one call, nothing copied, nothing merged.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "parallel/context_split.h"
#include "parallel/comm/communicator.h"

namespace ustrain {

// One block of the ring: the kv of rank `source`, which of this rank's query rows meet which of
// that rank's kv rows (local rows of each), under which mask.
struct RingBlock {
  int source = 0;
  SeqRange q, k;
  AttentionMask mask;
};

// The mask's document ids of whole windows on the host, (batch, n) by absolute position: what
// the schedule reads to skip blocks that share no document. Empty: every block may share one.
struct HostDocuments {
  std::vector<std::int32_t> q, k;
  std::int64_t batch = 0;
  // Copies the ids of `mask` from the backend's device (nothing without document ids).
  static HostDocuments of(Backend& be, const AttentionMask& mask);
  // Whether some sequence has a document at both some position of `q` and some of `k`.
  bool share_a_document(SeqRange q_positions, SeqRange k_positions) const;
};

// Rank `rank`'s blocks in ring order (step t meets the kv of rank - t, in one or more blocks,
// or none where the mask allows no pair) for local sequences of `local_seq` tokens (two
// chunks) under the sub-layer's `mask`, whose first positions are those of the sequence's start.
std::vector<RingBlock> ring_schedule(int rank, int size, std::int64_t local_seq, const AttentionMask& mask,
                                     const HostDocuments& documents = {});
// Score entries (query, key) pairs one rank computes over a schedule, per sequence and head,
// before a window or documents thin them out.
std::int64_t score_entries(const std::vector<RingBlock>& schedule);

// The ring's buffers, from the memory plan; each at least the shape given, for micro-batches
// of (B, S) local tokens. Empty at cp = 1.
struct RingBuffers {
  std::array<Tensor, 2> kv;   // (B S, 2 Hkv Dh) activations' dtype: the block computed, the one arriving
  Tensor block_out;           // (B S, H Dh) fp32: one block's result
  Tensor block_lse;           // (B H S) fp32
  Tensor acc;                 // (B S, H Dh) fp32: the running result when activations are not fp32
  Tensor dq;                  // (B S, H Dh) fp32
  std::array<Tensor, 2> dkv;  // (B S, 2 Hkv Dh) fp32: the sum passed on, the one arriving
};

class RingAttention {
 public:
  RingAttention() = default;  // cp = 1: the local op, no communication
  // `cp` is the context-parallel group's communicator for the model's tensors.
  explicit RingAttention(Communicator& cp) : cp_(&cp) {}

  int size() const { return cp_ ? cp_->size() : 1; }
  int rank() const { return cp_ ? cp_->rank() : 0; }
  ContextSplit split() const { return {size(), rank()}; }

  // The attention under `mask` of this rank's queries in qkv (B, S, W) against the whole
  // sequence: out (B, S, H Dh), lse (B, H, S) fp32.
  void forward(Backend& be, Tensor out, Tensor lse, Tensor qkv, const AttentionMask& mask, int n_heads,
               int n_kv_heads, const RingBuffers& buf);
  // dqkv (B, S, W) overwritten.
  void backward(Backend& be, Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse, const AttentionMask& mask,
                int n_heads, int n_kv_heads, const RingBuffers& buf);

  // The sum over the cp ranks of `t` (small per-sequence statistics: each rank holds part of
  // every sequence), in place; nothing at cp = 1.
  void sum(Tensor t);

  // Host seconds spent waiting for ring transfers since the last reset: for the key/value
  // blocks, which travel while a block computes (the part the compute did not hide), and for
  // the gradient sums, which travel after it (never hidden: their whole transfer time).
  double block_wait_seconds() const { return block_wait_; }
  double sum_wait_seconds() const { return sum_wait_; }
  void reset_wait_seconds() { block_wait_ = sum_wait_ = 0; }

 private:
  // Sends `send` to the next rank and receives `recv` from the previous one.
  std::vector<Work> pass_on(Tensor send, Tensor recv, int tag);
  // `blocks` by the ring step that computes them (step t: the kv of the rank t places back).
  std::vector<std::vector<const RingBlock*>> blocks_by_step(const std::vector<RingBlock>& blocks) const;
  // Waits for `works`, adding the time to `seconds`.
  static void wait(std::vector<Work>& works, double& seconds);

  Communicator* cp_ = nullptr;
  double block_wait_ = 0, sum_wait_ = 0;
};

}  // namespace ustrain

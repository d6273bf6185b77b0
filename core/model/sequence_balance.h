// The sequence-level balance loss of a mixture-of-experts layer (DeepSeek-V3's complementary
// sequence-wise balance loss), on the host. For a sequence of T tokens routed to their top-k of
// E experts:
//
//   L_seq = alpha sum_i f_i P_i,  f_i = E / (k T) c_i,  P_i = (1 / T) sum_t s'_{i,t}
//
// c_i: the sequence's top-k choices of expert i; s'_{i,t} = s_{i,t} / sum_m s_{m,t}, token t's
// scores normalised over the experts (softmax scores already are). f_i is a constant; the
// gradient reaches the logits through s'. Training adds the mean of L_seq over the global
// batch's sequences to its loss, so dL/ds'_{i,t} = alpha f_i loss_grad, loss_grad being the
// cross-entropy's dL/d(each token's loss) = 1 / (sequences x T) (times the loss scale).
// Under context parallelism a rank holds part of every sequence: c is summed over the cp ranks
// first (so T k = sum_i c_i covers the whole sequence), and each rank's P_i covers its tokens,
// its share of the value adding up over the ranks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ustrain {

// Each sequence's top-k choices per expert (B, E) from the chosen experts (N, k) of the B
// sequences' N tokens (N / B each, in order).
std::vector<float> sequence_choices(std::span<const std::int32_t> chosen, std::int64_t batch, std::int64_t n_experts,
                                    std::int64_t top_k);

struct SequenceBalance {
  std::vector<float> score_grad;  // (B, E) dL/ds' of every token of each sequence
  double value = 0;               // sum over the sequences of alpha sum_i f_i P_i, this rank's share of P
};

// From the choices (B, E) of each whole sequence and this rank's scores (N, E) (softmax or
// sigmoid), with dL/d(each token's loss) = loss_grad.
SequenceBalance sequence_balance(std::span<const float> choices, std::span<const float> probs, std::int64_t batch,
                                 std::int64_t n_experts, std::int64_t top_k, bool sigmoid, double alpha,
                                 double loss_grad);

}  // namespace ustrain

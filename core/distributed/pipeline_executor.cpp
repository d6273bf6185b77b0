#include "core/distributed/pipeline_executor.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <utility>

namespace ustrain {

PipelineExecutor::PipelineExecutor(LlamaModel& model, ProcessGroup& pp, PipelineProgram program)
    : model_(model), pp_(pp), program_(std::move(program)), rank_(pp.rank()) {
  USTRAIN_ASSERT(program_.shape.ranks == pp.size() && program_.shape.chunks == model.chunks(),
                 "the pipeline program is for another layout");
  for (const PipelineAction& a : program_.ranks.at(static_cast<std::size_t>(rank_)))
    if (is_compute(a.kind) && a.kind != ActionKind::forward) forward_only_ = false;
}

namespace {

// "forward mb 3", "backward-input mb 0 chunk 1": a compute action as the trace names it.
std::string action_name(const PipelineAction& a, bool chunked) {
  const char* kind = a.kind == ActionKind::forward          ? "forward"
                     : a.kind == ActionKind::backward       ? "backward"
                     : a.kind == ActionKind::backward_input ? "backward-input"
                                                            : "backward-weight";
  return std::string(kind) + " mb " + std::to_string(a.micro) + (chunked ? " chunk " + std::to_string(a.chunk) : "");
}

}  // namespace

int PipelineExecutor::tag_of(bool grad, int stage, int micro) const {
  // Unique among the transfers in flight between two ranks (MPI tags stop at 32767).
  return ((micro * program_.shape.stages() + stage) * 2 + (grad ? 1 : 0)) % 32767;
}

void PipelineExecutor::release_slot(int chunk, int micro) {
  ChunkState& c = chunks_[static_cast<std::size_t>(chunk)];
  const int slot = c.slot_of[static_cast<std::size_t>(micro)];
  SlotState& s = c.slots[static_cast<std::size_t>(slot)];
  wait_all(s.sends);  // the slot's data leaves before anything overwrites it
  s = SlotState{};
  c.slot_of[static_cast<std::size_t>(micro)] = -1;
  c.free_slots.push_back(slot);
}

int PipelineExecutor::take_receive(int chunk) {
  ChunkState& c = chunks_[static_cast<std::size_t>(chunk)];
  USTRAIN_ASSERT(!c.free_receive.empty(), "more receives in flight than the plan's receive buffers");
  const int buffer = c.free_receive.back();
  c.free_receive.pop_back();
  const int used = c.receive_used - static_cast<int>(c.free_receive.size());
  peak_receive_[static_cast<std::size_t>(chunk)] = std::max(peak_receive_[static_cast<std::size_t>(chunk)], used);
  return buffer;
}

// Posts the communication actions from `i` on as one batch, leaving `i` at the next compute.
void PipelineExecutor::post(Backend& be, std::size_t& i, std::int64_t batch, std::int64_t seq) {
  const auto& actions = program_.ranks[static_cast<std::size_t>(rank_)];
  const PipelineShape& shape = program_.shape;
  std::vector<PeerTransfer> transfers;
  std::vector<std::pair<int, int>> sends;     // (chunk, slot) of each send
  std::vector<std::pair<int, int>> receives;  // (chunk, buffer)
  for (; i < actions.size() && !is_compute(actions[i].kind); ++i) {
    const PipelineAction& a = actions[i];
    ModelChunk& chunk = model_.chunk(a.chunk);
    ChunkState& c = chunks_[static_cast<std::size_t>(a.chunk)];
    const int stage = shape.stage_of(rank_, a.chunk);
    const auto m = static_cast<std::size_t>(a.micro);
    switch (a.kind) {
      case ActionKind::recv_activation:
      case ActionKind::recv_grad: {
        const bool grad = a.kind == ActionKind::recv_grad;
        const int buffer = take_receive(a.chunk);
        (grad ? c.grad_in : c.activation_in)[m] = buffer;
        transfers.push_back({PeerTransfer::Kind::recv, chunk.receive_buffer(buffer, batch, seq), a.peer,
                             tag_of(grad, stage, a.micro)});
        receives.emplace_back(a.chunk, buffer);
        break;
      }
      case ActionKind::send_activation:
      case ActionKind::send_grad: {
        const bool grad = a.kind == ActionKind::send_grad;
        const int slot = c.slot_of[m];
        USTRAIN_ASSERT(slot >= 0, "a send from a micro-batch that holds no slot");
        transfers.push_back({PeerTransfer::Kind::send, grad ? chunk.input_grad(slot) : chunk.output(slot), a.peer,
                             tag_of(grad, grad ? stage - 1 : stage + 1, a.micro)});
        sends.emplace_back(a.chunk, slot);
        break;
      }
      default: break;
    }
  }
  if (transfers.empty()) return;
  // Each transfer's own handle: a compute waits for its receive, not for the whole batch.
  const std::vector<Work> works = pp_.for_tensors(be.device()).exchange(transfers);
  std::size_t k = 0, next_receive = 0, next_send = 0;
  for (const PeerTransfer& t : transfers) {
    if (t.kind == PeerTransfer::Kind::recv) {
      const auto& [chunk, buffer] = receives[next_receive++];
      chunks_[static_cast<std::size_t>(chunk)].receive_work[static_cast<std::size_t>(buffer)] = works[k++];
    } else {
      const auto& [chunk, slot] = sends[next_send++];
      chunks_[static_cast<std::size_t>(chunk)].slots[static_cast<std::size_t>(slot)].sends.push_back(works[k++]);
    }
  }
}

void PipelineExecutor::start_run(std::size_t micro_batches) {
  wait_seconds_ = 0;
  chunks_.assign(static_cast<std::size_t>(model_.chunks()), ChunkState{});
  peak_slots_.assign(chunks_.size(), 0);
  peak_receive_.assign(chunks_.size(), 0);
  live_.assign(chunks_.size(), 0);
  done_.clear();
  kept_ = 0;
  for (std::size_t k = 0; k < chunks_.size(); ++k) {
    ChunkState& c = chunks_[k];
    ModelChunk& chunk = model_.chunk(static_cast<int>(k));
    c.slots.assign(static_cast<std::size_t>(chunk.slots()), SlotState{});
    for (int s = chunk.slots(); s-- > 0;) c.free_slots.push_back(s);  // slot 0 first
    for (int b = chunk.receive_buffers(); b-- > 0;) c.free_receive.push_back(b);
    c.receive_used = chunk.receive_buffers();
    c.receive_work.assign(static_cast<std::size_t>(chunk.receive_buffers()), Work());
    c.slot_of.assign(micro_batches, -1);
    c.activation_in.assign(micro_batches, -1);
    c.grad_in.assign(micro_batches, -1);
  }
}

int PipelineExecutor::take_slot(int chunk, int micro) {
  ChunkState& c = chunks_[static_cast<std::size_t>(chunk)];
  while (c.free_slots.empty()) {
    const auto it = std::find_if(done_.begin(), done_.end(), [&](const auto& d) { return d.first == chunk; });
    USTRAIN_ASSERT(it != done_.end(), "more micro-batches in flight than the plan's activation slots");
    const auto [k, old] = *it;
    done_.erase(it);
    release_slot(k, old);
  }
  const int slot = c.free_slots.back();
  c.free_slots.pop_back();
  c.slot_of[static_cast<std::size_t>(micro)] = slot;
  c.slots[static_cast<std::size_t>(slot)].micro = micro;
  auto& n = live_[static_cast<std::size_t>(chunk)];
  peak_slots_[static_cast<std::size_t>(chunk)] = std::max(peak_slots_[static_cast<std::size_t>(chunk)], ++n);
  return slot;
}

void PipelineExecutor::retire(int chunk, int micro) {
  --live_[static_cast<std::size_t>(chunk)];
  done_.emplace_back(chunk, micro);
}

int PipelineExecutor::received(int chunk, bool grad, int micro) {
  ChunkState& c = chunks_[static_cast<std::size_t>(chunk)];
  std::vector<int>& index = grad ? c.grad_in : c.activation_in;
  const int buffer = index[static_cast<std::size_t>(micro)];
  USTRAIN_ASSERT(buffer >= 0, "a compute whose input was never received");
  const auto t0 = PhaseTimer::Clock::now();
  const TraceScope wait(tracer_, 0, "wait", grad ? "wait for gradient" : "wait for activation",
                        {{"micro", micro}, {"chunk", chunk}});
  c.receive_work[static_cast<std::size_t>(buffer)].join_compute();
  wait_seconds_ += std::chrono::duration<double>(PhaseTimer::Clock::now() - t0).count();
  index[static_cast<std::size_t>(micro)] = -1;
  return buffer;
}

void PipelineExecutor::give_back_receive(int chunk, int buffer) {
  chunks_[static_cast<std::size_t>(chunk)].free_receive.push_back(buffer);
}

void PipelineExecutor::add_kept_losses(Backend& be, std::int64_t tokens, PipelineLoss& loss) {
  if (kept_ == 0) return;
  const Tensor kept = model_.kept_losses().slice(0, kept_);  // (rows, max tokens)
  const std::int64_t stride = kept.shape.last();
  std::vector<float> host(static_cast<std::size_t>(kept.numel()));
  be.copy(Tensor(host.data(), kept.shape), kept);
  for (std::int64_t r = 0; r < kept_; ++r) {
    double sum = 0;  // a micro-batch's tokens in order, then the micro-batches in order
    for (std::int64_t i = 0; i < tokens; ++i) sum += host[static_cast<std::size_t>(r * stride + i)];
    loss.sum += sum;
    if (token_losses_)
      std::copy_n(host.begin() + r * stride, tokens,
                  token_losses_->begin() + kept_micro_[static_cast<std::size_t>(r)] * tokens);
  }
  kept_ = 0;
  kept_micro_.clear();
}

void PipelineExecutor::compute(Backend& be, const PipelineAction& a, const TokenBatch& tokens,
                               std::int64_t batch, std::int64_t seq, float dloss, PipelineLoss& loss,
                               PhaseTimer* timer) {
  ModelChunk& chunk = model_.chunk(a.chunk);
  ChunkState& c = chunks_[static_cast<std::size_t>(a.chunk)];
  const int stage = program_.shape.stage_of(rank_, a.chunk);
  // The action's span, begun once its input arrived (the wait is a span of its own).
  std::optional<TraceScope> span;
  const auto trace_action = [&] {
    span.emplace(tracer_, 0, "compute", [&] { return action_name(a, model_.chunks() > 1); },
                 std::initializer_list<TraceArg>{{"micro", a.micro}, {"chunk", a.chunk}, {"stage", stage}});
  };
  switch (a.kind) {
    case ActionKind::forward: {
      const int slot = take_slot(a.chunk, a.micro);
      int buffer = -1;
      if (stage > 0) buffer = received(a.chunk, /*grad=*/false, a.micro);
      Tensor losses;  // (B * S) on the last stage: the next kept row
      if (chunk.span().head) {
        if (kept_ == model_.kept_losses().shape[0]) add_kept_losses(be, batch * seq, loss);
        const Tensor row = model_.kept_losses().slice(kept_, kept_ + 1);
        losses = Tensor(row.data, Shape{batch * seq}, row.dtype, row.device);
        ++kept_;
        kept_micro_.push_back(a.micro);
        loss.tokens += static_cast<double>(batch * seq);
      }
      trace_action();
      chunk.forward(be, slot, batch, seq, tokens,
                    buffer >= 0 ? chunk.receive_buffer(buffer, batch, seq) : Tensor(), losses);
      if (buffer >= 0) give_back_receive(a.chunk, buffer);
      if (forward_only_) retire(a.chunk, a.micro);
      break;
    }
    case ActionKind::backward:
    case ActionKind::backward_input: {
      const int slot = c.slot_of[static_cast<std::size_t>(a.micro)];
      USTRAIN_ASSERT(slot >= 0, "a backward without its forward");
      int buffer = -1;
      if (stage < program_.shape.stages() - 1) buffer = received(a.chunk, /*grad=*/true, a.micro);
      trace_action();
      chunk.backward(be, slot, buffer >= 0 ? chunk.receive_buffer(buffer, batch, seq) : Tensor(), dloss,
                     a.kind == ActionKind::backward);
      if (buffer >= 0) give_back_receive(a.chunk, buffer);
      if (a.kind == ActionKind::backward) retire(a.chunk, a.micro);
      break;
    }
    case ActionKind::backward_weight:
      trace_action();
      chunk.backward_weight(be, c.slot_of[static_cast<std::size_t>(a.micro)]);
      retire(a.chunk, a.micro);
      break;
    default: break;
  }
  if (tracer_ && tracer_->recording()) be.synchronize();  // a traced span ends when the device is done
  if (timer) timer->mark(a.kind == ActionKind::forward ? Phase::forward : Phase::backward);
}

PipelineLoss PipelineExecutor::run(Backend& be, std::span<const TokenBatch> micro, std::int64_t batch,
                                   std::int64_t seq, float dloss, PhaseTimer* timer) {
  USTRAIN_ASSERT(static_cast<int>(micro.size()) == program_.shape.micro_batches,
                 "the program is for another micro-batch count");
  start_run(micro.size());
  if (token_losses_) token_losses_->assign(micro.size() * static_cast<std::size_t>(batch * seq), 0.0f);
  PipelineLoss loss;
  const auto& actions = program_.ranks[static_cast<std::size_t>(rank_)];
  for (std::size_t i = 0; i < actions.size();) {
    const PipelineAction& a = actions[i];
    if (!is_compute(a.kind)) {
      post(be, i, batch, seq);
      continue;
    }
    compute(be, a, micro[static_cast<std::size_t>(a.micro)], batch, seq, dloss, loss, timer);
    ++i;
  }
  // A slot whose micro-batch is done is given back lazily (its sends may still be travelling):
  // the rest now.
  for (const auto& [chunk, m] : done_) release_slot(chunk, m);
  done_.clear();
  add_kept_losses(be, batch * seq, loss);
  return loss;
}

}  // namespace ustrain

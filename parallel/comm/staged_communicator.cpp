#include "parallel/comm/staged_communicator.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>

#include "parallel/comm/comm_checks.h"

namespace ustrain {
namespace {

// A host copy of a device tensor, with the same shape and dtype.
struct HostCopy {
  std::vector<std::byte> bytes;
  Tensor host;
  Tensor device;
};

// The host buffers of one operation and what to copy back when it completes.
class StagedWork final : public WorkState {
 public:
  StagedWork(Backend& backend, std::vector<std::unique_ptr<HostCopy>> buffers, std::vector<Tensor> results)
      : backend_(backend), buffers_(std::move(buffers)), results_(std::move(results)) {}

  void start(Work host_work) { host_work_ = std::move(host_work); }

  void wait() override {
    if (done_) return;
    host_work_.wait();
    copy_back();
  }
  bool test() override {
    if (done_) return true;
    if (!host_work_.test()) return false;
    copy_back();
    return true;
  }

 private:
  // Every result tensor is a device tensor with a host twin among the buffers (or a view into
  // one, for in-place shards): copy each back, then let the host buffers go.
  void copy_back() {
    for (const Tensor& r : results_) {
      if (r.numel() == 0) continue;
      for (const auto& b : buffers_) {
        auto* base = static_cast<std::byte*>(b->device.data);
        auto* at = static_cast<std::byte*>(r.data);
        if (at >= base && at + r.bytes() <= base + b->device.bytes()) {
          Tensor from(b->bytes.data() + (at - base), r.shape, r.dtype);
          backend_.copy(r, from);
          break;
        }
      }
    }
    backend_.synchronize();  // the host buffers are freed below
    buffers_.clear();
    done_ = true;
  }

  Backend& backend_;
  std::vector<std::unique_ptr<HostCopy>> buffers_;
  std::vector<Tensor> results_;
  Work host_work_;
  bool done_ = false;
};

// Stages `t`: a host buffer of its size, holding its values when `fill`.
std::unique_ptr<HostCopy> stage(Backend& backend, const Tensor& t, bool fill) {
  auto c = std::make_unique<HostCopy>();
  c->bytes.resize(t.bytes());
  c->host = Tensor(c->bytes.data(), t.shape, t.dtype);
  c->device = t;
  if (fill && t.numel() > 0) backend.copy(c->host, t);
  return c;
}

// The host view of `part`, which lies inside the staged tensor `whole`.
Tensor host_view(HostCopy& whole, const Tensor& part) {
  const auto offset = static_cast<std::byte*>(part.data) - static_cast<std::byte*>(whole.device.data);
  return Tensor(whole.bytes.data() + offset, part.shape, part.dtype);
}

// Finishes an operation: its inputs are on the host once the copies above completed.
Work launch(Backend& backend, std::vector<std::unique_ptr<HostCopy>> buffers, std::vector<Tensor> results,
            const std::function<Work()>& start) {
  backend.synchronize();  // the device -> host copies (and the compute that made their inputs)
  auto state = std::make_shared<StagedWork>(backend, std::move(buffers), std::move(results));
  state->start(start());
  return Work(state);
}

}  // namespace

StagedCommunicator::StagedCommunicator(Communicator& host, Backend& backend, const std::string& label)
    : host_(host), backend_(backend), name_(describe_group(label + " (host-staged)", host.ranks())) {}

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> host, Backend& backend, const std::string& label)
    : owned_host_(std::move(host)), host_(*owned_host_), backend_(backend),
      name_(describe_group(label + " (host-staged)", host_.ranks())) {}

Work StagedCommunicator::do_all_reduce(Tensor data, ReduceOp op) {
  comm_checks::check_tensor(*this, data, "all_reduce");
  std::vector<std::unique_ptr<HostCopy>> b;
  b.push_back(stage(backend_, data, true));
  const Tensor h = b[0]->host;
  return launch(backend_, std::move(b), {data}, [&] { return host_.all_reduce(h, op); });
}

Work StagedCommunicator::do_reduce_scatter(Tensor shard, Tensor full, ReduceOp op) {
  comm_checks::check_tensor(*this, full, "reduce_scatter");
  const bool in_place = comm_checks::check_sharded(*this, shard, full, "reduce_scatter");
  std::vector<std::unique_ptr<HostCopy>> b;
  b.push_back(stage(backend_, full, true));
  const Tensor hf = b[0]->host;
  Tensor hs;
  if (in_place) {
    hs = host_view(*b[0], shard);
  } else {
    b.push_back(stage(backend_, shard, false));
    hs = b[1]->host;
  }
  return launch(backend_, std::move(b), {shard}, [&] { return host_.reduce_scatter(hs, hf, op); });
}

Work StagedCommunicator::do_all_gather(Tensor full, Tensor shard) {
  comm_checks::check_tensor(*this, full, "all_gather");
  const bool in_place = comm_checks::check_sharded(*this, shard, full, "all_gather");
  std::vector<std::unique_ptr<HostCopy>> b;
  // In place, this rank's shard is already where it belongs in `full`.
  b.push_back(stage(backend_, full, in_place));
  const Tensor hf = b[0]->host;
  Tensor hs;
  if (in_place) {
    hs = host_view(*b[0], shard);
  } else {
    b.push_back(stage(backend_, shard, true));
    hs = b[1]->host;
  }
  return launch(backend_, std::move(b), {full}, [&] { return host_.all_gather(hf, hs); });
}

Work StagedCommunicator::do_all_to_all(Tensor out, Tensor in) {
  comm_checks::check_tensor(*this, in, "all_to_all");
  std::vector<std::unique_ptr<HostCopy>> b;
  b.push_back(stage(backend_, in, true));
  b.push_back(stage(backend_, out, false));
  const Tensor hi = b[0]->host, ho = b[1]->host;
  return launch(backend_, std::move(b), {out}, [&] { return host_.all_to_all(ho, hi); });
}

Work StagedCommunicator::do_all_to_all_v(Tensor out, std::span<const std::int64_t> out_counts, Tensor in,
                                         std::span<const std::int64_t> in_counts) {
  comm_checks::check_tensor(*this, in, "all_to_all_v");
  std::vector<std::unique_ptr<HostCopy>> b;
  b.push_back(stage(backend_, in, true));
  b.push_back(stage(backend_, out, true));  // past the counts, `out` keeps its values
  const Tensor hi = b[0]->host, ho = b[1]->host;
  return launch(backend_, std::move(b), {out}, [&] { return host_.all_to_all_v(ho, out_counts, hi, in_counts); });
}

Work StagedCommunicator::do_broadcast(Tensor data, int root) {
  comm_checks::check_tensor(*this, data, "broadcast");
  std::vector<std::unique_ptr<HostCopy>> b;
  b.push_back(stage(backend_, data, rank() == root));
  const Tensor h = b[0]->host;
  return launch(backend_, std::move(b), {data}, [&] { return host_.broadcast(h, root); });
}

Work StagedCommunicator::do_send(Tensor data, int peer, int tag) {
  comm_checks::check_tensor(*this, data, "send");
  std::vector<std::unique_ptr<HostCopy>> b;
  b.push_back(stage(backend_, data, true));
  const Tensor h = b[0]->host;
  return launch(backend_, std::move(b), {}, [&] { return host_.send(h, peer, tag); });
}

Work StagedCommunicator::do_recv(Tensor data, int peer, int tag) {
  comm_checks::check_tensor(*this, data, "recv");
  std::vector<std::unique_ptr<HostCopy>> b;
  b.push_back(stage(backend_, data, false));
  const Tensor h = b[0]->host;
  return launch(backend_, std::move(b), {data}, [&] { return host_.recv(h, peer, tag); });
}

std::vector<Work> StagedCommunicator::do_exchange(std::span<const PeerTransfer> transfers) {
  // One host batch, so that neighbours that both send first cannot deadlock; each transfer
  // keeps its own buffer and copies back on its own wait.
  std::vector<std::shared_ptr<StagedWork>> states;
  std::vector<PeerTransfer> on_host;
  for (const PeerTransfer& t : transfers) {
    comm_checks::check_tensor(*this, t.data, t.kind == PeerTransfer::Kind::send ? "exchange send" : "exchange recv");
    const bool sending = t.kind == PeerTransfer::Kind::send;
    std::vector<std::unique_ptr<HostCopy>> b;
    b.push_back(stage(backend_, t.data, sending));
    on_host.push_back(PeerTransfer{t.kind, b[0]->host, t.peer, t.tag});
    states.push_back(std::make_shared<StagedWork>(backend_, std::move(b),
                                                  sending ? std::vector<Tensor>{} : std::vector<Tensor>{t.data}));
  }
  backend_.synchronize();
  std::vector<Work> host_works = host_.exchange(on_host);
  std::vector<Work> works;
  for (std::size_t i = 0; i < states.size(); ++i) {
    states[i]->start(std::move(host_works[i]));
    works.emplace_back(states[i]);
  }
  return works;
}

}  // namespace ustrain

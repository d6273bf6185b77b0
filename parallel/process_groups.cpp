#include "parallel/process_groups.h"

#include <fmt/format.h>

#include <cstdint>
#include <numeric>

#ifdef USTRAIN_HAVE_NCCL
#include "parallel/comm/nccl_communicator.h"
#endif

namespace ustrain {

ProcessGroup::ProcessGroup(std::string label, std::unique_ptr<Communicator> host)
    : label_(std::move(label)), host_(std::move(host)) {}

Communicator& ProcessGroup::for_tensors(Device device) {
  if (size() == 1) return *host_;
  // A host-staged communicator over the CPU backend (parallel.device_comm = "staged") also
  // carries CPU tensors: that is how its logic runs where no GPU is.
  if (device_ && device_->device() == device) return *device_;
  if (device == Device::cpu) return *host_;
  USTRAIN_ASSERT(device_ != nullptr, fmt::format("the {} group has no device communicator", label_));
  return *device_;
}

double ProcessGroup::sum(double value) {
  if (size() == 1) return value;
  host_->all_reduce(Tensor(&value, Shape{1}, DType::f64), ReduceOp::sum).wait();
  return value;
}

bool ProcessGroup::any(bool flag) {
  if (size() == 1) return flag;
  std::int32_t v = flag ? 1 : 0;
  host_->all_reduce(Tensor(&v, Shape{1}, DType::i32), ReduceOp::sum).wait();
  return v > 0;
}

double ProcessGroup::blocked_seconds() const {
  return host_->blocked_seconds() + (device_ ? device_->blocked_seconds() : 0.0);
}

void ProcessGroup::set_tracer(Tracer* tracer) {
  host_->set_tracer(tracer);
  if (device_) device_->set_tracer(tracer);
}

ProcessGroups::ProcessGroups(World& world, const Mesh& mesh)
    : ProcessGroups(mesh, [&world](const std::vector<int>& ranks, const std::string& label) {
        return world.communicator(ranks, label);
      }) {}

ProcessGroups::ProcessGroups(const Mesh& mesh, const GroupFactory& communicator) {
  const auto make_of = [&](const char* label, const std::vector<int>& ranks) {
    return std::make_unique<ProcessGroup>(label, communicator(ranks, label));
  };
  const auto make = [&](const char* label, std::initializer_list<MeshDim> dims) {
    return make_of(label, mesh.group(dims));
  };
  std::vector<int> all(static_cast<std::size_t>(mesh.world_size()));
  std::iota(all.begin(), all.end(), 0);
  world_ = std::make_unique<ProcessGroup>("world", communicator(all, "world"));
  tp_ = make("tp", {MeshDim::tp});
  pp_ = make("pp", {MeshDim::pp});
  dp_ = make("dp", {MeshDim::dp});
  cp_ = make("cp", {MeshDim::cp});
  ep_ = make_of("ep", mesh.expert_group());
  gradients_ = make("gradients", {MeshDim::dp, MeshDim::cp});
  expert_gradients_ = make_of("expert_gradients", mesh.expert_gradient_group());
  loss_ = make("loss", {MeshDim::pp, MeshDim::dp, MeshDim::cp});
  replica_ = make("replica", {MeshDim::pp, MeshDim::tp});
  const int last = mesh.shape().pp - 1, stage = mesh.coord(MeshDim::pp);
  if (last > 0 && (stage == 0 || stage == last))  // only the members create it
    embedding_ = std::make_unique<ProcessGroup>("embedding",
                                                communicator(mesh.group_at(MeshDim::pp, {0, last}), "embedding"));
  if (mesh.shape().hybrid()) dp_shard_ = make_of("dp_shard", mesh.dp_shard_group());
  dp_replicate_ = make_of("dp_replicate", mesh.dp_replicate_group());
}

std::vector<ProcessGroup*> ProcessGroups::all() const {
  std::vector<ProcessGroup*> out;
  for (ProcessGroup* g : {world_.get(), tp_.get(), pp_.get(), dp_.get(), cp_.get(), ep_.get(), gradients_.get(),
                          expert_gradients_.get(), loss_.get(), replica_.get(), embedding_.get(), dp_shard_.get(),
                          dp_replicate_.get()})
    if (g != nullptr) out.push_back(g);
  return out;
}

void ProcessGroups::attach_devices(const DeviceCommSetup& setup, CommOptions options) {
#ifdef USTRAIN_HAVE_NCCL
  attach_devices([&](ProcessGroup& g) {
    return std::make_unique<NcclCommunicator>(g.host(), g.label(), setup.cuda_device, options, setup.compute_stream);
  });
#else
  (void)setup;
  (void)options;
  attach_devices([](ProcessGroup& g) -> std::unique_ptr<Communicator> {
    throw UserError(fmt::format("the {} group of several ranks needs NCCL for GPU tensors, and this build has none; "
                                "install NCCL beside the CUDA toolkit and rebuild",
                                g.label()));
  });
#endif
}

void ProcessGroups::attach_devices(const DeviceGroupFactory& make) {
  for (ProcessGroup* g : {tp_.get(), pp_.get(), dp_.get(), cp_.get(), ep_.get(), gradients_.get(),
                          expert_gradients_.get(), embedding_.get(), dp_shard_.get(), dp_replicate_.get()})
    if (g != nullptr && g->size() > 1) g->attach_device(make(*g));
}

void ProcessGroups::set_tracer(Tracer* tracer) {
  for (ProcessGroup* g : all()) g->set_tracer(tracer);
}

double ProcessGroups::blocked_seconds() const {
  double total = 0;
  for (const ProcessGroup* g : all()) total += g->blocked_seconds();
  return total;
}

}  // namespace ustrain

// Owned cuDNN backend descriptors with checked, self-describing attribute setters.
//
// Every failure names the descriptor (its role, e.g. "tensor dO") and the attribute, and
// carries cuDNN's own last error message, so a rejected graph can be debugged from the
// exception alone. For cuDNN's full trace run with CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=stderr.
// Internal to the cuDNN sources in kernels/cuda (includes cudnn_graph.h).
#pragma once

#include <cudnn_graph.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ustrain::cuda {

// cuDNN answered a CUDNN_STATUS_NOT_SUPPORTED* status: no engine for this graph or shape.
class CudnnNotSupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "CUDNN_STATUS_BAD_PARAM (cuDNN: <its last error message>)".
std::string cudnn_status_text(cudnnStatus_t status);

// Nothing for success; CudnnNotSupported for the not-supported family; otherwise an internal
// error naming `call`.
void check_cudnn(cudnnStatus_t status, const std::string& call);

// An attribute with its name spelled out for messages.
struct CudnnAttr {
  cudnnBackendAttributeName_t id;
  const char* name;
};
#define USTRAIN_CUDNN_ATTR(attr) (::ustrain::cuda::CudnnAttr{(attr), #attr})

class CudnnDescriptor {
 public:
  CudnnDescriptor() = default;  // empty
  // `label` says what the descriptor is in our graph: "tensor Q", "op exp(S - lse)".
  CudnnDescriptor(cudnnBackendDescriptorType_t type, std::string label);
  ~CudnnDescriptor();
  CudnnDescriptor(CudnnDescriptor&& other) noexcept;
  CudnnDescriptor& operator=(CudnnDescriptor&& other) noexcept;
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return desc_; }
  const std::string& label() const { return label_; }

  CudnnDescriptor& set_int64(CudnnAttr attr, std::int64_t value);
  CudnnDescriptor& set_int64s(CudnnAttr attr, const std::int64_t* values, std::int64_t count);
  CudnnDescriptor& set_bool(CudnnAttr attr, bool value);
  CudnnDescriptor& set_float(CudnnAttr attr, float value);
  CudnnDescriptor& set_data_type(CudnnAttr attr, cudnnDataType_t value);
  CudnnDescriptor& set_pointwise_mode(CudnnAttr attr, cudnnPointwiseMode_t value);
  CudnnDescriptor& set_reduction_op(CudnnAttr attr, cudnnReduceTensorOp_t value);
  CudnnDescriptor& set_heur_mode(CudnnAttr attr, cudnnBackendHeurMode_t value);
  CudnnDescriptor& set_handle(CudnnAttr attr, cudnnHandle_t value);
  CudnnDescriptor& set_descriptor(CudnnAttr attr, cudnnBackendDescriptor_t value);
  CudnnDescriptor& set_descriptors(CudnnAttr attr, const std::vector<cudnnBackendDescriptor_t>& values);
  CudnnDescriptor& set_pointer(CudnnAttr attr, void* value);
  CudnnDescriptor& set_pointers(CudnnAttr attr, const std::vector<void*>& values);
  CudnnDescriptor& set_chars(CudnnAttr attr, const std::string& text);

  std::int64_t get_int64(CudnnAttr attr) const;
  // How many descriptors the attribute holds (a get with no room).
  std::int64_t descriptor_count(CudnnAttr attr) const;
  // Fills descriptors the caller created beforehand; returns how many cuDNN filled.
  std::int64_t get_descriptors(CudnnAttr attr, std::vector<cudnnBackendDescriptor_t>& into) const;

  // Throws (check_cudnn) when cuDNN refuses.
  void finalize();
  // The status, for callers that try alternatives (engine configs); never throws.
  cudnnStatus_t try_finalize();

 private:
  CudnnDescriptor& set(CudnnAttr attr, cudnnBackendAttributeType_t type, std::int64_t count, const void* values);

  cudnnBackendDescriptor_t desc_ = nullptr;
  std::string label_;
};

}  // namespace ustrain::cuda

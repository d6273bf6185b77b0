#include "kernels/cuda/attention/cudnn_descriptor.h"

#include <array>
#include <utility>

#include "kernels/error.h"

namespace ustrain::cuda {

std::string cudnn_status_text(cudnnStatus_t status) {
  std::array<char, 1024> last{};
  cudnnGetLastErrorString(last.data(), last.size());
  std::string text = cudnnGetErrorString(status);
  if (last[0] != '\0') text += std::string(" (cuDNN: ") + last.data() + ")";
  return text;
}

void check_cudnn(cudnnStatus_t status, const std::string& call) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const std::string text = cudnn_status_text(status);
  if (CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED) throw CudnnNotSupported(call + ": " + text);
  ::ustrain::assertion_failed(call.c_str(), __FILE__, __LINE__, text);
}

CudnnDescriptor::CudnnDescriptor(cudnnBackendDescriptorType_t type, std::string label) : label_(std::move(label)) {
  check_cudnn(cudnnBackendCreateDescriptor(type, &desc_), "cudnnBackendCreateDescriptor(" + label_ + ")");
}

CudnnDescriptor::~CudnnDescriptor() {
  if (desc_ != nullptr) cudnnBackendDestroyDescriptor(desc_);  // nothing to do about a failure here
}

CudnnDescriptor::CudnnDescriptor(CudnnDescriptor&& other) noexcept
    : desc_(std::exchange(other.desc_, nullptr)), label_(std::move(other.label_)) {}

CudnnDescriptor& CudnnDescriptor::operator=(CudnnDescriptor&& other) noexcept {
  if (this != &other) {
    if (desc_ != nullptr) cudnnBackendDestroyDescriptor(desc_);
    desc_ = std::exchange(other.desc_, nullptr);
    label_ = std::move(other.label_);
  }
  return *this;
}

CudnnDescriptor& CudnnDescriptor::set(CudnnAttr attr, cudnnBackendAttributeType_t type, std::int64_t count,
                                      const void* values) {
  check_cudnn(cudnnBackendSetAttribute(desc_, attr.id, type, count, values),
              "cudnnBackendSetAttribute(" + label_ + ", " + attr.name + ")");
  return *this;
}

CudnnDescriptor& CudnnDescriptor::set_int64(CudnnAttr attr, std::int64_t value) {
  return set(attr, CUDNN_TYPE_INT64, 1, &value);
}
CudnnDescriptor& CudnnDescriptor::set_int64s(CudnnAttr attr, const std::int64_t* values, std::int64_t count) {
  return set(attr, CUDNN_TYPE_INT64, count, values);
}
CudnnDescriptor& CudnnDescriptor::set_bool(CudnnAttr attr, bool value) {
  return set(attr, CUDNN_TYPE_BOOLEAN, 1, &value);
}
CudnnDescriptor& CudnnDescriptor::set_float(CudnnAttr attr, float value) {
  return set(attr, CUDNN_TYPE_FLOAT, 1, &value);
}
CudnnDescriptor& CudnnDescriptor::set_data_type(CudnnAttr attr, cudnnDataType_t value) {
  return set(attr, CUDNN_TYPE_DATA_TYPE, 1, &value);
}
CudnnDescriptor& CudnnDescriptor::set_pointwise_mode(CudnnAttr attr, cudnnPointwiseMode_t value) {
  return set(attr, CUDNN_TYPE_POINTWISE_MODE, 1, &value);
}
CudnnDescriptor& CudnnDescriptor::set_reduction_op(CudnnAttr attr, cudnnReduceTensorOp_t value) {
  return set(attr, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &value);
}
CudnnDescriptor& CudnnDescriptor::set_heur_mode(CudnnAttr attr, cudnnBackendHeurMode_t value) {
  return set(attr, CUDNN_TYPE_HEUR_MODE, 1, &value);
}
CudnnDescriptor& CudnnDescriptor::set_handle(CudnnAttr attr, cudnnHandle_t value) {
  return set(attr, CUDNN_TYPE_HANDLE, 1, &value);
}
CudnnDescriptor& CudnnDescriptor::set_descriptor(CudnnAttr attr, cudnnBackendDescriptor_t value) {
  return set(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
}
CudnnDescriptor& CudnnDescriptor::set_descriptors(CudnnAttr attr, const std::vector<cudnnBackendDescriptor_t>& values) {
  return set(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<std::int64_t>(values.size()), values.data());
}
CudnnDescriptor& CudnnDescriptor::set_pointer(CudnnAttr attr, void* value) {
  return set(attr, CUDNN_TYPE_VOID_PTR, 1, &value);
}
CudnnDescriptor& CudnnDescriptor::set_pointers(CudnnAttr attr, const std::vector<void*>& values) {
  return set(attr, CUDNN_TYPE_VOID_PTR, static_cast<std::int64_t>(values.size()), values.data());
}

CudnnDescriptor& CudnnDescriptor::set_chars(CudnnAttr attr, const std::string& text) {
  return set(attr, CUDNN_TYPE_CHAR, static_cast<std::int64_t>(text.size()), text.data());
}

std::int64_t CudnnDescriptor::get_int64(CudnnAttr attr) const {
  std::int64_t value = 0, count = 0;
  check_cudnn(cudnnBackendGetAttribute(desc_, attr.id, CUDNN_TYPE_INT64, 1, &count, &value),
              "cudnnBackendGetAttribute(" + label_ + ", " + attr.name + ")");
  return value;
}

std::int64_t CudnnDescriptor::descriptor_count(CudnnAttr attr) const {
  std::int64_t count = 0;
  check_cudnn(cudnnBackendGetAttribute(desc_, attr.id, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
              "cudnnBackendGetAttribute(" + label_ + ", " + attr.name + ", count)");
  return count;
}

std::int64_t CudnnDescriptor::get_descriptors(CudnnAttr attr, std::vector<cudnnBackendDescriptor_t>& into) const {
  std::int64_t count = 0;
  check_cudnn(cudnnBackendGetAttribute(desc_, attr.id, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                       static_cast<std::int64_t>(into.size()), &count, into.data()),
              "cudnnBackendGetAttribute(" + label_ + ", " + attr.name + ")");
  return count;
}

void CudnnDescriptor::finalize() { check_cudnn(cudnnBackendFinalize(desc_), "cudnnBackendFinalize(" + label_ + ")"); }

cudnnStatus_t CudnnDescriptor::try_finalize() { return cudnnBackendFinalize(desc_); }

}  // namespace ustrain::cuda

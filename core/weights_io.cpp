#include "core/weights_io.h"

#include <H5Cpp.h>
#include <fmt/format.h>
#include <unistd.h>
#include <fcntl.h>

#include <cstdio>
#include <filesystem>
#include <vector>

namespace ustrain {

static void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void save_weights(const std::string& path, const ParamSet& params, Backend& backend) {
  const std::string tmp = path + ".partial";
  try {
    H5::Exception::dontPrint();
    H5::H5File file(tmp, H5F_ACC_TRUNC);
    std::vector<float> host;
    for (std::size_t i = 0; i < params.specs().size(); ++i) {
      const ParamSpec& s = params.specs()[i];
      host.resize(static_cast<std::size_t>(s.shape.numel()));
      backend.copy(Tensor(host.data(), s.shape), params[static_cast<int>(i)].value);
      std::vector<hsize_t> dims;
      for (int d = 0; d < s.shape.rank(); ++d) dims.push_back(static_cast<hsize_t>(s.shape[d]));
      H5::DataSpace space(static_cast<int>(dims.size()), dims.data());
      H5::DataSet ds = file.createDataSet(s.name, H5::PredType::IEEE_F32LE, space);
      ds.write(host.data(), H5::PredType::NATIVE_FLOAT);
    }
    const int version = 1;
    file.createAttribute("ustrain_weights_version", H5::PredType::NATIVE_INT, H5::DataSpace())
        .write(H5::PredType::NATIVE_INT, &version);
    file.close();
  } catch (const H5::Exception& e) {
    std::remove(tmp.c_str());
    throw UserError(fmt::format("cannot write weights to {}: {}", tmp, e.getDetailMsg()));
  }
  fsync_path(tmp);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw UserError(fmt::format("cannot rename {} to {}: {}", tmp, path, ec.message()));
}

void load_weights(const std::string& path, const ParamSet& params, Backend& backend) {
  if (!std::filesystem::exists(path))
    throw UserError(fmt::format("weights file {} does not exist; train a run first (ustrain train RECIPE)", path));
  try {
    H5::Exception::dontPrint();
    H5::H5File file(path, H5F_ACC_RDONLY);
    std::vector<float> host;
    for (std::size_t i = 0; i < params.specs().size(); ++i) {
      const ParamSpec& s = params.specs()[i];
      if (!file.nameExists(s.name))
        throw UserError(fmt::format("{}: tensor {} is missing; the file was written for another model shape",
                                    path, s.name));
      H5::DataSet ds = file.openDataSet(s.name);
      H5::DataSpace space = ds.getSpace();
      std::vector<hsize_t> dims(static_cast<std::size_t>(space.getSimpleExtentNdims()));
      space.getSimpleExtentDims(dims.data());
      bool same = static_cast<int>(dims.size()) == s.shape.rank();
      for (int d = 0; same && d < s.shape.rank(); ++d) same = dims[static_cast<std::size_t>(d)] == static_cast<hsize_t>(s.shape[d]);
      if (!same)
        throw UserError(fmt::format("{}: tensor {} has another shape than the recipe's model {}; "
                                    "use the recipe the weights were trained with",
                                    path, s.name, s.shape.str()));
      host.resize(static_cast<std::size_t>(s.shape.numel()));
      ds.read(host.data(), H5::PredType::NATIVE_FLOAT);
      backend.copy(params[static_cast<int>(i)].value, Tensor(host.data(), s.shape));
    }
  } catch (const H5::Exception& e) {
    throw UserError(fmt::format("cannot read weights from {}: {} (is the file truncated or corrupt?)", path,
                                e.getDetailMsg()));
  }
}

}  // namespace ustrain

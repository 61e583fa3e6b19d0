// spattn::upload and DeviceBuffer: host tensors copied into a device memory by the linked backend that owns it
// (Backend::allocate / upload / download), so that callers (the spattn program's --backend cuda) name no backend type.
#include <string>

#include "spattn/error.hpp"
#include "spattn/spattn.hpp"

namespace spattn {

DeviceBuffer upload(const HostTensor& host, Memory memory) {
  require(memory != Memory::host, "upload: the destination must be a device memory, got host memory");
  DeviceBuffer b;
  b.bytes_ = host.size_bytes();
  for (const auto& be : backends())
    if ((b.data_ = be->allocate(memory, b.bytes_)) != nullptr) {
      b.owner_ = be.get();
      break;
    }
  if (b.owner_ == nullptr) {
    std::string names;
    for (const auto& be : backends()) names.append(" ").append(be->name());
    fail("upload: no backend in this build allocates ", to_string(memory), " memory (linked:", names, ")");
  }
  if (!b.owner_->upload(memory, b.data_.get(), host.data(), b.bytes_))
    fail("upload: backend '", b.owner_->name(), "' allocates ", to_string(memory), " memory but does not copy into it");
  b.view_ = host.view();
  b.view_.data = b.data_.get();
  b.view_.memory = memory;
  return b;
}

void DeviceBuffer::download(HostTensor& host) const {
  require(owner_ != nullptr, "DeviceBuffer::download: an empty buffer (not made by spattn::upload)");
  require(host.size_bytes() == bytes_, "DeviceBuffer::download: the host tensor has ", host.size_bytes(),
          " bytes, the device buffer ", bytes_);
  if (!owner_->download(memory(), host.data(), data_.get(), bytes_))
    fail("DeviceBuffer::download: backend '", owner_->name(), "' does not copy ", to_string(memory()),
         " memory to the host");
}

}  // namespace spattn

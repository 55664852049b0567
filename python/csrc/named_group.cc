#include "named_group.h"

#if GYRE_TORCH_MAJOR >= 2
#include <c10/util/Exception.h>

namespace torch_gyre {

NamedProcessGroup::NamedProcessGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                     const c10::intrusive_ptr<ProcessGroupGyre>& backend,
                                     const std::vector<std::string>& devices)
    : c10d::ProcessGroup(store, rank, size) {
  TORCH_CHECK(!devices.empty(), "gyre backend: a process group needs at least one device");
  setDefaultBackend(BackendType::CUSTOM);
  for (const std::string& device : devices) {
    const c10::DeviceType type = c10::Device(device).type();
    TORCH_CHECK(type == c10::DeviceType::CPU || type == c10::DeviceType::CUDA, "gyre backend: device ", device,
                " is neither cpu nor cuda");
    setBackend(type, BackendType::CUSTOM, c10::intrusive_ptr<c10d::Backend>(backend));
  }
}

}  // namespace torch_gyre
#endif

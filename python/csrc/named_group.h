// torch 2.x: the process group object itself (c10d::ProcessGroup, which
// holds one Backend per device) under gyre's name.
//
// torch 2.x names a group by its ProcessGroup, not by its Backend: for a
// plugin backend ProcessGroup::getBackendName() says "custom", and that is
// what DDP's logging data, torch's error messages and its debug output
// report. A creator that returns a ProcessGroup (instead of a Backend) has
// torch use that object as the group, so torch_gyre returns this one, with
// its ProcessGroupGyre registered for the devices the group's backend
// string gives gyre (torch_gyre/__init__.py decides when).
#pragma once

#include "compat.h"

#if GYRE_TORCH_MAJOR >= 2
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "process_group.h"

namespace torch_gyre {

class NamedProcessGroup : public c10d::ProcessGroup {
 public:
  // `devices`: "cpu", "cuda" (those torch would have registered gyre for).
  NamedProcessGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    const c10::intrusive_ptr<ProcessGroupGyre>& backend, const std::vector<std::string>& devices);
  const std::string getBackendName() const override { return "gyre"; }
};

}  // namespace torch_gyre
#endif

// The Python module torch_gyre._C: the ProcessGroupGyre class (a subclass
// of torch's own backend class, so torch.distributed accepts it) and the
// creator that Backend.register_backend calls.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "host_allocator.h"
#include "named_group.h"
#include "process_group.h"

namespace py = pybind11;

namespace {

// torch calls the creator as creator(store, rank, size, timeout), the
// timeout a datetime.timedelta.
c10::intrusive_ptr<torch_gyre::ProcessGroupGyre> create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                        int size, std::chrono::milliseconds timeout) {
  return c10::make_intrusive<torch_gyre::ProcessGroupGyre>(store, rank, size, timeout);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "gyre's torch.distributed backend (see torch_gyre/__init__.py)";
  py::object base = py::module::import(torch_gyre::compat::kPythonBaseModule).attr(torch_gyre::compat::kPythonBaseClass);
  py::class_<torch_gyre::ProcessGroupGyre, c10::intrusive_ptr<torch_gyre::ProcessGroupGyre>>(m, "ProcessGroupGyre",
                                                                                               base)
      .def(py::init(&create), py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>())
      // What torch 2.x's abort() and shutdown() run, reachable on every torch
      // (1.x has neither): closes the group, failing or finishing its queue.
      .def("_gyre_abort", &torch_gyre::ProcessGroupGyre::abortNow)
      .def("_gyre_shutdown", &torch_gyre::ProcessGroupGyre::shutdownNow)
      .def("_gyre_ops_run_by_waiters", &torch_gyre::ProcessGroupGyre::opsRunByWaiters)
      // What torch 2.x's split() runs (new_group by splitting), reachable on
      // every torch: collective over the group; None outside `ranks`.
      .def("_gyre_split", &torch_gyre::ProcessGroupGyre::splitGroup, py::arg("store"), py::arg("ranks"),
           py::arg("timeout"), py::call_guard<py::gil_scoped_release>())
      // What init_process_group(device_id=...) runs on torch 2.x.
      .def("_gyre_bind_device", &torch_gyre::ProcessGroupGyre::bindDevice, py::arg("device"),
           py::call_guard<py::gil_scoped_release>());
  // Blocks on the store (rank > 0) and on the other ranks' init: without
  // the GIL, so other Python threads keep running meanwhile.
  m.def("create_process_group", &create, py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>());
#if GYRE_TORCH_MAJOR >= 2
  // The group object torch keeps, named "gyre" (named_group.h).
  py::class_<torch_gyre::NamedProcessGroup, c10::intrusive_ptr<torch_gyre::NamedProcessGroup>>(
      m, "NamedProcessGroup", py::module::import("torch._C._distributed_c10d").attr("ProcessGroup"))
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       const c10::intrusive_ptr<torch_gyre::ProcessGroupGyre>& backend,
                       const std::vector<std::string>& devices) {
             return c10::make_intrusive<torch_gyre::NamedProcessGroup>(store, rank, size, backend, devices);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("backend"), py::arg("devices"));
#endif
  // torch's CPU allocator (host_allocator.h), installed by __init__.py.
  m.def("_install_host_allocator", &torch_gyre::installHostAllocator);
  m.def("host_allocator_stats", [] {
    const torch_gyre::HostAllocatorStats s = torch_gyre::hostAllocatorStats();
    py::dict d;
    d["installed"] = s.installed;
    d["min_bytes"] = s.minBytes;
    d["max_allocations"] = s.maxAllocations;
    d["live_allocations"] = s.liveAllocations;
    d["live_bytes"] = s.liveBytes;
    d["allocations"] = s.allocations;
    d["fallbacks"] = s.fallbacks;
    d["reused"] = s.reused;
    d["keep_bytes"] = s.keepBytes;
    d["kept_bytes"] = s.keptBytes;
    d["kept_allocations"] = s.keptAllocations;
    return d;
  });
  m.def("in_host_arena", [](const at::Tensor& t) {
    return t.device().is_cpu() && t.storage() && torch_gyre::inHostArena(t.storage().data_ptr().get());
  }, py::arg("tensor"));
  m.attr("torch_major") = GYRE_TORCH_MAJOR;
#if defined(GYRE_TORCH_CUDART)
  m.attr("cuda") = true;
#else
  m.attr("cuda") = false;
#endif
  int version = 0;
  ncclGetVersion(&version);
  m.attr("nccl_api_version") = version;
}

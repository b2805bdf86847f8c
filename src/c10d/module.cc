// The Python extension lockstep._lockstep: ProcessGroupLockstep as a subclass of torch's
// c10d Backend (registered by torch.distributed, which this module imports first). The
// package's __init__.py registers it as the backend "lockstep".
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "c10d/process_group.h"
#include "c10d/rpc_module.h"
#include "lockstep/core/error.h"
#include "torch/torch_stream.h"

namespace py = pybind11;
using lockstep::c10d_backend::ProcessGroupLockstep;

namespace {

// Whether this build has lockstep's nccl backend (CUDA tensors), registered for "cuda" then.
bool has_nccl() {
#ifdef LOCKSTEP_C10D_HAS_NCCL
  return true;
#else
  return false;
#endif
}

}  // namespace

PYBIND11_MODULE(_lockstep, m) {
  m.doc() = "lockstep as a torch.distributed backend (import lockstep to register it)";
  // [GIL] (process_group.h): never wait for the progress thread while holding the GIL.
  lockstep::c10d_backend::set_blocking_call_wrapper([](const std::function<void()>& call) {
    if (PyGILState_Check() && !_Py_IsFinalizing()) {
      py::gil_scoped_release release;
      call();
    } else {
      call();
    }
  });
  py::module_::import("torch.distributed");  // torch's Backend and Store types
  m.attr("has_nccl") = has_nccl();
  // Ops on CUDA tensors start after the work queued on torch's current stream (docs/nccl.md).
  if (has_nccl()) lockstep::torch::detail::use_torch_current_stream();
  py::class_<ProcessGroupLockstep, ::c10d::Backend, c10::intrusive_ptr<ProcessGroupLockstep>>(
      m, "ProcessGroupLockstep")
      .def(py::init([](const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                       int64_t timeout_ms, const std::string& group_id,
                       const std::vector<int64_t>& global_ranks) {
             return c10::make_intrusive<ProcessGroupLockstep>(
                 store, rank, size, std::chrono::milliseconds(timeout_ms), group_id, global_ranks);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"),
           py::arg("group_id"), py::arg("global_ranks"), py::call_guard<py::gil_scoped_release>(),
           "Collective over the group's members: connects to each through the store.")
      .def_property_readonly(
          "lockstep_backend", [](const ProcessGroupLockstep& pg) { return pg.lockstep_backend(); },
          "lockstep's backend in use: shm, tcp, hier, ...");
  lockstep::c10d_backend::bind_rpc(m);  // lockstep.rpc (python/lockstep/rpc.py)
}

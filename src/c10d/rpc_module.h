// lockstep.rpc's native functions, added to the _lockstep module (rpc_module.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace lockstep::c10d_backend {

void bind_rpc(pybind11::module_& m);

}  // namespace lockstep::c10d_backend

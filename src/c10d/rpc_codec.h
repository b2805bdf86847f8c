// Python objects and lockstep rpc's codec (src/rpc/codec.h), directly: no C++ Value in between,
// so that a Python call costs one walk of its arguments each way. Carried: None, bool, int
// (64-bit), float, str, bytes (bytearray arrives as bytes), list, tuple (namedtuples arrive as
// tuples), dict and dense CPU tensors (sent as raw bytes beside the message, received without a
// copy). Anything else is refused before anything is sent, naming where it was ("args[1]['lr']").
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "rpc/codec.h"

namespace lockstep::c10d_backend::rpc_py {

namespace py = pybind11;

// Appends obj's encoding. TypeError (py::type_error) naming `where` and the path inside it for a
// value the codec does not carry, or a CUDA tensor.
void encode(py::handle obj, rpc::Writer& out, const char* where);
// The next value, as a new Python object. CodecError (C++) for a malformed body.
py::object decode(rpc::Reader& in);

}  // namespace lockstep::c10d_backend::rpc_py

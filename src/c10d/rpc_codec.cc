#include "c10d/rpc_codec.h"

#include <torch/csrc/autograd/python_variable.h>

#include <memory>
#include <vector>

#include "lockstep/rpc/errors.h"
#include "lockstep/torch/rpc_tensor.h"

namespace lockstep::c10d_backend::rpc_py {

namespace {

// A value that cannot go, found `path` deep (built on the way out, so a call that goes costs
// nothing for it).
struct Refused {
  std::string path;
  std::string why;
};

void encode_tensor(PyObject* obj, rpc::Writer& out) {
  at::Tensor t = THPVariable_Unpack(obj);
  if (t.defined() && !t.device().is_cpu())
    throw Refused{"", detail::concat("a tensor on ", t.device().str(),
                                     ", and lockstep rpc carries CPU tensors: move it with "
                                     ".cpu() before the call (and back after)")};
  rpc::Tensor r;
  try {
    r = torch::to_rpc(t);  // its data only, dense, in order: lockstep/torch/rpc_tensor.h
  } catch (const InvalidArgument& e) {
    throw Refused{"", std::string(e.what()).substr(std::string_view("to_rpc: ").size())};
  }
  out.tensor(r.type, r.shape, rpc::Blob{r.data, r.nbytes, r.owner});
}

std::string type_name(PyObject* obj) {
  return Py_TYPE(obj)->tp_name;
}

// As the decoder counts: each list, tuple or dict is one level, and kMaxDepth levels are fine.
void check_depth(int depth) {
  if (depth >= rpc::kMaxDepth)
    throw Refused{"", detail::concat("a value nested deeper than ", rpc::kMaxDepth, " levels")};
}

void encode_at(PyObject* obj, rpc::Writer& out, int depth) {
  if (obj == Py_None) return out.none();
  if (PyBool_Check(obj)) return out.boolean(obj == Py_True);
  if (PyLong_Check(obj)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow) throw Refused{"", "an int outside the 64-bit range lockstep rpc carries"};
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    return out.integer(v);
  }
  if (PyFloat_Check(obj)) return out.real(PyFloat_AS_DOUBLE(obj));
  if (PyUnicode_Check(obj)) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(obj, &n);
    if (!s) {
      PyErr_Clear();
      throw Refused{"", "a str that is not valid Unicode (a lone surrogate); send bytes"};
    }
    return out.str(std::string_view(s, static_cast<size_t>(n)));
  }
  if (PyBytes_Check(obj))
    return out.bytes(std::string_view(PyBytes_AS_STRING(obj), PyBytes_GET_SIZE(obj)));
  if (PyByteArray_Check(obj))
    return out.bytes(std::string_view(PyByteArray_AS_STRING(obj), PyByteArray_GET_SIZE(obj)));
  if (PyList_Check(obj) || PyTuple_Check(obj)) {
    check_depth(depth);
    const bool list = PyList_Check(obj);
    const Py_ssize_t n = list ? PyList_GET_SIZE(obj) : PyTuple_GET_SIZE(obj);
    if (list)
      out.list(static_cast<size_t>(n));
    else
      out.tuple(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      try {
        encode_at(list ? PyList_GET_ITEM(obj, i) : PyTuple_GET_ITEM(obj, i), out, depth + 1);
      } catch (Refused& r) {
        r.path = detail::concat("[", i, "]", r.path);
        throw;
      }
    }
    return;
  }
  if (PyDict_Check(obj)) {
    check_depth(depth);
    out.dict(static_cast<size_t>(PyDict_Size(obj)));
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(obj, &pos, &key, &value)) {
      try {
        encode_at(key, out, depth + 1);
        encode_at(value, out, depth + 1);
      } catch (Refused& r) {
        PyObject* text = PyObject_Repr(key);
        const char* k = text ? PyUnicode_AsUTF8(text) : nullptr;
        r.path = detail::concat("[", k ? k : "?", "]", r.path);
        Py_XDECREF(text);
        PyErr_Clear();
        throw;
      }
    }
    return;
  }
  if (THPVariable_Check(obj)) return encode_tensor(obj, out);
  const std::string type = type_name(obj);
  const bool vowel = !type.empty() && std::string("aeiouAEIOU").find(type[0]) != std::string::npos;
  throw Refused{"", (vowel ? "an " : "a ") + type +
                        ", which lockstep rpc does not carry (it carries None, bool, int, "
                        "float, str, bytes, list, tuple, dict and CPU tensors, and never "
                        "pickles); convert it to one of those"};
}

}  // namespace

void encode(py::handle obj, rpc::Writer& out, const char* where) {
  try {
    encode_at(obj.ptr(), out, 0);
  } catch (const Refused& r) {
    throw py::type_error(detail::concat(where, r.path, " is ", r.why));
  } catch (const rpc::CodecError& e) {
    throw py::type_error(detail::concat(where, ": ", e.what()));
  }
}

py::object decode(rpc::Reader& in) {
  switch (in.peek()) {
    case rpc::Tag::none:
      in.none();
      return py::none();
    case rpc::Tag::false_:
    case rpc::Tag::true_:
      return py::bool_(in.boolean());
    case rpc::Tag::integer:
      return py::reinterpret_steal<py::object>(PyLong_FromLongLong(in.integer()));
    case rpc::Tag::real:
      return py::reinterpret_steal<py::object>(PyFloat_FromDouble(in.real()));
    case rpc::Tag::str: {
      std::string_view s = in.str();  // checked UTF-8
      return py::reinterpret_steal<py::object>(
          PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "strict"));
    }
    case rpc::Tag::bytes: {
      std::string_view b = in.bytes();
      return py::reinterpret_steal<py::object>(
          PyBytes_FromStringAndSize(b.data(), static_cast<Py_ssize_t>(b.size())));
    }
    case rpc::Tag::list:
    case rpc::Tag::tuple: {
      const bool list = in.peek() == rpc::Tag::list;
      const size_t n = list ? in.list() : in.tuple();
      in.enter();
      // A count is checked only against the bytes left, which the containers around it count
      // too: room for more than kPresized items is made as they arrive, not on the count's word.
      constexpr size_t kPresized = 1024;
      py::object seq;
      if (n <= kPresized) {
        seq = py::reinterpret_steal<py::object>(list ? PyList_New(static_cast<Py_ssize_t>(n))
                                                     : PyTuple_New(static_cast<Py_ssize_t>(n)));
        for (size_t i = 0; i < n; ++i) {
          PyObject* item = rpc_py::decode(in).release().ptr();
          if (list)
            PyList_SET_ITEM(seq.ptr(), static_cast<Py_ssize_t>(i), item);
          else
            PyTuple_SET_ITEM(seq.ptr(), static_cast<Py_ssize_t>(i), item);
        }
      } else {
        seq = py::reinterpret_steal<py::object>(PyList_New(0));
        for (size_t i = 0; i < n; ++i)
          if (PyList_Append(seq.ptr(), rpc_py::decode(in).ptr()) != 0)
            throw py::error_already_set();
        if (!list) seq = py::reinterpret_steal<py::object>(PyList_AsTuple(seq.ptr()));
      }
      in.leave();
      return seq;
    }
    case rpc::Tag::dict: {
      const size_t n = in.dict();
      in.enter();
      py::dict d;
      for (size_t i = 0; i < n; ++i) {
        py::object k = rpc_py::decode(in);
        py::object v = rpc_py::decode(in);
        if (PyDict_SetItem(d.ptr(), k.ptr(), v.ptr()) != 0) {
          PyErr_Clear();
          in.fail("a dict key that Python cannot hash (a list or a dict)");
        }
      }
      in.leave();
      return d;
    }
    case rpc::Tag::tensor: {
      rpc::Reader::TensorHead h = in.tensor();
      at::Tensor t = torch::from_rpc(
          rpc::Tensor{h.type, std::move(h.shape), h.blob->data, h.blob->nbytes, h.blob->owner});
      return py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(t)));
    }
  }
  in.fail("unreachable tag");
}

}  // namespace lockstep::c10d_backend::rpc_py

// lockstep.rpc's native half (python/lockstep/rpc.py is the API users see): the process's agent
// (src/rpc), Python callables as registered handlers, calls whose results come back as Python
// objects or torch.futures.Future, and lockstep's RPC errors as the Python classes rpc.py defines.
//
// [GIL] Nothing here waits with the GIL held: sends, waits and shutdown release it. A handler
// takes it to decode its arguments, run, and encode its result, and releases it to send. Answers
// to rpc_async complete their futures in batches: one thread takes the GIL for every answer that
// arrived meanwhile, so that a caller issuing calls in a loop is interrupted once, not per answer.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <mutex>
#include <optional>

#include "c10d/rpc_codec.h"
#include "c10d/rpc_module.h"
#include "lockstep/rpc/errors.h"
#include "rpc/agent_detail.h"
#include "rpc/future_state.h"
#include "rpc/process_agent.h"
#include "rpc/registry.h"

namespace lockstep::c10d_backend {

namespace {

namespace py = pybind11;
using namespace std::chrono_literals;

// The Python classes of lockstep.rpc's errors, set by rpc.py on import (leaked: they live as long
// as the interpreter, and must not be released after it).
struct ErrorClasses {
  py::object base, unknown, remote, timeout, died, not_authorized, shutting_down, codec;
};
ErrorClasses* g_errors = nullptr;

bool python_alive() {
  return Py_IsInitialized() && !_Py_IsFinalizing();
}

// The Python exception instance for the current C++ exception (GIL held).
py::object python_error(std::exception_ptr error) {
  auto make = [](const py::object& cls, const std::string& text, const std::string& worker) {
    py::object e = cls(text);
    e.attr("worker") = worker.empty() ? py::object(py::none()) : py::object(py::str(worker));
    return e;
  };
  if (!g_errors)
    return py::reinterpret_steal<py::object>(
        PyObject_CallFunction(PyExc_RuntimeError, "s", "lockstep.rpc is not imported"));
  try {
    std::rethrow_exception(error);
  } catch (const rpc::RemoteError& e) {
    py::object x = make(g_errors->remote, e.what(), e.worker());
    x.attr("remote_type") = e.type();
    x.attr("remote_message") = e.message();
    x.attr("remote_traceback") = e.traceback();
    return x;
  } catch (const rpc::UnknownFunction& e) {
    py::object x = make(g_errors->unknown, e.what(), e.worker());
    x.attr("function") = e.function();
    x.attr("registered") = py::cast(e.registered());
    return x;
  } catch (const rpc::RpcTimeout& e) {
    return make(g_errors->timeout, e.what(), e.worker());
  } catch (const rpc::PeerDied& e) {
    return make(g_errors->died, e.what(), e.worker());
  } catch (const rpc::NotAuthorized& e) {
    return make(g_errors->not_authorized, e.what(), e.worker());
  } catch (const rpc::ShutdownInProgress& e) {
    return make(g_errors->shutting_down, e.what(), e.worker());
  } catch (const rpc::CodecError& e) {
    return make(g_errors->codec, e.what(), e.worker());
  } catch (const rpc::RpcError& e) {
    return make(g_errors->base, e.what(), e.worker());
  } catch (const TimeoutError& e) {  // init_rpc's rendezvous
    return make(g_errors->timeout, e.what(), "");
  } catch (const Error& e) {
    return make(g_errors->base, e.what(), "");
  } catch (const std::exception& e) {
    return make(g_errors->base, e.what(), "");
  }
}

[[noreturn]] void raise(std::exception_ptr error) {
  py::object e = python_error(error);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(e.ptr())), e.ptr());
  throw py::error_already_set();
}

// Runs fn, raising lockstep's C++ RPC errors as lockstep.rpc's Python ones.
template <class F>
auto translated(F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const py::error_already_set&) {
    throw;
  } catch (const py::builtin_exception&) {
    throw;
  } catch (const InvalidArgument& e) {
    throw py::value_error(e.what());
  } catch (const ConfigError& e) {
    throw py::value_error(e.what());
  } catch (const rpc::RpcError&) {
    raise(std::current_exception());
  } catch (const Error&) {
    raise(std::current_exception());
  }
}

// A finished call's result as a Python object, or its error raised (GIL held).
py::object result_of(const rpc::Future& f) {
  const auto& s = *f.state();
  if (s.error) raise(s.error);
  if (!s.reply) return py::none();
  rpc::Reader r(*s.reply);
  try {
    py::object v = rpc_py::decode(r);
    if (!r.at_end()) r.fail("bytes after the reply's value");
    return v;
  } catch (const rpc::CodecError&) {
    raise(std::current_exception());
  }
}

// Completes torch futures in batches (see [GIL]).
class Completions {
 public:
  void add(rpc::Future done, PyObject* future) {
    {
      std::lock_guard lock(mu_);
      queue_.emplace_back(std::move(done), future);
      if (draining_) return;
      draining_ = true;
    }
    if (!python_alive()) return;  // leaked at exit: nobody can look at it any more
    py::gil_scoped_acquire gil;
    for (;;) {
      std::vector<std::pair<rpc::Future, PyObject*>> batch;
      {
        std::lock_guard lock(mu_);
        if (queue_.empty()) {
          draining_ = false;
          return;
        }
        batch.swap(queue_);
      }
      for (auto& [f, fut] : batch) {
        py::object future = py::reinterpret_steal<py::object>(fut);
        try {
          py::object value;
          try {
            value = result_of(f);
          } catch (py::error_already_set& e) {
            future.attr("set_exception")(e.value());
            continue;
          }
          future.attr("set_result")(value);
        } catch (py::error_already_set& e) {
          e.discard_as_unraisable("lockstep.rpc: completing a future");
        }
      }
    }
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<rpc::Future, PyObject*>> queue_;
  bool draining_ = false;
};
Completions& completions() {
  static auto* c = new Completions();
  return *c;
}

// A Python callable kept by a handler: released with the GIL, or leaked at interpreter exit.
struct PyCallable {
  explicit PyCallable(py::object f) : fn(f.release().ptr()) {}
  ~PyCallable() {
    if (python_alive()) {
      py::gil_scoped_acquire gil;
      Py_DECREF(fn);
    }
  }
  PyObject* fn;
};

// What a Python exception says, for the caller's RemoteError (GIL held).
rpc::ErrorBody python_error_body(py::error_already_set& e) {
  rpc::ErrorBody b{.code = rpc::ErrorCode::remote_exception};
  py::object type = e.type();
  std::string module = py::str(type.attr("__module__"));
  std::string name = py::str(type.attr("__qualname__"));
  b.type = module == "builtins" ? name : module + "." + name;
  b.message = py::str(e.value());
  try {
    py::object lines =
        py::module_::import("traceback").attr("format_exception")(e.type(), e.value(), e.trace());
    b.traceback = py::str("").attr("join")(lines).cast<std::string>();
  } catch (py::error_already_set&) {
    b.traceback = "(its traceback could not be formatted)";
  }
  return b;
}

// Encodes `result` and answers with it (GIL held; released to send).
void answer(const rpc::ResponderPtr& responder, py::handle result) {
  rpc::Message m;
  try {
    rpc::Writer w(m);
    rpc_py::encode(result, w, "the function's result");
  } catch (py::error_already_set& e) {
    responder->error(python_error_body(e));
    return;
  } catch (const py::builtin_exception& e) {
    responder->error(
        {.code = rpc::ErrorCode::remote_exception, .type = "TypeError", .message = e.what()});
    return;
  }
  py::gil_scoped_release nogil;
  responder->reply(std::move(m));
}

// torch.futures.Future (kept for the interpreter's life).
PyObject* torch_future_class() {
  static PyObject* cls =
      py::object(py::module_::import("torch.futures").attr("Future")).release().ptr();
  return cls;
}

bool is_torch_future(py::handle obj) {
  static PyObject* cls = torch_future_class();
  return PyObject_IsInstance(obj.ptr(), cls) == 1;
}

rpc::Handler python_handler(py::object fn) {
  auto callable = std::make_shared<PyCallable>(std::move(fn));
  return [callable](const rpc::Request& request, const rpc::ResponderPtr& responder) {
    if (!python_alive()) {
      responder->error({.code = rpc::ErrorCode::shutting_down});
      return;
    }
    py::gil_scoped_acquire gil;
    py::object args, kwargs;
    try {
      rpc::Reader r(request.message, request.args_offset);
      args = rpc_py::decode(r);
      kwargs = rpc_py::decode(r);
      if (!PyTuple_Check(args.ptr()) || !PyDict_Check(kwargs.ptr()) || !r.at_end())
        r.fail("a request's arguments are a tuple and a dict");
    } catch (const rpc::CodecError& e) {
      responder->error({.code = rpc::ErrorCode::malformed, .message = e.what()});
      return;
    }
    py::object result;
    try {
      result =
          py::reinterpret_steal<py::object>(PyObject_Call(callable->fn, args.ptr(), kwargs.ptr()));
      if (!result) throw py::error_already_set();
    } catch (py::error_already_set& e) {
      responder->error(python_error_body(e));
      return;
    }
    if (is_torch_future(result)) {  // an async function (torch's @async_execution)
      result.attr("add_done_callback")(py::cpp_function([responder](py::object done) {
        py::object value;
        try {
          value = done.attr("value")();
        } catch (py::error_already_set& e) {
          responder->error(python_error_body(e));
          return;
        }
        answer(responder, value);
      }));
      return;
    }
    answer(responder, result);
  };
}

const rpc::WorkerInfo& resolve(rpc::Agent& agent, py::handle to) {
  if (PyLong_Check(to.ptr())) return agent.worker(to.cast<int>());
  if (PyUnicode_Check(to.ptr())) return agent.worker(to.cast<std::string>());
  if (py::hasattr(to, "name")) return agent.worker(py::str(to.attr("name")).cast<std::string>());
  throw py::type_error("rpc: `to` is a worker's name, its rank, or a WorkerInfo");
}

py::tuple info_tuple(const rpc::WorkerInfo& w) {
  return py::make_tuple(w.name, w.id, w.host, w.pid);
}

// Seconds as milliseconds; a positive time shorter than 1 ms is 1 ms, not "none".
std::optional<std::chrono::milliseconds> timeout_of(std::optional<double> seconds) {
  if (!seconds) return std::nullopt;
  auto ms = static_cast<int64_t>(*seconds * 1000.0 + 0.5);
  if (*seconds > 0 && ms == 0) ms = 1;
  return std::chrono::milliseconds(ms);
}

// rpc_sync / rpc_async: `object` names a served object whose method `target` is.
py::object call(py::handle to, const std::string& target, std::optional<std::string> object,
                py::handle args, py::handle kwargs, std::optional<double> timeout, bool sync,
                const std::string& shown) {
  auto agent = translated([] { return rpc::process_agent(); });
  const rpc::WorkerInfo& worker =
      translated([&]() -> const rpc::WorkerInfo& { return resolve(*agent, to); });
  rpc::Message m = rpc::request_head(target, object ? &*object : nullptr);
  rpc::Writer w(m);
  const std::string where =
      detail::concat(sync ? "rpc_sync" : "rpc_async", "('", worker.name, "', '", shown, "'): ");
  rpc_py::encode(args, w, (where + "args").c_str());
  if (kwargs.is_none())
    w.dict(0);
  else
    rpc_py::encode(kwargs, w, (where + "kwargs").c_str());
  std::optional<rpc::Future> f;
  translated([&] {
    py::gil_scoped_release nogil;
    f = agent->call(worker, shown, std::move(m), timeout_of(timeout),
                    sync ? "rpc_sync" : "rpc_async", sync);
  });
  if (sync) return result_of(*f);
  py::object future = py::reinterpret_steal<py::object>(PyObject_CallNoArgs(torch_future_class()));
  if (!future) throw py::error_already_set();
  PyObject* held = future.inc_ref().ptr();
  f->then([held](const rpc::Future& done) { completions().add(done, held); });
  return future;
}

}  // namespace

void bind_rpc(py::module_& m) {
  m.def("_rpc_set_errors",
        [](py::object base, py::object unknown, py::object remote, py::object timeout,
           py::object died, py::object not_authorized, py::object shutting_down, py::object codec) {
          g_errors = new ErrorClasses{base, unknown,        remote,        timeout,
                                      died, not_authorized, shutting_down, codec};
        });
  m.def("_rpc_init",
        [](const std::string& name, int rank, int world_size, const std::string& init_method,
           double rpc_timeout, std::optional<double> init_timeout, int threads, int max_threads) {
          rpc::RpcOptions o;
          o.max_threads = max_threads;
          o.init_method = init_method;
          o.rpc_timeout = *timeout_of(rpc_timeout);
          o.init_timeout = timeout_of(init_timeout);
          o.threads = threads;
          translated([&] {
            py::gil_scoped_release nogil;
            rpc::start_process_agent(name, rank, world_size, o);
          });
        });
  m.def("_rpc_register", [](const std::string& name, py::object fn) {
    translated([&] { rpc::process_registry()->add_function(name, python_handler(std::move(fn))); });
  });
  m.def("_rpc_unregister",
        [](const std::string& name) { rpc::process_registry()->remove_function(name); });
  m.def("_rpc_registered", [] { return rpc::process_registry()->function_names(); });
  m.def("_rpc_serve", [](const std::string& name, py::dict methods) {
    std::map<std::string, rpc::Handler> handlers;
    for (auto [method, fn] : methods)
      handlers.emplace(py::str(method).cast<std::string>(),
                       python_handler(py::reinterpret_borrow<py::object>(fn)));
    translated([&] { rpc::process_registry()->add_object(name, std::move(handlers)); });
  });
  m.def("_rpc_close", [](const std::string& name) { rpc::process_registry()->close_object(name); });
  m.def("_rpc_call", &call, py::arg("to"), py::arg("target"), py::arg("object"), py::arg("args"),
        py::arg("kwargs"), py::arg("timeout"), py::arg("sync"), py::arg("shown"));
  m.def("_rpc_worker", [](py::object which) {
    auto agent = translated([] { return rpc::process_agent(); });
    if (which.is_none()) return info_tuple(agent->self());
    return info_tuple(
        translated([&]() -> const rpc::WorkerInfo& { return resolve(*agent, which); }));
  });
  m.def("_rpc_workers", [] {
    py::list all;
    for (const auto& w : translated([] { return rpc::process_agent(); })->workers())
      all.append(info_tuple(w));
    return all;
  });
  m.def("_rpc_shutdown", [](double timeout) {
    rpc::ShutdownReport report = translated([&] {
      py::gil_scoped_release nogil;
      return rpc::stop_process_agent(*timeout_of(timeout));
    });
    py::list dead, unfinished;
    for (const auto& w : report.dead) dead.append(info_tuple(w));
    for (const auto& w : report.unfinished) unfinished.append(info_tuple(w));
    return py::make_tuple(dead, unfinished);
  });
  m.def("_rpc_caller", []() -> py::object {
    if (!rpc::t_caller) return py::none();
    return info_tuple(*rpc::t_caller);
  });
  m.def("_rpc_running", [] {
    try {
      return !rpc::process_agent()->is_shut_down();
    } catch (const rpc::RpcError&) {
      return false;
    }
  });
}

}  // namespace lockstep::c10d_backend

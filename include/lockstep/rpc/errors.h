// The failures of an RPC, each naming what was called, on which worker, and why. Python's
// lockstep.rpc raises the classes of the same names.
#pragma once

#include <string>
#include <vector>

#include "lockstep/core/error.h"

namespace lockstep::rpc {

// Base of every RPC failure.
class RpcError : public Error {
 public:
  explicit RpcError(const std::string& what, std::string worker = {})
      : Error(what), worker_(std::move(worker)) {}
  // The worker the call was for ("" when none).
  const std::string& worker() const { return worker_; }

 private:
  std::string worker_;
};

// The callee has no function (or served object method) of that name. `registered` lists what it
// has.
class UnknownFunction : public RpcError {
 public:
  UnknownFunction(const std::string& what, std::string worker, std::string function,
                  std::vector<std::string> registered)
      : RpcError(what, std::move(worker)),
        function_(std::move(function)),
        registered_(std::move(registered)) {}
  const std::string& function() const { return function_; }
  const std::vector<std::string>& registered() const { return registered_; }

 private:
  std::string function_;
  std::vector<std::string> registered_;
};

// The function ran on the callee and threw: its type name, its message and the callee's
// traceback (C++: the exception's what()).
class RemoteError : public RpcError {
 public:
  RemoteError(const std::string& what, std::string worker, std::string type, std::string message,
              std::string traceback)
      : RpcError(what, std::move(worker)),
        type_(std::move(type)),
        message_(std::move(message)),
        traceback_(std::move(traceback)) {}
  const std::string& type() const { return type_; }
  const std::string& message() const { return message_; }
  const std::string& traceback() const { return traceback_; }

 private:
  std::string type_, message_, traceback_;
};

// No answer within the call's timeout.
class RpcTimeout : public RpcError {
  using RpcError::RpcError;
};

// The callee's process ended (or its host stopped answering) before it answered.
class PeerDied : public RpcError {
  using RpcError::RpcError;
};

// The callee and this process do not share the job's secret.
class NotAuthorized : public RpcError {
  using RpcError::RpcError;
};

// This process, or the callee, is shutting down RPC.
class ShutdownInProgress : public RpcError {
  using RpcError::RpcError;
};

// A value the codec cannot carry, or a malformed message from a peer.
class CodecError : public RpcError {
  using RpcError::RpcError;
};

}  // namespace lockstep::rpc

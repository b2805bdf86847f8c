// Test harness for the algorithms: `size` ranks as threads of this process, each with its own
// TcpTransport over one real loopback mesh (a fresh HashStore per mesh), so that algorithms run
// over real sockets with real header checks, and can be called one by one with forced choices.
#pragma once

#include <chrono>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "algorithms/algorithms.h"
#include "backends/tcp/tcp_transport.h"
#include "lockstep/core/error.h"
#include "support/typed_buffer.h"

namespace lockstep::testing {

struct MeshRank {
  int rank = 0;
  int size = 1;
  tcp::TcpTransport* transport = nullptr;
  Scratch scratch;
  uint64_t seq = 0;

  // A fresh op of `kind` with the next sequence number and a 60 s deadline.
  Op op(OpKind kind);
  // Runs `algorithm` as op (the transport's current op for its duration).
  void run(const Op& op, const std::function<void()>& algorithm);
  // Runs op with run_collective (the automatic choice, or op.algorithm).
  void run(const Op& op);
};

// Runs fn on `size` threads, one rank each, over one mesh; joins them and rethrows the first
// exception. Ranks say goodbye before their sockets close.
void with_mesh(int size, const std::function<void(MeshRank&)>& fn);

// The closed-form input of the reduction tests: rank r's element i.
inline double rank_value(int r, size_t i) {
  return (r + 1) * static_cast<double>(i % 7);
}
// sum over ranks 0..n-1 of rank_value(r, i).
inline double rank_value_sum(int n, size_t i) {
  return n * (n + 1) / 2.0 * static_cast<double>(i % 7);
}

// Throws a description of the first element where buf differs from expect(i), for i in [begin,
// end).
template <class F>
void expect_elements(const TypedBuffer& buf, F expect, const std::string& context, size_t begin = 0,
                     size_t end = SIZE_MAX) {
  end = std::min(end, buf.count());
  for (size_t i = begin; i < end; ++i) {
    double want = expect(i), got = buf.get(i);
    if (got != want) {
      std::ostringstream msg;
      msg << context << ": element " << i << " is " << got << ", expected " << want;
      throw std::runtime_error(msg.str());
    }
  }
}

}  // namespace lockstep::testing

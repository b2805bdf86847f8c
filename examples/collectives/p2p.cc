// Point to point: send and recv between two ranks.
//
//   lockstep run --standalone --nproc-per-node 2 ./p2p     (any number of ranks from 2 works)
//
// Two patterns:
//   - a ring shift: every rank sends to the next rank and receives from the previous one. A send
//     may wait until its receiver has started the matching recv (on tcp, once the message is
//     larger than the socket buffers), and a group runs its ops in issue order, so if every rank
//     sent first, every rank could wait for a peer that is itself sending. Even ranks send first
//     and odd ranks receive first, which works for any message size and any number of ranks;
//   - a fan-in: every other rank sends rank 0 a message of its own length, with a tag.
// Per pair of ranks, sends and recvs match in the order they are issued, and a recv must give the
// same tag and size as its send (a difference is a MismatchError naming both). A recv names its
// source: there is no receive from any rank. Each rank checks what it received against its closed
// form; the program exits with 1 when any rank found a wrong element, and with 2 on an error.
#include <lockstep/core/error.h>
#include <lockstep/group/init.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr size_t kRingCount = size_t{1} << 20;  // 4 MiB of f32
// Element i of what rank r sends in the ring.
float ring_value(int rank, size_t i) {
  return static_cast<float>(rank * 1000 + static_cast<int>(i % 1000));
}

}  // namespace

int main() {
  try {
    auto pg = lockstep::init_process_group();  // env://, as `lockstep run` sets it up
    const int rank = pg->rank(), n = pg->size();
    if (n < 2) {
      std::fprintf(stderr, "p2p: needs at least 2 ranks (lockstep run --nproc-per-node 2)\n");
      return 2;
    }
    int64_t wrong = 0;

    // Ring shift.
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    std::vector<float> out(kRingCount), in(kRingCount);
    for (size_t i = 0; i < kRingCount; ++i) out[i] = ring_value(rank, i);
    lockstep::WorkPtr sent, received;
    if (rank % 2 == 0) {
      sent = pg->send(lockstep::view(out), next);
      received = pg->recv(lockstep::view(in), prev);
    } else {
      received = pg->recv(lockstep::view(in), prev);
      sent = pg->send(lockstep::view(out), next);
    }
    sent->wait();
    received->wait();
    for (size_t i = 0; i < kRingCount; ++i)
      if (in[i] != ring_value(prev, i)) ++wrong;

    // Fan-in to rank 0: rank r sends r elements, all equal to r, with tag 7.
    constexpr uint32_t kTag = 7;
    if (rank == 0) {
      for (int src = 1; src < n; ++src) {
        std::vector<int32_t> message(static_cast<size_t>(src));  // rank 0 knows the sizes
        pg->recv(lockstep::view(message), src, {.tag = kTag})->wait();
        for (int32_t v : message)
          if (v != src) ++wrong;
      }
    } else {
      std::vector<int32_t> message(static_cast<size_t>(rank), rank);
      pg->send(lockstep::view(message), 0, {.tag = kTag})->wait();
    }

    std::vector<int64_t> total = {wrong};  // so that every rank exits alike
    pg->all_reduce(lockstep::view(total))->wait();
    if (wrong != 0)
      std::fprintf(stderr, "rank %d: %lld wrong elements\n", rank, static_cast<long long>(wrong));
    if (rank == 0 && total[0] == 0) std::printf("p2p: ok on %d ranks\n", n);
    return total[0] == 0 ? 0 : 1;
  } catch (const lockstep::Error& e) {
    std::fprintf(stderr, "p2p: %s\n", e.what());
    return 2;
  }
}

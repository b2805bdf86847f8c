// Point to point: send and recv between two ranks.
//
//   lockstep run --standalone --nproc-per-node 2 ./p2p     (any number of ranks from 2 works)
//
// Three patterns:
//   - a ring shift: every rank posts its recv from the previous rank, then its send to the next,
//     then waits for both. Sends and recvs progress independently, so the order of the two posts
//     does not matter, whatever the message size;
//   - a fan-in with recv_any: every other rank sends rank 0 a message of its own rank, with a tag,
//     and rank 0 takes them in whatever order they come (Work::source_rank says from whom);
//   - a halo exchange with batch_isend_irecv: a send and a recv to each neighbour, as one Work.
// A message matches the first recv posted for its source (or for any source) and tag, and the two
// must agree on count and dtype (a difference is a MismatchError naming both). Each rank checks
// what it received against its closed form; the program exits with 1 when any rank found a wrong
// element, and with 2 on an error.
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
    lockstep::WorkPtr received = pg->irecv(lockstep::view(in), prev);
    lockstep::WorkPtr sent = pg->isend(lockstep::view(out), next);
    received->wait();
    sent->wait();
    for (size_t i = 0; i < kRingCount; ++i)
      if (in[i] != ring_value(prev, i)) ++wrong;

    // Fan-in to rank 0 with recv_any: 16 elements from every other rank, all equal to its rank.
    constexpr uint32_t kTag = 7;
    if (rank == 0) {
      std::vector<bool> seen(static_cast<size_t>(n), false);
      for (int i = 1; i < n; ++i) {
        std::vector<int32_t> message(16);
        auto work = pg->recv_any(lockstep::view(message), {.tag = kTag});
        work->wait();
        const int src = work->source_rank();
        if (src < 1 || src >= n || seen[static_cast<size_t>(src)])
          ++wrong;
        else
          seen[static_cast<size_t>(src)] = true;
        for (int32_t v : message)
          if (v != src) ++wrong;
      }
    } else {
      std::vector<int32_t> message(16, rank);
      pg->send(lockstep::view(message), 0, {.tag = kTag})->wait();
    }

    // Halo exchange: one element to and from each neighbour, started together.
    std::vector<float> to_prev{float(rank)}, to_next{float(rank)}, from_prev(1), from_next(1);
    std::vector<lockstep::P2POp> ops{lockstep::P2POp::recv(lockstep::view(from_prev), prev, 1),
                                     lockstep::P2POp::recv(lockstep::view(from_next), next, 2),
                                     lockstep::P2POp::send(lockstep::view(to_next), next, 1),
                                     lockstep::P2POp::send(lockstep::view(to_prev), prev, 2)};
    pg->batch_isend_irecv(ops)->wait();
    if (from_prev[0] != float(prev) || from_next[0] != float(next)) ++wrong;

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

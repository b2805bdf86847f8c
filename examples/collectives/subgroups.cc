// Subgroups with new_group: collectives among some of the ranks.
//
//   lockstep run --standalone --nproc-per-node 2 ./subgroups     (any number of ranks works)
//
// The rules shown here:
//   - new_group is collective over the parent group: every rank calls it, for every subgroup, in
//     the same order, with the same ranks, even for a subgroup it is not in (it gets null then);
//   - a subgroup numbers its members 0..k-1 (member i is the i-th smallest parent rank);
//   - every rank uses its groups in the same order: a rank that does the subgroup's op first and
//     the parent's second must not meet a rank that does the parent's op first.
// Each rank checks its results against their closed form; the program exits with 1 when any rank
// found a wrong element, and with 2 on an error.
#include <lockstep/core/error.h>
#include <lockstep/group/init.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

int main() {
  try {
    auto world = lockstep::init_process_group();  // env://, as `lockstep run` sets it up
    const int rank = world->rank(), n = world->size();

    // Even ranks and odd ranks. Both new_group calls run on every rank, in this order.
    std::vector<int> evens, odds;
    for (int r = 0; r < n; ++r) (r % 2 == 0 ? evens : odds).push_back(r);
    std::shared_ptr<lockstep::ProcessGroup> even_group = world->new_group(evens);
    std::shared_ptr<lockstep::ProcessGroup> odd_group =
        odds.empty() ? nullptr : world->new_group(odds);  // the same condition on every rank
    lockstep::ProcessGroup& mine = rank % 2 == 0 ? *even_group : *odd_group;
    const std::vector<int>& members = rank % 2 == 0 ? evens : odds;

    int64_t wrong = 0;
    // This rank's place in its subgroup: its index among the members.
    if (mine.size() != static_cast<int>(members.size()) || mine.global_ranks() != members ||
        mine.global_ranks()[static_cast<size_t>(mine.rank())] != rank)
      ++wrong;

    // Subgroup first, then the whole group, on every rank.
    // In the subgroup: the sum of the members' global ranks.
    std::vector<int64_t> x = {rank};
    mine.all_reduce(lockstep::view(x))->wait();
    int64_t expected = 0;
    for (int r : members) expected += r;
    if (x[0] != expected) ++wrong;

    // In the whole group: the sum of every rank's global rank, n (n - 1) / 2.
    std::vector<int64_t> y = {rank};
    world->all_reduce(lockstep::view(y))->wait();
    if (y[0] != int64_t{n} * (n - 1) / 2) ++wrong;

    // A broadcast inside the subgroup: root is a subgroup rank (0: its smallest member).
    std::vector<int32_t> z = {mine.rank() == 0 ? 7000 + rank : -1};
    mine.broadcast(lockstep::view(z), {.root = 0})->wait();
    if (z[0] != 7000 + members.front()) ++wrong;

    std::vector<int64_t> total = {wrong};  // so that every rank exits alike
    world->all_reduce(lockstep::view(total))->wait();
    if (wrong != 0)
      std::fprintf(stderr, "rank %d: %lld wrong results\n", rank, static_cast<long long>(wrong));
    if (rank == 0 && total[0] == 0)
      std::printf("subgroups: ok on %d ranks (%zu even, %zu odd; backend %s)\n", n, evens.size(),
                  odds.size(), mine.backend_name().c_str());
    return total[0] == 0 ? 0 : 1;
  } catch (const lockstep::Error& e) {
    std::fprintf(stderr, "subgroups: %s\n", e.what());
    return 2;
  }
}

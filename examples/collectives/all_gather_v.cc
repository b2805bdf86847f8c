// all_gather_v: every rank contributes a different number of elements, and every rank gets all of
// them, concatenated in rank order.
//
//   lockstep run --standalone --nproc-per-node 2 ./all_gather_v
//
// The usual two steps when a rank knows only its own count: an all_gather of the counts (one
// element per rank), then the all_gather_v of the data with those counts. Each rank checks the
// result against its closed form; the program exits with 1 when any rank found a wrong element,
// and with 2 on an error.
#include <lockstep/core/error.h>
#include <lockstep/group/init.h>

#include <cstdint>
#include <cstdio>
#include <numeric>
#include <vector>

namespace {

// How many elements rank r contributes: 1 to 5, and different for neighbouring ranks.
size_t count_of(int rank) {
  return static_cast<size_t>(rank * 3 % 5 + 1);
}
// Element j of rank r's contribution.
int32_t value_of(int rank, size_t j) {
  return 100 * rank + static_cast<int32_t>(j);
}

}  // namespace

int main() {
  try {
    auto pg = lockstep::init_process_group();  // env://, as `lockstep run` sets it up
    const int rank = pg->rank(), n = pg->size();

    // This rank's data. Pretend only this rank knows how much it has.
    std::vector<int32_t> mine(count_of(rank));
    for (size_t j = 0; j < mine.size(); ++j) mine[j] = value_of(rank, j);

    // Step 1: every rank's count. all_gather wants size() * input.count output elements.
    std::vector<int64_t> my_count = {static_cast<int64_t>(mine.size())};
    std::vector<int64_t> all_counts(static_cast<size_t>(n));
    pg->all_gather(lockstep::view(my_count), lockstep::view(all_counts))->wait();

    // Step 2: the data. counts[r] elements come from rank r; the output holds their sum.
    std::vector<size_t> counts(all_counts.begin(), all_counts.end());
    std::vector<int32_t> everything(std::accumulate(counts.begin(), counts.end(), size_t{0}));
    pg->all_gather_v(lockstep::view(mine), lockstep::view(everything), counts)->wait();

    // Check: rank r's block starts after the blocks of ranks 0..r-1 and holds value_of(r, j).
    int64_t wrong = 0;
    size_t offset = 0;
    for (int r = 0; r < n; ++r) {
      if (counts[static_cast<size_t>(r)] != count_of(r)) ++wrong;
      for (size_t j = 0; j < count_of(r) && offset + j < everything.size(); ++j)
        if (everything[offset + j] != value_of(r, j)) ++wrong;
      offset += count_of(r);
    }
    if (offset != everything.size()) ++wrong;

    std::vector<int64_t> total = {wrong};  // so that every rank exits alike
    pg->all_reduce(lockstep::view(total))->wait();
    if (wrong != 0)
      std::fprintf(stderr, "rank %d: %lld wrong elements\n", rank, static_cast<long long>(wrong));
    if (rank == 0 && total[0] == 0)
      std::printf("all_gather_v: ok on %d ranks, %zu elements gathered\n", n, everything.size());
    return total[0] == 0 ? 0 : 1;
  } catch (const lockstep::Error& e) {
    std::fprintf(stderr, "all_gather_v: %s\n", e.what());
    return 2;
  }
}

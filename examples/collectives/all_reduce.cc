// all_reduce: every rank contributes a buffer, and every rank gets the elementwise reduction.
//
//   lockstep run --standalone --nproc-per-node 2 ./all_reduce
//
// Shows the three usual forms: a sum in place, an average out of place, and an op that runs while
// this rank does other work (the op's Work is waited for before the buffer is read). Each rank
// checks its results against their closed form; the program exits with 1 when any rank found a
// wrong element, and with 2 on an error (a lockstep::Error names what went wrong).
#include <lockstep/core/error.h>
#include <lockstep/group/init.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr size_t kCount = 100'000;

// 1. In place: x[i] = rank + i % 7 on every rank, summed. Element i of the sum is
//    sum over r of (r + i % 7) = n (n - 1) / 2 + n (i % 7): small integers, exact in f32.
int64_t sum_in_place(lockstep::ProcessGroup& pg) {
  const int n = pg.size();
  std::vector<float> x(kCount);
  for (size_t i = 0; i < kCount; ++i)
    x[i] = static_cast<float>(pg.rank() + static_cast<int>(i % 7));
  pg.all_reduce(lockstep::view(x))->wait();  // sum is the default op
  int64_t wrong = 0;
  for (size_t i = 0; i < kCount; ++i) {
    const double expected = n * (n - 1) / 2.0 + n * static_cast<double>(i % 7);
    if (x[i] != expected) ++wrong;
  }
  return wrong;
}

// 2. Out of place, with an option: the average of in[i] = 3 * rank + i % 5 goes to `out`, and
//    `in` is left as it was. The average is the exact sum divided once by n, so it equals
//    (3 n (n - 1) / 2 + n (i % 5)) / n up to rounding of that one division.
int64_t average_out_of_place(lockstep::ProcessGroup& pg) {
  const int n = pg.size();
  std::vector<double> in(kCount), out(kCount);
  for (size_t i = 0; i < kCount; ++i) in[i] = 3.0 * pg.rank() + static_cast<double>(i % 5);
  pg.all_reduce(lockstep::view(in), lockstep::view(out), {.op = lockstep::ReduceOp::avg})->wait();
  int64_t wrong = 0;
  for (size_t i = 0; i < kCount; ++i) {
    const double expected = (3.0 * n * (n - 1) / 2.0 + n * static_cast<double>(i % 5)) / n;
    if (std::abs(out[i] - expected) > 1e-12 * std::abs(expected)) ++wrong;
    if (in[i] != 3.0 * pg.rank() + static_cast<double>(i % 5)) ++wrong;  // input untouched
  }
  return wrong;
}

// 3. Asynchronous: start a max over i64, do other work meanwhile (here: compute the expected
//    result), then wait. The buffer belongs to the op until wait() returns: do not read or write
//    it before. max over r of (1000 r + i) = 1000 (n - 1) + i.
int64_t max_while_working(lockstep::ProcessGroup& pg) {
  const int n = pg.size();
  std::vector<int64_t> x(kCount);
  for (size_t i = 0; i < kCount; ++i) x[i] = 1000 * int64_t{pg.rank()} + static_cast<int64_t>(i);
  lockstep::WorkPtr work = pg.all_reduce(lockstep::view(x), {.op = lockstep::ReduceOp::max});
  std::vector<int64_t> expected(kCount);  // other work, which does not touch x
  for (size_t i = 0; i < kCount; ++i) expected[i] = 1000 * int64_t{n - 1} + static_cast<int64_t>(i);
  work->wait();  // rethrows the op's error, if it failed
  int64_t wrong = 0;
  for (size_t i = 0; i < kCount; ++i)
    if (x[i] != expected[i]) ++wrong;
  return wrong;
}

}  // namespace

int main() {
  try {
    // env://: MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE, which `lockstep run` sets.
    auto pg = lockstep::init_process_group();
    const int64_t wrong = sum_in_place(*pg) + average_out_of_place(*pg) + max_while_working(*pg);
    // Every rank learns whether any rank found a wrong element, so that all exit alike.
    std::vector<int64_t> total = {wrong};
    pg->all_reduce(lockstep::view(total))->wait();
    if (wrong != 0)
      std::fprintf(stderr, "rank %d: %lld wrong elements\n", pg->rank(),
                   static_cast<long long>(wrong));
    if (pg->rank() == 0 && total[0] == 0)
      std::printf("all_reduce: ok on %d ranks (backend %s)\n", pg->size(),
                  pg->backend_name().c_str());
    return total[0] == 0 ? 0 : 1;
  } catch (const lockstep::Error& e) {
    std::fprintf(stderr, "all_reduce: %s\n", e.what());
    return 2;
  }
}

// all_reduce, reduce and reduce_scatter(_v) over every dtype and op, world sizes 1-5 and 8, ranks
// as threads over a HashStore; every result checked against its closed form.
#include <gtest/gtest.h>

#include <numeric>

#include "group/backend_registry.h"
#include "group/closed_forms.h"
#include "lockstep/core/error.h"
#include "support/spawn.h"

namespace lockstep::testing {
namespace {

constexpr size_t kSmallCounts[] = {0, 1, 7, 1000};
constexpr size_t kLargeCount = 1'000'003;

std::string ctx(const char* op, DType t, ReduceOp r, const ProcessGroup& pg, size_t count) {
  return detail::concat(op, " ", dtype_name(t), " ", reduce_op_name(r), " world ", pg.size(),
                        " rank ", pg.rank(), " count ", count);
}

void all_reduce_case(ProcessGroup& pg, DType t, ReduceOp op, size_t count, bool in_place) {
  TypedBuffer in(t, count), out(t, count);
  in.fill([&](size_t i) { return reduce_input(op, pg.rank(), i); });
  if (in_place) {
    pg.all_reduce(in.view(), {.op = op})->wait();
  } else {
    pg.all_reduce(in.view(), out.view(), {.op = op})->wait();
    check_elements(
        in, [&](size_t i) { return reduce_input(op, pg.rank(), i); },
        ctx("all_reduce input untouched", t, op, pg, count));
  }
  check_elements(
      in_place ? in : out, [&](size_t i) { return reduce_expected(op, t, pg.size(), i); },
      ctx("all_reduce", t, op, pg, count));
}

class ReduceCollectives : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  // Runs fn on every rank of a fresh group of the parameterised backend and world size.
  void run(const std::function<void(ProcessGroup&)>& fn) {
    spawn_groups(std::get<1>(GetParam()), fn, std::get<0>(GetParam()));
  }
};

TEST_P(ReduceCollectives, AllReduceEveryDtypeAndOp) {
  run([](ProcessGroup& pg) {
    for (DType t : kAllDTypes)
      for (ReduceOp op : kAllReduceOps)
        if (reduce_op_supports(op, t))
          for (size_t count : kSmallCounts) all_reduce_case(pg, t, op, count, count % 2 == 0);
  });
}

TEST_P(ReduceCollectives, AllReduceLargeEveryDtype) {
  run([](ProcessGroup& pg) {
    for (DType t : kAllDTypes) {
      if (t == DType::boolean) continue;
      all_reduce_case(pg, t, ReduceOp::sum, kLargeCount, true);
      all_reduce_case(pg, t, is_integer(t) ? ReduceOp::bxor : ReduceOp::max, kLargeCount, false);
    }
    all_reduce_case(pg, DType::f32, ReduceOp::avg, kLargeCount, true);
    all_reduce_case(pg, DType::bf16, ReduceOp::avg, kLargeCount, false);
  });
}

TEST_P(ReduceCollectives, AllReduceForcedAlgorithms) {
  run([](ProcessGroup& pg) {
    for (Algorithm a : {Algorithm::ring, Algorithm::recursive_doubling})
      for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{100'003}}) {
        TypedBuffer buf(DType::f32, count);
        buf.fill([&](size_t i) { return reduce_input(ReduceOp::sum, pg.rank(), i); });
        pg.all_reduce(buf.view(), {.algorithm = a})->wait();
        check_elements(
            buf, [&](size_t i) { return reduce_expected(ReduceOp::sum, DType::f32, pg.size(), i); },
            detail::concat("all_reduce ", algorithm_name(a), " count ", count));
      }
  });
}

TEST_P(ReduceCollectives, ReduceToEveryRoot) {
  run([](ProcessGroup& pg) {
    for (int root = 0; root < pg.size(); ++root)
      for (DType t : {DType::f32, DType::i64, DType::bf16, DType::u8})
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::prod})
          for (size_t count : {size_t{0}, size_t{7}, size_t{1000}}) {
            TypedBuffer in(t, count), out(t, count);
            in.fill([&](size_t i) { return reduce_input(op, pg.rank(), i); });
            out.fill([](size_t) { return 3; });
            pg.reduce(in.view(), out.view(), {.root = root, .op = op})->wait();
            auto c = ctx("reduce", t, op, pg, count) + " root " + std::to_string(root);
            if (pg.rank() == root)
              check_elements(
                  out, [&](size_t i) { return reduce_expected(op, t, pg.size(), i); }, c);
            else
              check_elements(
                  out, [](size_t) { return 3; }, c + " (non-root output untouched)");
            check_elements(
                in, [&](size_t i) { return reduce_input(op, pg.rank(), i); }, c + " input");
          }
  });
}

TEST_P(ReduceCollectives, ReduceScatterUniformAndV) {
  run([](ProcessGroup& pg) {
    const int n = pg.size();
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::i32, DType::i8})
      for (size_t per_rank : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
        TypedBuffer in(t, per_rank * n), out(t, per_rank);
        in.fill([&](size_t i) { return reduce_input(ReduceOp::sum, pg.rank(), i); });
        pg.reduce_scatter(in.view(), out.view())->wait();
        size_t base = per_rank * static_cast<size_t>(pg.rank());
        check_elements(
            out, [&](size_t i) { return reduce_expected(ReduceOp::sum, t, n, base + i); },
            ctx("reduce_scatter", t, ReduceOp::sum, pg, per_rank));
      }
    // Uneven counts, with zeros: rank r gets (r * 3) % 5 elements, plus a large slot for rank 0.
    std::vector<size_t> counts(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) counts[static_cast<size_t>(r)] = static_cast<size_t>((r * 3) % 5);
    counts[0] = 100'003;
    size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
    size_t base = std::accumulate(counts.begin(), counts.begin() + pg.rank(), size_t{0});
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::band}) {
      TypedBuffer in(DType::i64, total), out(DType::i64, counts[static_cast<size_t>(pg.rank())]);
      in.fill([&](size_t i) { return reduce_input(op, pg.rank(), i); });
      pg.reduce_scatter_v(in.view(), out.view(), counts, {.op = op})->wait();
      check_elements(
          out, [&](size_t i) { return reduce_expected(op, DType::i64, n, base + i); },
          ctx("reduce_scatter_v", DType::i64, op, pg, total));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, ReduceCollectives,
                         ::testing::Combine(::testing::ValuesIn(backend_names()),
                                            ::testing::Values(1, 2, 3, 4, 5, 8)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_world" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace lockstep::testing

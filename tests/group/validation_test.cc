// Invalid calls throw InvalidArgument on the calling rank before any communication, naming the
// argument, and leave the group usable.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lockstep/core/error.h"
#include "support/spawn.h"

namespace lockstep::testing {
namespace {

// Runs call and asserts it throws InvalidArgument whose message contains every fragment.
template <class F>
void expect_invalid(F call, std::initializer_list<const char*> fragments) {
  try {
    call();
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    for (const char* f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos)
          << "message '" << e.what() << "' lacks '" << f << "'";
  }
}

TEST(Validation, BadCallsFailLocallyAndTheGroupStaysUsable) {
  spawn_groups(3, [](ProcessGroup& pg) {
    std::vector<float> f(6, 1.0f), small(5);
    std::vector<int32_t> ints(6, 1);
    std::vector<size_t> bad_counts = {1, 2};
    // Only one rank makes each mistake: nobody else notices, since nothing was sent.
    if (pg.rank() == 1) {
      expect_invalid([&] { (void)pg.all_reduce(view(f), {.op = ReduceOp::bxor}); },
                     {"bxor", "f32"});
      expect_invalid([&] { (void)pg.broadcast(view(f), {.root = 3}); }, {"root", "3", "outside"});
      expect_invalid([&] { (void)pg.broadcast(view(f), {.root = -1}); }, {"root", "-1"});
      expect_invalid([&] { (void)pg.all_gather(view(small), view(f)); },
                     {"all_gather", "output", "6", "15"});
      expect_invalid([&] { (void)pg.all_gather_v(view(f), view(f), bad_counts); },
                     {"all_gather_v", "counts", "2 entries", "3 ranks"});
      std::vector<size_t> counts = {1, 2, 2};
      expect_invalid(
          [&] {
            (void)pg.all_gather_v(BufferView{f.data(), 2, DType::f32}, view(f), counts);
          },
          {"output", "sum of counts"});
      expect_invalid([&] { (void)pg.reduce_scatter(view(f), view(small)); },
                     {"reduce_scatter", "input"});
      expect_invalid([&] { (void)pg.all_to_all(view(small), view(small)); }, {"split evenly"});
      expect_invalid([&] { (void)pg.all_reduce(view(f), view(ints)); }, {"dtype"});
      expect_invalid([&] { (void)pg.send(view(f), 1); }, {"itself"});
      expect_invalid([&] { (void)pg.recv(view(f), 9); }, {"source", "9"});
      std::vector<uint8_t> flags(4);
      expect_invalid(
          [&] {
            (void)pg.all_reduce(BufferView{flags.data(), 4, DType::boolean});
          },
          {"bool"});
      expect_invalid([&] { (void)pg.all_reduce(BufferView{nullptr, 4, DType::f32}); }, {"null"});
      expect_invalid([&] { pg.new_group({0, 0}); }, {"twice"});
    }
    // The group still works for everyone.
    std::vector<float> x(10, static_cast<float>(pg.rank()));
    pg.all_reduce(view(x))->wait();
    for (float v : x) EXPECT_EQ(v, 0.0f + 1.0f + 2.0f);
  });
}

}  // namespace
}  // namespace lockstep::testing

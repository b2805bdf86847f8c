// Every ProcessGroup collective on CUDA buffers through the nccl backend, ranks as threads with
// one GPU each, against closed forms. Skips on machines with too few GPUs.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "gpu_harness.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

// Rank r's element i: small integers, exact in every dtype; negative ones where the dtype is
// signed, so that avg's truncation toward zero shows.
double value(DType t, int rank, size_t i) {
  double v = rank + 1 + static_cast<double>(i % 7);
  return (t != DType::u8 && i % 2 == 1) ? -v : v;
}

double expected_reduction(DType t, ReduceOp op, int size, size_t i) {
  double sum = 0, lo = 1e300, hi = -1e300;
  for (int r = 0; r < size; ++r) {
    sum += value(t, r, i);
    lo = std::min(lo, value(t, r, i));
    hi = std::max(hi, value(t, r, i));
  }
  switch (op) {
    case ReduceOp::sum:
      return sum;
    case ReduceOp::min:
      return lo;
    case ReduceOp::max:
      return hi;
    case ReduceOp::avg:
      return is_integer(t) ? static_cast<double>(static_cast<int64_t>(sum) / size) : sum / size;
    default:
      return 0;
  }
}

// Allowed |got - want|. min and max only pick a value, and integer arithmetic is exact: those
// compare exactly, in every dtype. Only arithmetic (sum, avg, prod) in f16 and bf16 gets a
// tolerance: their avg rounds each rank's share (NCCL pre-multiplies by 1/n). An f32 or f64 avg
// may differ from the exact half-integer by a few units in the last place for the same reason;
// every other float result is exact (sums of small integers).
double tolerance(DType t, ReduceOp op, double expected) {
  const bool arithmetic = op == ReduceOp::sum || op == ReduceOp::avg || op == ReduceOp::prod;
  if (!arithmetic || is_integer(t)) return 0;
  if (t == DType::f16) return std::abs(expected) * 4e-3 + 0.05;
  if (t == DType::bf16) return std::abs(expected) * 3e-2 + 0.3;
  if (op != ReduceOp::avg) return 0;
  return std::abs(expected) * (t == DType::f32 ? 1e-6 : 1e-14);
}

constexpr DType kDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                             DType::i8,  DType::u8,  DType::i32, DType::i64};

TEST(NcclCollectives, AllReduceEveryDTypeAndArithmeticOp) {
  LOCKSTEP_REQUIRE_GPUS(1);
  constexpr size_t kCount = 1000;
  for (int size : gpu_world_sizes()) {
    spawn_gpu_groups(size, "nccl", [&](ProcessGroup& pg, int device) {
      EXPECT_EQ(pg.backend_name(), "nccl");
      for (DType t : kDTypes) {
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max}) {
          TypedBuffer host(t, kCount);
          host.fill([&](size_t i) { return value(t, pg.rank(), i); });
          DeviceBuffer dev(host, device);
          pg.all_reduce(dev.view(), {.op = op})->wait();
          dev.download();
          for (size_t i = 0; i < kCount; ++i) {
            double want = expected_reduction(t, op, size, i);
            const double allowed = tolerance(t, op, want);
            if (allowed == 0) {
              ASSERT_EQ(host.get(i), want) << "size " << size << " " << dtype_name(t) << " "
                                           << reduce_op_name(op) << " [" << i << "] (exact)";
            } else {
              ASSERT_NEAR(host.get(i), want, allowed)
                  << "size " << size << " " << dtype_name(t) << " " << reduce_op_name(op) << " ["
                  << i << "]";
            }
          }
        }
      }
    });
  }
}

TEST(NcclCollectives, ProdAndOutOfPlaceAllReduce) {
  LOCKSTEP_REQUIRE_GPUS(1);
  for (int size : gpu_world_sizes()) {
    spawn_gpu_groups(size, "nccl", [&](ProcessGroup& pg, int device) {
      TypedBuffer in(DType::i64, 64), out(DType::i64, 64);
      in.fill([&](size_t i) { return (pg.rank() + static_cast<int>(i)) % 2 + 1; });  // 1 or 2
      DeviceBuffer din(in, device), dout(out, device);
      pg.all_reduce(din.view(), dout.view(), {.op = ReduceOp::prod})->wait();
      dout.download();
      din.download();
      for (size_t i = 0; i < 64; ++i) {
        int twos = 0;
        for (int r = 0; r < size; ++r) twos += (r + static_cast<int>(i)) % 2;
        ASSERT_EQ(out.get(i), std::ldexp(1.0, twos)) << i;
        ASSERT_EQ(in.get(i), (pg.rank() + static_cast<int>(i)) % 2 + 1) << "input changed";
      }
    });
  }
}

TEST(NcclCollectives, BroadcastAndReduceFromEveryRoot) {
  LOCKSTEP_REQUIRE_GPUS(1);
  for (int size : gpu_world_sizes()) {
    spawn_gpu_groups(size, "nccl", [&](ProcessGroup& pg, int device) {
      for (int root = 0; root < size; ++root) {
        TypedBuffer b(DType::f32, 300);
        b.fill([&](size_t i) { return pg.rank() * 1000.0 + static_cast<double>(i); });
        DeviceBuffer db(b, device);
        pg.broadcast(db.view(), {.root = root})->wait();
        db.download();
        for (size_t i = 0; i < 300; ++i) ASSERT_EQ(b.get(i), root * 1000.0 + i) << root;

        TypedBuffer in(DType::i32, 300), out(DType::i32, 300);
        in.fill([&](size_t i) { return pg.rank() + static_cast<double>(i); });
        out.fill([](size_t) { return -1; });
        DeviceBuffer din(in, device), dout(out, device);
        pg.reduce(din.view(), dout.view(), {.root = root})->wait();
        dout.download();
        for (size_t i = 0; i < 300; ++i) {
          double want =
              pg.rank() == root ? size * (size - 1) / 2.0 + size * static_cast<double>(i) : -1.0;
          ASSERT_EQ(out.get(i), want) << "root " << root << " [" << i << "]";
        }
      }
    });
  }
}

TEST(NcclCollectives, AllGatherUniformInPlaceAndVariable) {
  LOCKSTEP_REQUIRE_GPUS(1);
  for (int size : gpu_world_sizes()) {
    spawn_gpu_groups(size, "nccl", [&](ProcessGroup& pg, int device) {
      const size_t k = 50;
      TypedBuffer in(DType::f64, k), out(DType::f64, k * size);
      in.fill([&](size_t i) { return pg.rank() * 100.0 + i; });
      DeviceBuffer din(in, device), dout(out, device);
      pg.all_gather(din.view(), dout.view())->wait();
      dout.download();
      for (size_t j = 0; j < k * size; ++j) ASSERT_EQ(out.get(j), (j / k) * 100.0 + j % k);

      // In place: the input is this rank's slot of the output.
      TypedBuffer place(DType::f64, k * size);
      place.fill([&](size_t j) { return j / k == static_cast<size_t>(pg.rank()) ? 7.0 : 0.0; });
      DeviceBuffer dplace(place, device);
      pg.all_gather(dplace.slice(pg.rank() * k, k), dplace.view())->wait();
      dplace.download();
      for (size_t j = 0; j < k * size; ++j) ASSERT_EQ(place.get(j), 7.0);

      std::vector<size_t> counts(size);
      for (int r = 0; r < size; ++r) counts[r] = r % 2 == 0 ? r + 1 : 0;  // some ranks send none
      size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
      TypedBuffer vin(DType::i32, counts[pg.rank()]), vout(DType::i32, total);
      vin.fill([&](size_t i) { return pg.rank() * 10 + static_cast<double>(i); });
      DeviceBuffer dvin(vin, device), dvout(vout, device);
      pg.all_gather_v(dvin.view(), dvout.view(), counts)->wait();
      dvout.download();
      size_t j = 0;
      for (int r = 0; r < size; ++r)
        for (size_t i = 0; i < counts[r]; ++i, ++j) ASSERT_EQ(vout.get(j), r * 10.0 + i);
    });
  }
}

TEST(NcclCollectives, GatherAndScatterUniformAndVariable) {
  LOCKSTEP_REQUIRE_GPUS(1);
  for (int size : gpu_world_sizes()) {
    spawn_gpu_groups(size, "nccl", [&](ProcessGroup& pg, int device) {
      std::vector<size_t> counts(size);
      for (int r = 0; r < size; ++r) counts[r] = 3 * r + 1;
      size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
      for (int root = 0; root < size; ++root) {
        bool me = pg.rank() == root;
        TypedBuffer in(DType::f32, 20), out(DType::f32, me ? 20 * size : 0);
        in.fill([&](size_t i) { return pg.rank() * 100.0 + i; });
        DeviceBuffer din(in, device), dout(out, device);
        pg.gather(din.view(), dout.view(), {.root = root})->wait();
        dout.download();
        for (size_t j = 0; me && j < 20u * size; ++j)
          ASSERT_EQ(out.get(j), (j / 20) * 100.0 + j % 20) << root;

        TypedBuffer vin(DType::i64, counts[pg.rank()]), vout(DType::i64, me ? total : 0);
        vin.fill([&](size_t i) { return pg.rank() * 100.0 + i; });
        DeviceBuffer dvin(vin, device), dvout(vout, device);
        pg.gather_v(dvin.view(), dvout.view(), counts, {.root = root})->wait();
        dvout.download();
        for (size_t j = 0, r = 0; me && r < counts.size(); ++r)
          for (size_t i = 0; i < counts[r]; ++i, ++j) ASSERT_EQ(vout.get(j), r * 100.0 + i);

        TypedBuffer sin(DType::f32, me ? 20 * size : 0), sout(DType::f32, 20);
        sin.fill([](size_t j) { return static_cast<double>(j); });
        DeviceBuffer dsin(sin, device), dsout(sout, device);
        pg.scatter(dsin.view(), dsout.view(), {.root = root})->wait();
        dsout.download();
        for (size_t i = 0; i < 20; ++i) ASSERT_EQ(sout.get(i), pg.rank() * 20.0 + i) << root;

        TypedBuffer svin(DType::i32, me ? total : 0), svout(DType::i32, counts[pg.rank()]);
        svin.fill([](size_t j) { return static_cast<double>(j); });
        DeviceBuffer dsvin(svin, device), dsvout(svout, device);
        pg.scatter_v(dsvin.view(), dsvout.view(), counts, {.root = root})->wait();
        dsvout.download();
        size_t first = std::accumulate(counts.begin(), counts.begin() + pg.rank(), size_t{0});
        for (size_t i = 0; i < counts[pg.rank()]; ++i) ASSERT_EQ(svout.get(i), first + i * 1.0);
      }
    });
  }
}

TEST(NcclCollectives, ReduceScatterUniformAndVariable) {
  LOCKSTEP_REQUIRE_GPUS(1);
  for (int size : gpu_world_sizes()) {
    spawn_gpu_groups(size, "nccl", [&](ProcessGroup& pg, int device) {
      const size_t k = 40;
      TypedBuffer in(DType::f32, k * size), out(DType::f32, k);
      in.fill([&](size_t j) { return pg.rank() + static_cast<double>(j); });
      DeviceBuffer din(in, device), dout(out, device);
      pg.reduce_scatter(din.view(), dout.view())->wait();
      dout.download();
      for (size_t i = 0; i < k; ++i)
        ASSERT_EQ(out.get(i), size * (size - 1) / 2.0 + size * (pg.rank() * k + i * 1.0));

      std::vector<size_t> counts(size);
      for (int r = 0; r < size; ++r) counts[r] = 2 * r + 1;
      size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
      TypedBuffer vin(DType::i32, total), vout(DType::i32, counts[pg.rank()]);
      vin.fill([&](size_t j) { return pg.rank() * 1000.0 + j; });
      DeviceBuffer dvin(vin, device), dvout(vout, device);
      pg.reduce_scatter_v(dvin.view(), dvout.view(), counts, {.op = ReduceOp::max})->wait();
      dvout.download();
      size_t first = std::accumulate(counts.begin(), counts.begin() + pg.rank(), size_t{0});
      for (size_t i = 0; i < counts[pg.rank()]; ++i)
        ASSERT_EQ(vout.get(i), (size - 1) * 1000.0 + first + i);
    });
  }
}

TEST(NcclCollectives, AllToAllUniformAndVariable) {
  LOCKSTEP_REQUIRE_GPUS(1);
  for (int size : gpu_world_sizes()) {
    spawn_gpu_groups(size, "nccl", [&](ProcessGroup& pg, int device) {
      const size_t k = 10;
      TypedBuffer in(DType::i32, k * size), out(DType::i32, k * size);
      in.fill([&](size_t j) { return pg.rank() * 1000.0 + j; });  // slot j/k goes to rank j/k
      DeviceBuffer din(in, device), dout(out, device);
      pg.all_to_all(din.view(), dout.view())->wait();
      dout.download();
      for (size_t j = 0; j < k * size; ++j)  // slot i of the output came from rank i
        ASSERT_EQ(out.get(j), (j / k) * 1000.0 + pg.rank() * k + j % k);

      // Rank i sends i + j + 1 elements to rank j, all equal to 100 i + j.
      std::vector<size_t> send(size), recv(size);
      for (int j = 0; j < size; ++j) {
        send[j] = pg.rank() + j + 1;
        recv[j] = j + pg.rank() + 1;
      }
      TypedBuffer vin(DType::f32, std::accumulate(send.begin(), send.end(), size_t{0}));
      TypedBuffer vout(DType::f32, std::accumulate(recv.begin(), recv.end(), size_t{0}));
      for (size_t j = 0, at = 0; j < send.size(); ++j)
        for (size_t n = 0; n < send[j]; ++n) vin.set(at++, pg.rank() * 100.0 + j);
      DeviceBuffer dvin(vin, device), dvout(vout, device);
      pg.all_to_all_v(dvin.view(), send, dvout.view(), recv)->wait();
      dvout.download();
      for (size_t i = 0, at = 0; i < recv.size(); ++i)
        for (size_t n = 0; n < recv[i]; ++n) ASSERT_EQ(vout.get(at++), i * 100.0 + pg.rank());
    });
  }
}

TEST(NcclCollectives, SendRecvRingBarrierAndEmptyOps) {
  LOCKSTEP_REQUIRE_GPUS(2);
  for (int size : gpu_world_sizes()) {
    if (size < 2) continue;
    spawn_gpu_groups(size, "nccl", [&](ProcessGroup& pg, int device) {
      TypedBuffer out(DType::f32, 64), in(DType::f32, 64);
      out.fill([&](size_t i) { return pg.rank() * 64.0 + i; });
      DeviceBuffer dout(out, device), din(in, device);
      int next = (pg.rank() + 1) % size, prev = (pg.rank() + size - 1) % size;
      // A ring where every rank sends first is a cycle of waits unless NCCL runs each rank's
      // send and recv in one group: batch_isend_irecv (docs/nccl.md, "Send and recv").
      std::vector<P2POp> ring = {P2POp::send(dout.view(), next), P2POp::recv(din.view(), prev)};
      pg.batch_isend_irecv(ring)->wait();
      din.download();
      for (size_t i = 0; i < 64; ++i) ASSERT_EQ(in.get(i), prev * 64.0 + i);
      pg.barrier()->wait();
      TypedBuffer none(DType::f32, 0);
      DeviceBuffer dnone(none, device);
      pg.all_reduce(dnone.view())->wait();
      pg.broadcast(dnone.view())->wait();
    });
  }
}

TEST(NcclCollectives, AutoSendsCudaBuffersToNcclAndHostBuffersToShm) {
  LOCKSTEP_REQUIRE_GPUS(1);
  for (int size : gpu_world_sizes()) {
    spawn_gpu_groups(size, "auto", [&](ProcessGroup& pg, int device) {
      EXPECT_EQ(pg.backend_name(), "shm");
      std::vector<float> host(16, 1.0f);
      TypedBuffer gpu(DType::f32, 16);
      gpu.fill([](size_t) { return 2.0; });
      DeviceBuffer dgpu(gpu, device);
      pg.all_reduce(view(host))->wait();   // host backend
      pg.all_reduce(dgpu.view())->wait();  // nccl, created here
      pg.barrier()->wait();
      pg.all_reduce(view(host))->wait();
      dgpu.download();
      EXPECT_EQ(host[0], static_cast<float>(size * size));
      EXPECT_EQ(gpu.get(0), 2.0 * size);
    });
  }
}

}  // namespace
}  // namespace lockstep::testing

/* Open MPI reference for `lockstep bench`: times MPI_Allreduce (or MPI_Bcast, MPI_Allgather,
 * MPI_Reduce_scatter_block) over the same sizes, iteration counts and method, and prints rows in
 * the same format, so the two tables compare line by line (bench/compare_mpi.sh runs both).
 *
 * Method (docs/bench.md): rank 0 measures single-core memcpy of 64 MiB (fastest of 5); each row
 * runs iters/10 warm-up iterations, then `iters` timed ones, each after a barrier; the row reports
 * the median over iterations of the slowest rank's time. A pingpong iteration is the mean of up to
 * 100 round trips back to back (osu_latency's method). float32 data, sum.
 *
 * usage: mpirun -np N mpi_collective_bench [--op all_reduce|broadcast|all_gather|reduce_scatter|pingpong]
 *                                          [--min-bytes B] [--max-bytes B]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum Op { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kPingPong };

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* lockstep bench's default: about 256 MiB of traffic per row, 5 to 200 iterations. */
static int iterations_for(size_t bytes) {
  size_t iters = bytes == 0 ? 200 : (256u << 20) / bytes;
  return iters < 5 ? 5 : iters > 200 ? 200 : (int)iters;
}

static double memcpy_gbps(void) {
  const size_t bytes = 64u << 20;
  char* a = malloc(bytes);
  char* b = malloc(bytes);
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  memcpy(b, a, bytes);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    double start = now_us();
    memcpy(b, a, bytes);
    double t = now_us() - start;
    if (t < best) best = t;
  }
  free(a);
  free(b);
  return bytes / best / 1e3;
}

/* Runs op once on `count` floats (all_gather/reduce_scatter: the count of one rank's slot). */
static void run_op(enum Op op, float* in, float* out, int count) {
  switch (op) {
    case kAllReduce:
      MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case kBroadcast:
      MPI_Bcast(in, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
      break;
    case kAllGather:
      MPI_Allgather(in, count, MPI_FLOAT, out, count, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case kReduceScatter:
      MPI_Reduce_scatter_block(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case kPingPong: { /* as lockstep bench's pingpong: 2i sends to 2i+1, which sends it back */
      int me, n;
      MPI_Comm_rank(MPI_COMM_WORLD, &me);
      MPI_Comm_size(MPI_COMM_WORLD, &n);
      if (me % 2 == 0 && me + 1 >= n) {
        memcpy(out, in, (size_t)count * 4);
      } else if (me % 2 == 0) {
        MPI_Send(in, count, MPI_FLOAT, me + 1, 0, MPI_COMM_WORLD);
        MPI_Recv(out, count, MPI_FLOAT, me + 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(out, count, MPI_FLOAT, me - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(out, count, MPI_FLOAT, me - 1, 0, MPI_COMM_WORLD);
      }
      break;
    }
  }
}

static double bus_factor(enum Op op, int n) {
  if (op == kAllReduce) return 2.0 * (n - 1) / n;
  if (op == kBroadcast) return 1.0;
  if (op == kPingPong) return 2.0; /* the time is a round trip */
  return (double)(n - 1) / n;
}

static const char* op_name(enum Op op) {
  static const char* names[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter",
                                "pingpong"};
  return names[op];
}

/* Runs of the op per timed iteration, as lockstep bench's runs_per_iteration
 * (src/cli/bench_options.h): a pingpong times up to 100 round trips back to back. */
static int runs_per_iteration(enum Op op, size_t bytes) {
  if (op != kPingPong) return 1;
  size_t runs = (1u << 20) / (bytes > 0 ? bytes : 1);
  return runs < 1 ? 1 : runs > 100 ? 100 : (int)runs;
}

/* One row: returns the median of the slowest rank's time per iteration, in microseconds. */
static double time_row(enum Op op, float* in, float* out, int count, int iters) {
  double* t = calloc((size_t)iters, sizeof(double));
  const int runs = runs_per_iteration(op, (size_t)count * sizeof(float));
  for (int i = 0; i < (iters / 10 > 0 ? iters / 10 : 1); ++i) run_op(op, in, out, count);
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = now_us();
    for (int r = 0; r < runs; ++r) run_op(op, in, out, count);
    t[i] = (now_us() - start) / runs;
  }
  MPI_Allreduce(MPI_IN_PLACE, t, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  qsort(t, (size_t)iters, sizeof(double), compare_doubles);
  double median = iters % 2 ? t[iters / 2] : (t[iters / 2 - 1] + t[iters / 2]) / 2;
  free(t);
  return median;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  enum Op op = kAllReduce;
  size_t min_bytes = 4, max_bytes = 64u << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--op")) {
      for (int k = 0; k < 5; ++k)
        if (!strcmp(argv[i + 1], op_name((enum Op)k))) op = (enum Op)k;
    } else if (!strcmp(argv[i], "--min-bytes")) {
      min_bytes = strtoull(argv[i + 1], NULL, 10);
    } else if (!strcmp(argv[i], "--max-bytes")) {
      max_bytes = strtoull(argv[i + 1], NULL, 10);
    }
  }
  /* all_gather and reduce_scatter sizes are the whole n-slot buffer (nccl-tests). */
  const int slotted = op == kAllGather || op == kReduceScatter;
  float* in = malloc(max_bytes + 64);
  float* out = malloc(max_bytes + 64);
  for (size_t i = 0; i < max_bytes / 4 + 16; ++i) in[i] = 1.0f, out[i] = 0.0f;
  MPI_Barrier(MPI_COMM_WORLD);
  double gbps = 0;
  if (rank == 0) {
    gbps = memcpy_gbps();
    printf("# memcpy: %.2f GB/s (one core, 64 MiB, fastest of 5 copies)\n", gbps);
    printf("# %s: Open MPI, %d ranks, dtype f32, reduce op sum, busbw = algbw x %.3f\n",
           op_name(op), n, bus_factor(op, n));
    printf(
        "#      size(B)        count  dtype  iters    time(us)  algbw(GB/s)  busbw(GB/s)  "
        "%%memcpy\n");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    size_t count = bytes / 4;
    if (slotted) count = count / (size_t)n < 1 ? (size_t)n : count / (size_t)n * (size_t)n;
    size_t row_bytes = count * 4;
    int per_call = (int)(slotted ? count / (size_t)n : count);
    int iters = iterations_for(row_bytes);
    double us = time_row(op, in, out, per_call, iters);
    if (rank == 0) {
      double algbw = row_bytes / us / 1e3, busbw = algbw * bus_factor(op, n);
      printf("%14zu %12zu    f32 %6d %11.1f %12.3f %12.3f %7.1f%%\n", row_bytes, count, iters, us,
             algbw, busbw, 100.0 * busbw / gbps);
      fflush(stdout);
    }
  }
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}

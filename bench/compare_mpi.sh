#!/usr/bin/env bash
# lockstep (shm backend by default) against Open MPI on the same host, in one run: times one
# collective over N local ranks with `lockstep bench` and with mpi_collective_bench (built when
# CMake finds MPI), then prints both tables side by side with the ratio of their busbw.
#
# usage: bench/compare_mpi.sh BUILD_DIR [NRANKS] [OP] [BACKEND] [MAX_BYTES]
#   OP: all_reduce (default), broadcast, all_gather, reduce_scatter, pingpong; BACKEND: shm
#   (default)
set -euo pipefail
build=${1:?usage: compare_mpi.sh BUILD_DIR [NRANKS] [OP] [BACKEND] [MAX_BYTES]}
nranks=${2:-2}
op=${3:-all_reduce}
backend=${4:-shm}
max_bytes=${5:-67108864}
mpi_bench="$build/bench/mpi_collective_bench"
[[ -x "$mpi_bench" ]] || { echo "no $mpi_bench: configure with MPI installed (mpicc)" >&2; exit 2; }

ours=$(mktemp) theirs=$(mktemp)
trap 'rm -f "$ours" "$theirs"' EXIT
"$build/lockstep" bench --backend "$backend" --nranks "$nranks" --op "$op" --max-bytes "$max_bytes" | tee "$ours"
mpirun --allow-run-as-root --oversubscribe -np "$nranks" "$mpi_bench" --op "$op" --max-bytes "$max_bytes" | tee "$theirs"

echo "#"
echo "# $op, $nranks ranks: lockstep $backend against Open MPI, same run"
grep '^# memcpy' "$ours" | sed 's/^# /# lockstep /'
grep '^# memcpy' "$theirs" | sed 's/^# /# Open MPI /'
printf '#%13s %12s %12s %12s %12s %8s\n' 'size(B)' 'lockstep(us)' 'OpenMPI(us)' 'lockstep GB/s' 'OpenMPI GB/s' 'ratio'
# Rows are "size count dtype iters time algbw busbw ..."; join on size.
awk 'NR == FNR { if ($1 !~ /^#/) { t[$1] = $5; b[$1] = $7 } next }
     $1 !~ /^#/ && ($1 in t) {
       printf "%14s %12.1f %12.1f %12.3f %12.3f %7.2fx\n", $1, t[$1], $5, b[$1], $7, ($7 > 0 ? b[$1] / $7 : 0)
     }' "$ours" "$theirs"

#!/usr/bin/env bash
# Two builds of lockstep side by side, interleaved in one run: `lockstep bench` of the old build,
# then of the new, REPS times, at each size, for each backend and op; prints the median time of
# each (microseconds), the spread (min-max) and the ratio new/old. For a change that must not
# slow anything down (docs/bench.md).
#
# usage: bench/compare_builds.sh OLD_BUILD NEW_BUILD [REPS] [SIZES] [BACKENDS] [OPS]
#   SIZES: comma-separated bytes (default 4,65536,67108864); BACKENDS: shm,tcp,hier (hier runs
#   4 ranks on 2 simulated hosts, LOCKSTEP_HOST_ID); OPS: all_reduce,pingpong.
set -euo pipefail
old=${1:?usage: compare_builds.sh OLD_BUILD NEW_BUILD [REPS] [SIZES] [BACKENDS] [OPS]}
new=${2:?usage: compare_builds.sh OLD_BUILD NEW_BUILD [REPS] [SIZES] [BACKENDS] [OPS]}
reps=${3:-3}
IFS=, read -r -a sizes <<< "${4:-4,65536,67108864}"
IFS=, read -r -a backends <<< "${5:-shm,tcp,hier}"
IFS=, read -r -a ops <<< "${6:-all_reduce,pingpong}"

# The median time (column 5) of one row of `lockstep bench`.
time_of() {
  local build=$1 backend=$2 op=$3 bytes=$4 nranks=2 env=()
  if [[ $backend == hier ]]; then nranks=4 env=(LOCKSTEP_HOST_ID=a,a,b,b); fi
  env "${env[@]}" "$build/lockstep" bench --backend "$backend" --nranks "$nranks" --op "$op" \
    --min-bytes "$bytes" --max-bytes "$bytes" --no-check | awk '$1 !~ /^#/ && NF > 5 { print $5 }'
}

stats() {  # median, min, max of the arguments
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f %.1f %.1f", v[int((NR + 1) / 2)], v[1], v[NR] }'
}

printf '%-6s %-10s %10s %22s %22s %7s\n' backend op bytes 'old us (min-max)' 'new us (min-max)' ratio
for backend in "${backends[@]}"; do
  for op in "${ops[@]}"; do
    for bytes in "${sizes[@]}"; do
      a=() b=()
      for ((i = 0; i < reps; ++i)); do
        a+=("$(time_of "$old" "$backend" "$op" "$bytes")")
        b+=("$(time_of "$new" "$backend" "$op" "$bytes")")
      done
      read -r am alo ahi <<< "$(stats "${a[@]}")"
      read -r bm blo bhi <<< "$(stats "${b[@]}")"
      printf '%-6s %-10s %10s %22s %22s %7.2f\n' "$backend" "$op" "$bytes" \
        "$am ($alo-$ahi)" "$bm ($blo-$bhi)" "$(awk -v x="$bm" -v y="$am" 'BEGIN { print (y > 0 ? x / y : 0) }')"
    done
  done
done

"""lockstep.rpc beside torch.distributed.rpc (TensorPipe), same machine, same run, interleaved:
a small call's p50 and p99, pipelined rpc_async calls per second, and a 64 MiB tensor argument
(lockstep only; beside lockstep's own tcp send/recv of 64 MiB), each the median of --runs runs
with their spread; then the same with --busy processes spinning on the machine (another job).

    python bench/rpc_compare.py --runs 3 --busy 3

Runs ../shared/anchors/torch_rpc_bench.py (torch's side, with the same interpreter), bench/
rpc_bench.py and the C++ bench/rpc_bench under `lockstep run` from the build tree (LOCKSTEP_BUILD_DIR,
default build)."""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, env):
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=600).stdout
    m = re.search(r"(?:torch|lockstep) rpc(?: c\+\+)? (.*)", out)
    if not m:
        raise SystemExit(f"no result from {' '.join(cmd)}:\n{out}")
    return {k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", m.group(1))}


def tcp_sendrecv_gbps(build, env):
    out = subprocess.run([os.path.join(build, "lockstep"), "bench", "--nranks", "2", "--op",
                          "sendrecv", "--backend", "tcp", "--min-bytes", "64M", "--max-bytes", "64M"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    row = [l for l in out.splitlines() if l.strip().startswith("67108864")]
    return float(row[0].split()[5]) * 1000  # MB/s


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--busy", type=int, default=0, help="also measure with this many busy loops")
    a = p.parse_args()
    build = os.environ.get("LOCKSTEP_BUILD_DIR", os.path.join(ROOT, "build"))
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), OMP_NUM_THREADS="1")
    launch = [os.path.join(build, "lockstep"), "run", "--standalone", "--nproc-per-node", "2"]
    sides = {
        "torch.distributed.rpc": [sys.executable,
                                  os.path.join(ROOT, "..", "shared", "anchors", "torch_rpc_bench.py")],
        "lockstep.rpc (Python)": launch + [sys.executable, os.path.join(ROOT, "bench", "rpc_bench.py")],
        "lockstep::rpc (C++)": launch + [os.path.join(build, "bench", "rpc_bench")],
    }
    for busy in sorted({0, a.busy}):
        spinners = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(busy)]
        try:
            results = {name: [] for name in sides}
            tcp = []
            for _ in range(a.runs):  # interleaved: each run of each side, in turn
                for name, cmd in sides.items():
                    results[name].append(run(cmd, env))
                tcp.append(tcp_sendrecv_gbps(build, env))
        finally:
            for s in spinners:
                s.kill()
        print(f"\n{busy} busy loops on the machine; median of {a.runs} runs [min-max]")
        print("| side | small call p50 (us) | p99 (us) | pipelined calls/s | 64 MiB argument (MB/s) |")
        print("|---|---|---|---|---|")

        def cell(xs, fmt="{:.0f}"):
            return f"{fmt.format(statistics.median(xs))} [{fmt.format(min(xs))}-{fmt.format(max(xs))}]"

        for name, rs in results.items():
            big = [r["big_MBps"] for r in rs if "big_MBps" in r]
            print(f"| {name} | {cell([r['p50_us'] for r in rs], '{:.1f}')} | "
                  f"{cell([r['p99_us'] for r in rs], '{:.1f}')} | "
                  f"{cell([r['pipelined_calls_per_s'] for r in rs])} | {cell(big) if big else '-'} |")
        print(f"| lockstep tcp send/recv, 64 MiB | | | | {cell(tcp)} |")


if __name__ == "__main__":
    main()

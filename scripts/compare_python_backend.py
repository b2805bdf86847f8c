"""torch.distributed from Python over "lockstep" against "gloo", side by side in one run.

Usage: compare_python_backend.py BUILD_DIR [--rounds N] [--steps N] [--batch N]

Two ranks under `lockstep run`, one thread each, the project's torch 2.x. The two backends alternate round
by round, so that machine noise hits both alike. Reports the median of the rounds and their spread
(min-max):
  - f32 all_reduce from Python at 4 KiB, 1 MiB and 64 MiB: µs per call (each round's value is the
    median of many calls) and bus bandwidth, 2 (n-1)/n * bytes / time;
  - torch's DistributedDataParallel on the main job's CNN (Fashion-MNIST, batch N per rank):
    samples/s;
  - FSDP2 (fully_shard) on a transformer of about 25M parameters (tests/c10d/fsdp_job.py
    --bench): steps/s (--fsdp-steps 0 skips it).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = [4 << 10, 1 << 20, 64 << 20]


FSDP_JOB = os.path.join(HERE, "..", "tests", "c10d", "fsdp_job.py")
FSDP_MODEL = ["--dim", "512", "--layers", "6", "--vocab", "8192"]


def run(build, *args, script=os.path.join(HERE, "python_backend_job.py")):
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), OMP_NUM_THREADS="1")
    cmd = [os.path.join(build, "lockstep"), "run", "--standalone", "--nproc-per-node", "2",
           "--python", sys.executable, script, *args]
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout}")
    return done.stdout


def spread(values):
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--fsdp-steps", type=int, default=5)
    args = parser.parse_args()
    us = {(b, s): [] for b in ("lockstep", "gloo") for s in SIZES}
    ddp = {"lockstep": [], "gloo": []}
    fsdp = {"lockstep": [], "gloo": []}
    layers = {}  # where lockstep's 4 KiB all_reduce spends its time
    params = 0
    for round_ in range(args.rounds):
        for backend in ("lockstep", "gloo"):
            out = run(args.build, "allreduce", backend, *map(str, SIZES))
            for size, t in re.findall(r"ALLREDUCE (\d+) ([0-9.]+)", out):
                us[backend, int(size)].append(float(t))
            out = run(args.build, "ddp", backend, str(args.steps), str(args.batch))
            ddp[backend].append(float(re.search(r"DDP ([0-9.]+)", out).group(1)))
            line = ", ".join(f"{s}: {us[backend, s][-1]:.1f} us" for s in SIZES)
            line += f", DDP {ddp[backend][-1]:.0f} samples/s"
            if args.fsdp_steps:
                out = run(args.build, "--backend", backend, "--bench", str(args.fsdp_steps),
                          *FSDP_MODEL, script=FSDP_JOB)
                fsdp[backend].append(1 / float(re.search(r"FSDP_STEP_S ([0-9.]+)", out).group(1)))
                params = int(re.search(r"FSDP_PARAMS (\d+)", out).group(1))
                line += f", FSDP2 {fsdp[backend][-1]:.2f} steps/s"
            print(f"round {round_ + 1} {backend}: {line}", flush=True)
        out = run(args.build, "layers", "lockstep", "4096")
        for name, t in re.findall(r"LAYER (\S+) ([0-9.]+)", out):
            layers.setdefault(name, []).append(float(t))
        bench = subprocess.run([os.path.join(args.build, "lockstep"), "bench", "--nranks", "2",
                                "--op", "all_reduce", "--min-bytes", "4096", "--max-bytes", "4096"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
        row = re.search(r"^ +4096 +1024 +f32 +\d+ +([0-9.]+)", bench, re.M)
        layers.setdefault("lockstep bench (C++)", []).append(float(row.group(1)))
    print(f"\nmedian of {args.rounds} rounds (min-max), 2 ranks, 1 thread each")
    print("| size | lockstep µs | gloo µs | lockstep busbw GB/s | gloo busbw GB/s | ratio |")
    print("|---|---|---|---|---|---|")
    for s in SIZES:
        l, g = us["lockstep", s], us["gloo", s]
        bw = lambda t: s / (t * 1e-6) / 1e9  # 2 (n-1)/n = 1 at n = 2
        print(f"| {s} B | {spread(l)} | {spread(g)} | {bw(statistics.median(l)):.2f} | "
              f"{bw(statistics.median(g)):.2f} | {statistics.median(g) / statistics.median(l):.2f}x |")
    l, g = ddp["lockstep"], ddp["gloo"]
    print(f"\nDDP (main job's CNN, batch {args.batch} per rank, world 2): lockstep {spread(l)} "
          f"samples/s, gloo {spread(g)} samples/s, ratio "
          f"{statistics.median(l) / statistics.median(g):.2f}x")
    print("\nwhere a 4 KiB all_reduce over lockstep spends its time (median µs, min-max):")
    for name, values in layers.items():
        print(f"  {name}: {spread(values)}")
    if args.fsdp_steps:
        l, g = fsdp["lockstep"], fsdp["gloo"]
        sp = lambda v: f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"
        print(f"FSDP2 ({params / 1e6:.1f}M parameters, world 2): lockstep {sp(l)} steps/s, "
              f"gloo {sp(g)} steps/s, ratio {statistics.median(l) / statistics.median(g):.2f}x")


if __name__ == "__main__":
    main()

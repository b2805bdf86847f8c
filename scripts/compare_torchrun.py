"""`lockstep run` against torchrun 2.x, on the same script (scripts/launcher_job.py, gloo):
  - the time from the command to the end of the first collective, at 2 and 4 ranks: the median
    of --rounds interleaved runs (the two launchers alternate), with the spread;
  - what each prints for a Python exception, a SIGKILLed rank and a hang: its exit code, its
    wall time, and its last lines, written to --out DIR (one file per launcher and case).
Usage: compare_torchrun.py BUILD_DIR [--rounds 5] [--out DIR]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "launcher_job.py")


def command(launcher, build, nproc, mode):
    if launcher == "lockstep":
        return [os.path.join(build, "lockstep"), "run", "--standalone", "--nproc-per-node",
                str(nproc), "--python", sys.executable, JOB, mode]
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    return [torchrun, "--standalone", "--nproc-per-node", str(nproc), JOB, mode]


def run(launcher, build, nproc, mode, timeout=120):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCKSTEP_TIMEOUT"):
        env.pop(name, None)
    start = time.time()
    done = subprocess.run(command(launcher, build, nproc, mode), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return start, time.time() - start, done.returncode, done.stdout


def root_cause(out):
    """What the summary says of the first failure: lockstep's "root cause" line and the exit line
    under it; torchrun's "exitcode" and "traceback" of its Root Cause block."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("root cause"):
            exit_line = next((x.strip() for x in lines[i:i + 8] if x.strip().startswith("exit:")), "")
            return f"{line} / {exit_line}"
        if line.startswith("Root Cause"):
            block = [x.strip() for x in lines[i:i + 9]]
            pick = [x for x in block if x.startswith(("exitcode", "traceback"))]
            return " / ".join(pick)
    return "(no summary)"


def first_collective(launcher, build, nproc):
    start, _, code, out = run(launcher, build, nproc, "first")
    if code != 0:
        sys.exit(f"{launcher} failed:\n{out}")
    stamp = next(float(line.split()[-1]) for line in out.splitlines() if "FIRST_COLLECTIVE" in line)
    return stamp - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default="launcher-compare")
    args = p.parse_args()
    print("| ranks | lockstep run s | torchrun s | torchrun / lockstep |")
    print("|---|---|---|---|")
    for nproc in (2, 4):
        times = {"lockstep": [], "torchrun": []}
        for _ in range(args.rounds):
            for launcher in times:
                times[launcher].append(first_collective(launcher, args.build, nproc))
        med = {k: statistics.median(v) for k, v in times.items()}
        spread = {k: f"{min(v):.2f}-{max(v):.2f}" for k, v in times.items()}
        print(f"| {nproc} | {med['lockstep']:.2f} [{spread['lockstep']}] | "
              f"{med['torchrun']:.2f} [{spread['torchrun']}] | {med['torchrun'] / med['lockstep']:.2f} |",
              flush=True)
    os.makedirs(args.out, exist_ok=True)
    print("\n| case | launcher | exit | wall s | what its summary says of the first failure |")
    print("|---|---|---|---|---|")
    for mode in ("exception", "kill", "hang"):
        for launcher in ("lockstep", "torchrun"):
            _, wall, code, out = run(launcher, args.build, 2, mode)
            with open(os.path.join(args.out, f"{mode}-{launcher}.log"), "w") as f:
                f.write(out)
            print(f"| {mode} | {launcher} | {code} | {wall:.1f} | {root_cause(out)[:160]} |",
                  flush=True)


if __name__ == "__main__":
    main()

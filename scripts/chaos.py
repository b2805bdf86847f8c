#!/usr/bin/env python3
"""A chaos run of the main job: faults cost time, never results.

For each mode (plain DDP, ZeRO-1, ZeRO-2, uneven shares under a Join), it trains
train_fashion_mnist twice under `lockstep run` with the same seed:
  1. the reference, uninterrupted;
  2. the chaos run, with --max-restarts, --resume and a checkpoint every N steps, while this
     script SIGKILLs its ranks, one kill per attempt, of three kinds:
       random      a random rank at a random moment of its training;
       checkpoint  the rank writing a checkpoint file, in the middle of writing it: the script
                   watches the checkpoint folder (inotify), freezes the writer (SIGSTOP) the moment
                   a temporary file appears, and kills it if the file is still there unrenamed;
       collective  a rank while it waits inside a collective: the script freezes its peer
                   (SIGSTOP) for longer than a step, so that the rank blocks in the step's
                   collective, kills it there, then lets the peer go on (to find it dead).
The launcher restarts the job after each kill; each attempt must resume from the last complete
checkpoint (its "resumed from" line), and the final weights (--save-weights) must equal the
reference's bit for bit. It prints a table per mode (kills, restarts, the time from each kill to
the next attempt's resume, the time lost per kill) and ends with the line
  chaos: N kills, weights identical        (exit 0)   or   chaos: N kills, weights differ (exit 1)

  scripts/chaos.py --build build [--modes ddp,zero1,zero2,uneven] [--kills 6] [--seed 1] ...
scripts/chaos.sh builds and runs it; the CTest `chaos` runs it at a small size.
"""
import argparse
import ctypes
import os
import random
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

MODES = {
    "ddp": [],
    "zero1": ["--zero", "1"],
    "zero2": ["--zero", "2"],
    "uneven": ["--uneven"],
}


class Inotify:
    """File creations in a folder and in the folders created inside it (gen-G of a sharded
    checkpoint), through the kernel's inotify (ctypes; no package needed)."""
    IN_CREATE, IN_MOVED_TO, IN_ISDIR = 0x100, 0x80, 0x40000000

    def __init__(self, root):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.dirs = {}
        self.watch(root)

    def watch(self, path):
        wd = self.libc.inotify_add_watch(self.fd, path.encode(), self.IN_CREATE | self.IN_MOVED_TO)
        if wd >= 0:
            self.dirs[wd] = path
            for name in os.listdir(path):  # what was created before the watch
                if os.path.isdir(os.path.join(path, name)):
                    self.watch(os.path.join(path, name))

    def created(self, timeout):
        """Paths of files created within `timeout` seconds (new folders are watched too)."""
        out = []
        if not select.select([self.fd], [], [], timeout)[0]:
            return out
        data = os.read(self.fd, 1 << 16)
        i = 0
        while i + 16 <= len(data):
            wd, mask, _, length = struct.unpack_from("iIII", data, i)
            name = data[i + 16:i + 16 + length].split(b"\0", 1)[0].decode()
            i += 16 + length
            path = os.path.join(self.dirs.get(wd, ""), name)
            if mask & self.IN_ISDIR:
                self.watch(path)
            else:
                out.append(path)
        return out


def proc_env(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            pairs = [kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv]
        return {k.decode(): v.decode(errors="replace") for k, v in pairs}
    except OSError:
        return None


def workers(marker):
    """{(attempt, rank): pid} of the ranks whose command line holds `marker`."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if not argv[0].endswith(b"train_fashion_mnist") or marker.encode() not in argv:
            continue
        env = proc_env(name)
        if env and "RANK" in env:
            out[(int(env.get("TORCHELASTIC_RESTART_COUNT", "0")), int(env["RANK"]))] = int(name)
    return out


class Job:
    """One `lockstep run` of the main job, its output read line by line with timestamps."""

    def __init__(self, argv, env):
        self.start = time.monotonic()
        self.lines = []
        self.cv = threading.Condition()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cv:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.cv.notify_all()
        with self.cv:
            self.cv.notify_all()

    def count(self, text):
        with self.cv:
            return sum(text in line for _, line in self.lines)

    def wait_for(self, text, n, timeout):
        """Time of the n-th line holding `text` (from 1), or None at exit or timeout."""
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                hits = [t for t, line in self.lines if text in line]
                if len(hits) >= n:
                    return hits[n - 1]
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.reader.is_alive()):
                    return None
                self.cv.wait(min(left, 0.2))

    def finish(self, timeout):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.reader.join(5)
        return self.proc.returncode

    def text(self):
        with self.cv:
            return "\n".join(line for _, line in self.lines)


def kill(pid, sig):
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


class Chaos:
    def __init__(self, job, marker, ckpt_dir, world, rng, watcher):
        self.job, self.marker, self.ckpt_dir, self.world, self.rng = job, marker, ckpt_dir, world, rng
        self.watcher = watcher

    def ranks_of(self, attempt, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = {r: p for (a, r), p in workers(self.marker).items() if a == attempt}
            if len(found) == self.world:
                return found
            if self.job.proc.poll() is not None:
                return None
            time.sleep(0.02)
        return None

    def wait_for_checkpoint(self, timeout=60):
        """Whether a complete checkpoint is there (so that the next attempt must resume)."""
        paths = [os.path.join(self.ckpt_dir, "fashion_mnist.ckpt"),
                 os.path.join(self.ckpt_dir, "fashion_mnist.sharded", "index")]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.job.proc.poll() is None:
            if any(os.path.exists(p) for p in paths):
                return True
            time.sleep(0.01)
        return False

    def random_kill(self, ranks):
        time.sleep(self.rng.uniform(0.2, 1.2))
        rank = self.rng.randrange(self.world)
        return kill(ranks[rank], signal.SIGKILL) and f"rank {rank} at a random moment"

    def checkpoint_kill(self, ranks, timeout=30):
        self.watcher.created(0)  # drop what came before
        pids = {p: r for r, p in ranks.items()}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.job.proc.poll() is None:
            for path in self.watcher.created(0.2):
                name = os.path.basename(path)
                if ".tmp." not in name:
                    continue
                pid = int(name.rsplit(".tmp.", 1)[1])
                if pid not in pids or not kill(pid, signal.SIGSTOP):
                    continue
                if os.path.exists(path):  # frozen before its rename: mid-write
                    kill(pid, signal.SIGKILL)
                    kill(pid, signal.SIGCONT)
                    what = os.path.relpath(path, self.ckpt_dir)
                    return f"rank {pids[pid]} while it wrote {what}"
                kill(pid, signal.SIGCONT)
        return None

    def collective_kill(self, ranks):
        time.sleep(self.rng.uniform(0.2, 0.8))
        peer = self.rng.randrange(self.world)
        victim = (peer + 1 + self.rng.randrange(self.world - 1)) % self.world
        if not kill(ranks[peer], signal.SIGSTOP):
            return None
        time.sleep(0.4)  # several steps: the victim now waits in a collective for the peer
        done = kill(ranks[victim], signal.SIGKILL)
        kill(ranks[peer], signal.SIGCONT)
        return done and f"rank {victim} inside a collective (its peer rank {peer} frozen 0.4 s)"


def train_argv(args, mode, ckpt_dir, weights, chaos):
    launcher = [os.path.join(args.build, "lockstep"), "run", "--standalone",
                "--nproc-per-node", str(args.world)]
    if chaos:
        launcher += ["--max-restarts", str(args.kills + 2)]
    train = [os.path.join(args.build, "train_fashion_mnist"), "--subset", str(args.subset),
             "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
             "--seed", str(args.seed), "--checkpoint-every", str(args.checkpoint_every),
             "--checkpoint-dir", ckpt_dir, "--save-weights", weights, "--resume"] + MODES[mode]
    return launcher + ["--"] + train


def summaries(text):
    return [line.split("]: ", 1)[1].split(", test accuracy")[0] + ", " +
            line.split(", test accuracy ")[1].split(",")[0]
            for line in text.splitlines() if "]: epoch " in line and "train loss" in line]


def run_mode(args, mode, work, env, rng):
    ref_dir, chaos_dir = os.path.join(work, mode, "ref"), os.path.join(work, mode, "chaos")
    for d in (ref_dir, chaos_dir):
        os.makedirs(d)
    ref_w, chaos_w = os.path.join(work, mode, "ref.weights"), os.path.join(work, mode, "chaos.weights")
    ref = Job(train_argv(args, mode, ref_dir, ref_w, False), env)
    code = ref.finish(args.timeout)
    ref_s = time.monotonic() - ref.start
    if code != 0:
        sys.exit(f"chaos: {mode}: the uninterrupted run failed (exit {code}):\n{ref.text()}")

    plan = ["checkpoint", "collective"] + ["random"] * max(0, args.kills - 2)
    rng.shuffle(plan)
    watcher = Inotify(chaos_dir)
    job = Job(train_argv(args, mode, chaos_dir, chaos_w, True), env)
    chaos = Chaos(job, chaos_dir, chaos_dir, args.world, rng, watcher)
    kills = []  # (kind, what, seconds from the kill to the next attempt's resume)
    for attempt, kind in enumerate(plan):
        ranks = chaos.ranks_of(attempt)
        if (ranks is None or job.wait_for("training on", attempt + 1, args.timeout) is None
                or not chaos.wait_for_checkpoint()):
            break
        what = getattr(chaos, f"{kind}_kill")(ranks)
        if not what:
            print(f"  {mode}: attempt {attempt}: no {kind} kill happened", flush=True)
            break
        killed_at = time.monotonic()
        resumed = job.wait_for("resumed from", attempt + 1, args.timeout)
        kills.append((kind, what, None if resumed is None else resumed - killed_at))
        print(f"  {mode}: kill {len(kills)}: {kind}: {what}", flush=True)
    code = job.finish(args.timeout)
    chaos_s = time.monotonic() - job.start
    text = job.text()
    with open(os.path.join(work, mode, "chaos.log"), "w") as f:
        f.write(text + "\n")
    problems = []
    if code != 0:
        problems.append(f"the chaos run failed (exit {code})")
    if len(kills) < len(plan):
        problems.append(f"{len(kills)} of {len(plan)} planned kills happened")
    resumes = [line for line in text.splitlines() if "resumed from" in line]
    if any(k[2] is None for k in kills) or len(resumes) < len(kills):
        problems.append(f"{len(resumes)} of {len(kills)} restarts resumed from a checkpoint")
    if "no checkpoint at" in text.split("training on", 1)[-1]:
        problems.append("an attempt after a kill found no checkpoint")
    same = (os.path.exists(chaos_w) and open(ref_w, "rb").read() == open(chaos_w, "rb").read())
    if summaries(text)[-1:] != summaries(ref.text())[-1:]:
        problems.append(f"the last epoch's summary differs: {summaries(text)[-1:]} vs "
                        f"{summaries(ref.text())[-1:]}")
    latencies = [k[2] for k in kills if k[2] is not None]
    return {
        "mode": mode, "kills": kills,
        "ref_s": ref_s, "chaos_s": chaos_s, "latencies": latencies, "same": same,
        "problems": problems, "resumes": resumes, "log": text,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", required=True, help="the build folder (lockstep, train_fashion_mnist)")
    p.add_argument("--modes", default="ddp,zero1,zero2,uneven")
    p.add_argument("--kills", type=int, default=6, help="kills per mode (at least 2)")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--subset", type=int, default=4000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=1, help="of the training and of the kill plan")
    p.add_argument("--timeout", type=float, default=240, help="seconds per run")
    p.add_argument("--work", help="keep the runs here (default: a temporary folder, removed)")
    args = p.parse_args()
    if args.kills < 2 or args.world < 2:
        p.error("--kills and --world must be at least 2")
    modes = args.modes.split(",")
    for m in modes:
        if m not in MODES:
            p.error(f"--modes: '{m}' is not one of {', '.join(MODES)}")
    data = "/usr/share/datasets/fashion-mnist"  # train_fashion_mnist's default --data-dir
    if not os.path.exists(os.path.join(data, "train-images-idx3-ubyte.gz")):
        print(f"chaos: skipped: no Fashion-MNIST in {data} (apt-get install dataset-fashion-mnist)")
        return 77
    work = args.work or tempfile.mkdtemp(prefix="lockstep-chaos-")
    env = dict(os.environ, OMP_NUM_THREADS="1", LOCKSTEP_TIMEOUT=os.environ.get("LOCKSTEP_TIMEOUT", "60"))
    rng = random.Random(args.seed)
    results = []
    try:
        for mode in modes:
            print(f"chaos: {mode}: {args.kills} kills, {args.world} ranks, {args.subset} samples, "
                  f"{args.epochs} epochs, a checkpoint every {args.checkpoint_every} steps", flush=True)
            results.append(run_mode(args, mode, work, env, rng))
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"{'mode':<8} {'kills':>5} {'ckpt':>4} {'coll':>4} {'rand':>4} {'resumed':>7} "
          f"{'kill->resume s (median, min-max)':>32} {'lost per kill s':>15}  weights")
    total = 0
    ok = True
    for r in results:
        kinds = [k[0] for k in r["kills"]]
        lat = r["latencies"]
        lat_text = (f"{statistics.median(lat):.2f} ({min(lat):.2f}-{max(lat):.2f})" if lat else "-")
        lost = (r["chaos_s"] - r["ref_s"]) / max(1, len(kinds))
        print(f"{r['mode']:<8} {len(kinds):>5} {kinds.count('checkpoint'):>4} "
              f"{kinds.count('collective'):>4} {kinds.count('random'):>4} {len(r['resumes']):>7} "
              f"{lat_text:>32} {lost:>15.2f}  {'identical' if r['same'] else 'DIFFER'}")
        total += len(kinds)
        for problem in r["problems"]:
            print(f"  {r['mode']}: {problem}")
        if r["problems"] or not r["same"]:
            ok = False
            print("\n".join(r["log"].splitlines()[-40:]))
    print(f"chaos: {total} kills, weights {'identical' if ok else 'differ'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

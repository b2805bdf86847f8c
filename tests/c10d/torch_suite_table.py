"""Tabulates the logs of scripts/torch_suite.sh: per mode and world size, the tests that passed,
were skipped, failed or errored, and every test that torch's gloo passed and lockstep did not.
    torch_suite_table.py LOG_DIR
"""
import collections
import os
import re
import sys

START = re.compile(r"^(test_\w+) \(__main__\.[\w.]+\) \.\.\. ?(.*)$")  # logs may follow
RESULT = re.compile(r"^(ok|skipped.*|FAIL|ERROR)$")


def outcomes(path):
    results, pending = {}, None
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        m = START.match(line)
        if m:
            pending = m.group(1)
            if RESULT.match(m.group(2)):
                results[pending], pending = m.group(2), None
            continue
        if pending and RESULT.match(line):
            results[pending], pending = line, None
    return {t: ("skipped" if r.startswith("skipped") else r) for t, r in results.items()}


def main():
    folder = sys.argv[1]
    runs, summaries = {}, {}
    for name in sorted(os.listdir(folder)):
        m = re.match(r"(.+)-w(\d+)\.log$", name)
        if m:
            key = (m.group(1), int(m.group(2)))
            runs[key] = outcomes(os.path.join(folder, name))
            text = open(os.path.join(folder, name), errors="replace").read()
            found = re.findall(r"^(Ran \d+ tests? in [0-9.]+s)\n\n(OK.*|FAILED.*)$", text, re.M)
            summaries[key] = "; ".join(found[-1]) if found else "(no summary: the run did not end)"
    print("| backend | world | passed | skipped | failed | errors | unittest's summary |")
    print("|---|---|---|---|---|---|---|")
    for (mode, world), res in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        c = collections.Counter(res.values())
        label = {"real-gloo": "gloo", "gloo": "lockstep (as gloo)", "plugin": "lockstep (plugin)"}
        summary = summaries.get((mode, world), "")
        print(f"| {label.get(mode, mode)} | {world} | {c['ok']} | {c['skipped']} | {c['FAIL']} "
              f"| {c['ERROR']} | {summary} |")
    for world in sorted({w for _, w in runs}):
        base = runs.get(("real-gloo", world))
        ours = runs.get(("gloo", world))
        if not base or not ours:
            continue
        worse = sorted(t for t, r in base.items() if r == "ok" and ours.get(t) in ("FAIL", "ERROR", None))
        print(f"\nworld {world}: {len(worse)} test(s) gloo passes and lockstep does not")
        for t in worse:
            print(f"  {t}: {ours.get(t, 'not run')}")
        better = sorted(t for t, r in ours.items() if r == "ok" and base.get(t) in ("FAIL", "ERROR"))
        if better:
            print(f"world {world}: {len(better)} test(s) lockstep passes and gloo does not: {', '.join(better)}")


if __name__ == "__main__":
    main()

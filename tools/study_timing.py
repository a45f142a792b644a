#!/usr/bin/env python3
"""Wall times of one small study on the local process pool, a local dask
cluster of 1 and of 2 workers, and the result cache (fresh, then hit): the
figures of docs/usage.md, "Measured". Every run is a fresh `vmsim` process
(cluster start-up included); the JSON of each is checked equal to the
first's apart from the provenance fields docs/usage.md lists.

    python tools/study_timing.py [--points 12] [--size-mib 16] [--repeat 1]
    python tools/study_timing.py --speedup   # make bench's study rows

With --speedup only the same sweep on 1 and on 2 workers runs (the
process pool, then a local dask cluster), each line with its speed-up
over one worker; `make bench` prints these rows after its simulator table.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

VOLATILE = ("host_seconds", "host_threads", "cached")

BASE = """\
machine = "xeon-e5-2699v3-2s"
seed = 0

[kernel]
thp = "always"
clear_huge_page = "target-last"

[workload]
kind = "usemem"
nr_task = 2
size_per_task_mib = {size}
"""


def stripped(path):
    doc = json.load(open(path))
    for r in [doc] + list(doc.get("runs", [])):
        for k in VOLATILE:
            r.get("provenance", {}).pop(k, None)
    return json.dumps(doc, sort_keys=True)


def timed(args, env):
    """Wall seconds, CPU seconds of the process and its descendants, and the
    host's 1-minute load average before it started."""
    load = os.getloadavg()[0]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "vmsim", *args, "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
    secs = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return secs, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), load


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=12)
    ap.add_argument("--size-mib", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--speedup", action="store_true",
                    help="only 1 against 2 workers, with the speed-up (make bench)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="vmsim-study-")
    cfg = os.path.join(work, "base.toml")
    with open(cfg, "w") as f:
        f.write(BASE.format(size=a.size_mib))
    env = dict(os.environ, VMSIM_CACHE_DIR=os.path.join(work, "cache"))
    sweep = ["sweep", cfg, "--set", "seed=" + ",".join(str(i) for i in range(a.points))]
    rows = []
    first = None
    if a.speedup:
        return speedup(a, sweep, env, work)
    for label, extra in (("process pool, -j 1", ["-j", "1", "--no-cache"]),
                         ("process pool, -j 2", ["-j", "2", "--no-cache"]),
                         ("dask, --workers 1", ["--workers", "1", "--no-cache"]),
                         ("dask, --workers 2", ["--workers", "2", "--no-cache"])):
        for r in range(a.repeat):
            out = os.path.join(work, f"{len(rows)}.json")
            secs = timed(sweep + extra + ["--json", out], env)
            same = first is None or stripped(out) == stripped(first)
            first = first or out
            rows.append((label, *secs, same))
    for label in ("cache: empty, -j 2", "cache: repeated, -j 2"):
        out = os.path.join(work, f"{len(rows)}.json")
        secs = timed(sweep + ["-j", "2", "--json", out], env)
        rows.append((label, *secs, stripped(out) == stripped(first)))
    print(f"{a.points}-point sweep of usemem, 2 tasks x {a.size_mib} MiB, THP (one vmsim process per line)")
    print(f"  host: {os.cpu_count()} CPUs; load = 1-minute load average before the line started")
    for label, secs, cpu, load, same in rows:
        print(f"  {label:24s} wall {secs:7.2f} s  cpu {cpu:7.2f} s  load {load:4.1f}  JSON equal to the first: {same}")


def speedup(a, sweep, env, work):
    try:
        import distributed  # noqa: F401
        engines = (("process pool", "-j"), ("dask", "--workers"))
    except ImportError:
        engines = (("process pool", "-j"),)
    print(f"study: a {a.points}-point sweep of usemem, 2 tasks x {a.size_mib} MiB, THP; "
          f"host {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    first = None
    for name, flag in engines:
        one = None
        for n in (1, 2):
            out = os.path.join(work, f"{name[0]}{n}.json")
            secs, cpu, load = timed(sweep + [flag, str(n), "--no-cache", "--json", out], env)
            same = first is None or stripped(out) == stripped(first)
            first = first or out
            one = one or secs
            print(f"  {name + ', ' + str(n) + ' worker(s)':26s} wall {secs:7.2f} s  cpu {cpu:7.2f} s  "
                  f"speed-up {one / secs:4.2f}x  JSON equal: {same}")


if __name__ == "__main__":
    main()

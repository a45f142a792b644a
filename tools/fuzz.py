#!/usr/bin/env python3
"""Seeded fuzzing of vmsim's inputs: run configs (dicts, TOML and JSON text and
files), machine presets, experiment files, sweep grids, ``compare(set=...)``
and command lines, each a small valid input with a few of its values replaced
by generated ones (extreme numbers, NaN, wrong types, long strings, deep
nesting), keys removed or added, or its text broken.

The oracle (docs/config.md): every input either

- is refused with a typed error (``vmsim.ConfigError`` with a ``key`` that is
  a key of the input, or of the mutated preset, or the document's own
  "config" / "machine"), on one line; on the command line: exit 2 and one
  ``vmsim: error: ...`` line; or
- is accepted, and when cheap enough to simulate (a few MiB) runs with its
  data verified (``DataVerificationError`` exactly when a fault is injected).

Three more families run what they generate, and stop what runs on:

- ``program``: generated programs (mappings, accesses of every pattern at
  and beyond their limits, sleeps, nested and empty loops, counts up to
  10^12). Refused with a one-line error keyed to the program, or run with
  its data verified; a run still going after its time is stopped, by a
  SIGINT to the main thread or by its progress callback raising,
  and must stop within a second of it.
- ``policy``: a usemem run with a generated Python clear policy (good
  plans, bad plans, exceptions, endless iterators, sleeps and spins).
  Verified data, a ``PolicyError`` naming its key and policy, or (a stuck
  policy) stopped by a SIGINT within a second.
- ``trace``: a generated trace replayed with the result cache on while it
  is cut short, grown or rewritten under the replay. Refused naming the
  file ("changed while it was replayed"), or finished first; either way no
  result is left in the cache under the key of content that did not run.

Anything else is a failure: another exception or traceback, a multi-line or
unkeyed error, a key the input does not have, lost data without an injected
fault, a run past its time limit (a hang), a run that did not stop within a
second of being told to. ``make fuzz N=100000`` runs it; ``make test`` runs a
short seeded pass (tests/python/test_fuzz.py).

    python tools/fuzz.py -n 100000 --seed 0 [--json report.json]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import math
import os
import random
import re
import sys
import tempfile
import threading
import time
import signal
import traceback
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

import vmsim
from vmsim import _api, _config, _core, cache, cli

MACHINES = sorted(vmsim.machines())
PRESET_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "machines")

# Small valid configs of each workload kind (each simulates in well under a second).
M = "xeon-e5-2699v3-2s"
BASES: List[Dict[str, Any]] = [
    {"machine": M, "seed": 0, "kernel": {"thp": "always", "clear_huge_page": "target-last"},
     "workload": {"kind": "usemem", "nr_task": 2, "size_per_task_mib": 4}},
    {"machine": M, "kernel": {"thp": "always", "thp_cow": "copy"},
     "workload": {"kind": "usemem", "nr_task": 2, "size_per_task_mib": 4, "prealloc": True, "prefault": True}},
    {"machine": M, "workload": {"kind": "pf-test", "size_mib": 4, "page_size": "2m"}},
    {"machine": M, "workload": {"kind": "lru-file-mmap-read", "nr_task": 1, "ram_mib": 16, "file_ram_ratio": 1}},
    {"machine": M, "workload": {"kind": "pmbench", "mapsize_mib": 4, "duration_s": 0.001, "node_memory_mib": 16}},
]

# Keys the mutations aim at: the documented ones (docs/config.md) and a few that are not.
KEYS = [
    "machine", "seed", "kernel.thp", "kernel.clear_huge_page", "kernel.clear_page", "kernel.preempt",
    "kernel.thp_cow", "kernel.page_alloc_shuffle", "kernel.copy_huge_page", "kernel.tlb_flush_on_unmap",
    "kernel.numa_balancing", "kernel.numa_hint_fault", "kernel.migrate_tlb_flush", "kernel.hz", "kernel.skew_tick", "kernel.struct_pages",
    "kernel.numa_balancing_scan_delay_ms", "kernel.numa_balancing_scan_size_mb",
    "workload.kind", "workload.nr_task", "workload.size_per_task_mib", "workload.prealloc", "workload.prefault",
    "workload.child_start_skew_us", "workload.warmup", "workload.clock", "workload.size_mib", "workload.page_size", "workload.cpu",
    "workload.ram_mib", "workload.file_ram_ratio", "workload.nr_processes", "workload.nr_threads",
    "workload.mapsize_mib", "workload.setsize_mib", "workload.pattern", "workload.stdev_fraction",
    "workload.stride_pages", "workload.read_ratio", "workload.duration_s", "workload.cold", "workload.bind_node",
    "workload.node_memory_mib", "workload.eater_mib", "workload.eater_node", "workload.eater_exit_s",
    "sim.quantum_cycles", "sim.node_memory_mib", "sim.window_cycles", "sim.fault_injection.skip_clear_subpage",
    "sim.fault_injection.skip_copy_subpage", "kernel", "workload", "sim", "sim.fault_injection",
    "bogus", "kernel.bogus", "workload.bogus", "sim.fault_injection.bogus",
]

GOOD = {
    "kernel.thp": ["always", "never"], "kernel.clear_huge_page": ["sequential", "target-last", "multipage-2023"],
    "kernel.thp_cow": ["copy", "split"], "workload.page_size": ["2m", "1g"], "workload.pattern": ["normal", "linear"],
    "machine": MACHINES, "workload.kind": ["usemem", "pf-test", "pmbench", "lru-file-mmap-read"],
    "sim.window_cycles": ["auto", 0, 100], "kernel.hz": [100, 250, 1000],
}


def _deep(depth: int, leaf: Any = 1, as_list: bool = False) -> Any:
    for _ in range(depth):
        leaf = [leaf] if as_list else {"a": leaf}
    return leaf


def value(rng: random.Random, key: str = "") -> Any:
    """A generated value: extreme, of the wrong type, or a good one for ``key``."""
    r = rng.random()
    if r < 0.3 and key in GOOD:
        return rng.choice(GOOD[key])
    if r < 0.45:  # plausible: many of these are accepted, and then run
        return rng.choice([1, 2, 3, 4, 8, 16, 0.5, 1.0, 2.0, True, False])
    pools = [
        [0, 1, 2, 3, 7, -1, 63, 64, 511, 512, 4095, 4096, 65536, 262143, 262144, 2**31, 2**32, 2**53 + 1,
         2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), 10**30],
        [0.0, -0.0, 0.5, 1.5, 50.5, 1e-300, 5e-324, 1e300, 1e15, math.nan, math.inf, -math.inf, -2.5],
        [True, False, None],
        ["", "x", "always", "auto", "1g", "2m", "k" * rng.choice([61, 5000]), "é\u0007\n", "../../etc/passwd"],
        [[], [1], [1, 2], {}, {"a": 1}, {"value": 1}],
        [_deep(rng.choice([2, 33, 129, 1000])), _deep(rng.choice([2, 33, 1000]), as_list=True)],
    ]
    weights = [5, 3, 2, 2, 2, 1]
    return rng.choice(rng.choices(pools, weights)[0])


def set_dotted(cfg: Dict[str, Any], key: str, v: Any) -> None:
    parts = key.split(".")
    node = cfg
    for p in parts[:-1]:
        if not isinstance(node.get(p), dict):
            node[p] = {}
        node = node[p]
    node[parts[-1]] = v


def del_dotted(cfg: Dict[str, Any], key: str) -> None:
    parts = key.split(".")
    node = cfg
    for p in parts[:-1]:
        node = node.get(p)
        if not isinstance(node, dict):
            return
    node.pop(parts[-1], None)


def mutate(rng: random.Random, cfg: Dict[str, Any]) -> List[str]:
    """Changes 1 to 4 leaves of ``cfg`` in place; returns the keys touched."""
    touched = []
    for _ in range(rng.choice([0, 1, 1, 1, 2, 2, 3, 4])):
        key = rng.choice(KEYS)
        op = rng.random()
        if op < 0.75:
            set_dotted(cfg, key, value(rng, key))
        elif op < 0.9:
            del_dotted(cfg, key)
        else:
            key = f"{key}.{rng.choice(['x', 'k' * 5000, 'value'])}"
            set_dotted(cfg, key, value(rng))
        touched.append(key)
    return touched


# ---- text forms -------------------------------------------------------------

def toml_value(v: Any) -> Optional[str]:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        items = [toml_value(x) for x in v]
        return "[" + ", ".join(x for x in items if x is not None) + "]"
    if isinstance(v, dict):
        items = [(k, toml_value(x)) for k, x in v.items()]
        return "{" + ", ".join(f"{json.dumps(k)} = {x}" for k, x in items if x is not None) + "}"
    return None  # null: TOML has none, the key is left out


def to_toml(cfg: Dict[str, Any]) -> str:
    lines = []
    for k, v in cfg.items():
        if not isinstance(v, dict):
            t = toml_value(v)
            if t is not None:
                lines.append(f"{json.dumps(k)} = {t}")
    for k, v in cfg.items():
        if isinstance(v, dict):
            lines.append(f"[{json.dumps(k)}]")
            for k2, v2 in v.items():
                t = toml_value(v2)
                if t is not None:
                    lines.append(f"{json.dumps(k2)} = {t}")
    return "\n".join(lines) + "\n"


def break_text(rng: random.Random, text: str) -> str:
    """A text edit that may leave the document unparsable."""
    if not text:
        return "="
    i = rng.randrange(len(text))
    op = rng.random()
    if op < 0.3:
        return text[:i]
    if op < 0.6:
        return text[:i] + rng.choice(["=", "[", "]", "{", "\"", "\n", "99999999999999999999", "\x00", "é"]) + text[i:]
    if op < 0.8:
        return text[:i] + text[i + rng.randint(1, 10):]
    return text + "\n" + rng.choice(["[[[", "x = [" * 300, "seed = 1", "[kernel]\nthp = 'never'"]) + "\n"


# ---- the oracle -------------------------------------------------------------

class Failure(Exception):
    """An input the oracle does not accept: what happened."""


def dotted_keys(doc: Any, prefix: str = "", out: Optional[set] = None, depth: int = 0) -> set:
    out = set() if out is None else out
    if isinstance(doc, dict) and depth < 40:
        for k, v in doc.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            out.add(key)
            dotted_keys(v, key, out, depth + 1)
    elif isinstance(doc, list) and depth < 40:
        for i, v in enumerate(doc):
            dotted_keys(v, f"{prefix}[{i}]", out, depth + 1)
    return out


def keys_in_text(text: str) -> set:
    """The dotted keys a (possibly broken) TOML text sets on its ``key = ``
    lines, under their ``[table]`` headers: what an error about it may name."""
    out, table = set(), ""
    for line in text.splitlines():
        t = line.strip()
        if t.startswith("["):
            table = t.strip("[]").strip().replace('"', "")
            out.add(table)
        elif "=" in t:
            key = t.split("=", 1)[0].strip().replace('"', "")
            out.add(f"{table}.{key}" if table else key)
    return out


def _norm(key: str) -> str:
    key = re.sub(r"\[\d+\].*$", "", key)  # a list item: its list's key
    return key[:-len(".value")] if key.endswith(".value") else key


def check_error(e: BaseException, known: set, touched: List[str], extra: Tuple[str, ...] = (),
                text: str = "") -> str:
    """The outcome of a refusal: "refused" when it is a one-line ConfigError
    keyed by a key of the input; raises Failure otherwise."""
    if not isinstance(e, vmsim.ConfigError):
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        at = f" at {os.path.basename(where.filename)}:{where.lineno}" if where else ""
        raise Failure(f"untyped {type(e).__name__}{at}: {str(e)[:300]}")
    key, message = getattr(e, "key", None), getattr(e, "message", None)
    if not key or message is None:
        raise Failure(f"ConfigError without a key: {str(e)[:300]}")
    if "\n" in str(e) or len(str(e)) > 4000:
        raise Failure(f"error not one readable line ({len(str(e))} characters): {str(e)[:300]}")
    k = _norm(key)
    if "…" in k:  # a cut key: its head must be one of the input's
        head = k.split("…", 1)[0]
        if any(x.startswith(head) for x in known | set(touched)):
            return "refused"
    ok = {"config", "machine", "seed", "scale", "threads", "set", *extra}
    if k in ok or k in known or any(k == t or t.startswith(k + ".") or k.startswith(t + ".") for t in touched):
        return "refused"
    if any(k.startswith(x + ".") for x in known):
        return "refused"  # a key inside one the input gives (a preset's leaf)
    if text and all(part in text for part in k.split(".")):
        return "refused"  # a broken text's key, as its (odd) text wrote it

    raise Failure(f"error keyed {key!r}, not a key of the input: {str(e)[:300]}")


def cheap(cfg: Any) -> bool:
    """Whether the config simulates in well under a second."""
    if not isinstance(cfg, dict):
        return False
    w, s, k = cfg.get("workload"), cfg.get("sim") or {}, cfg.get("kernel") or {}
    if not isinstance(w, dict) or not isinstance(s, dict) or not isinstance(k, dict):
        return False
    num = lambda x, d: x if isinstance(x, (int, float)) and not isinstance(x, bool) else d  # noqa: E731
    if num(s.get("quantum_cycles"), 50) < 50 or num(s.get("node_memory_mib"), 0) > 256 or k.get("numa_balancing"):
        return False
    kind = w.get("kind")
    if kind == "usemem":
        return num(w.get("nr_task"), 99) * num(w.get("size_per_task_mib"), 99) <= 32 and num(w.get("nr_task"), 99) <= 64 \
            and num(w.get("child_start_skew_us"), 0) <= 1000
    if kind == "pf-test":
        return num(w.get("size_mib"), 99) <= 16 and w.get("page_size", "2m") == "2m"
    if kind == "lru-file-mmap-read":
        return num(w.get("ram_mib"), 99) * num(w.get("file_ram_ratio"), 10) <= 32 and num(w.get("nr_task"), 99) <= 8
    if kind == "pmbench":
        return (num(w.get("duration_s"), 1) <= 0.005 and num(w.get("mapsize_mib"), 99) <= 16
                and num(w.get("node_memory_mib"), 99) <= 64 and not w.get("eater_mib")
                and num(w.get("nr_processes"), 1) * num(w.get("nr_threads"), 1) <= 8)
    return False


def _as_list(v: Any) -> list:
    return list(v) if isinstance(v, list) else []


def injected(cfg: Any) -> bool:
    return isinstance(cfg, dict) and isinstance(cfg.get("sim"), dict) and bool(cfg["sim"].get("fault_injection"))


def run_checked(cfg: Any, base_dir: Optional[str], limit: float) -> str:
    """Simulates an accepted config; "ok" when its data is verified."""
    deadline = time.monotonic() + limit

    def progress(label: str, fraction: float) -> None:
        if time.monotonic() > deadline:
            raise Hang()

    try:
        r = vmsim.run(cfg, base_dir=base_dir, progress=progress, threads=1)
    except vmsim.DataVerificationError:
        if injected(cfg):
            return "data_lost_as_injected"
        raise Failure("data lost without an injected fault")
    except Hang:
        raise Failure(f"run past {limit} s")
    if injected(cfg):
        raise Failure("an injected fault went unnoticed (data verified)")
    if r["metrics"].get("data_verified") is not True:
        raise Failure("data_verified is not true")
    return "ok_verified"


class Hang(Exception):
    """Raised by a progress callback to stop a run that went on too long."""


#: A run told to stop must have stopped this soon after (seconds).
STOP_WITHIN = 1.0


def run_stoppable(cfg: Any, limit: float, how: str, expect_policy_error: bool = False) -> str:
    """Runs ``cfg`` (an accepted config); one still going after ``limit``
    seconds is stopped by ``how`` ("signal": a SIGINT to this thread;
    "callback": its progress callback raises) and must stop within
    ``STOP_WITHIN``. The outcome: "ok_verified", "refused_at_run" (a
    one-line typed error), or "stopped_by_signal" / "stopped_by_callback"."""
    lock = threading.Lock()
    state: Dict[str, Any] = {"done": False, "told": None}
    main = threading.main_thread().ident
    deadline = time.monotonic() + limit

    def tell() -> None:
        with lock:
            if not state["done"]:
                state["told"] = time.monotonic()
                # A real SIGINT to the main thread, as Ctrl-C sends: it also
                # ends a blocking call there (a policy's sleep).
                signal.pthread_kill(main, signal.SIGINT)

    def progress(label: str, fraction: float) -> None:
        if how == "callback" and time.monotonic() > deadline:
            state["told"] = state["told"] or time.monotonic()
            raise Hang()

    timer = threading.Timer(limit, tell) if how == "signal" else None
    try:
        try:
            if timer:
                timer.start()
            r = vmsim.run(cfg, progress=progress, threads=1)
            with lock:
                state["done"] = True
        except (Hang, KeyboardInterrupt):
            with lock:
                state["done"] = True
            took = time.monotonic() - (state["told"] or time.monotonic())
            if took > STOP_WITHIN:
                raise Failure(f"stopped {took:.2f} s after the {how}, not within {STOP_WITHIN} s")
            return f"stopped_by_{how}"
    except vmsim.PolicyError as e:
        # The message may carry the policy's own traceback (the CLI prints
        # it on one line); the key and the policy must be named.
        if not e.key or not getattr(e, "policy", None):
            raise Failure(f"PolicyError without its key or policy: {str(e)[:300]}")
        return "policy_error"
    except vmsim.DataVerificationError:
        raise Failure("data lost without an injected fault")
    except vmsim.VmsimError as e:
        if "\n" in str(e):
            raise Failure(f"error not one line at run time: {str(e)[:300]}")
        return "refused_at_run"
    finally:
        if timer:
            timer.cancel()
            timer.join()
    if expect_policy_error:
        raise Failure("a policy that breaks the rules ran to the end")
    if r["metrics"].get("data_verified") is not True:
        raise Failure("data_verified is not true")
    return "ok_verified"


def pick(rng: random.Random, good: List[Any], bad: List[Any], p_bad: float = 0.04) -> Any:
    """A good value, or now and then one that must be refused."""
    return rng.choice(bad if rng.random() < p_bad else good)


def program_steps(rng: random.Random, maps: List[str], depth: int = 0) -> List[Dict[str, Any]]:
    """Steps of a generated program: mostly valid, with counts, spreads and
    durations from the ordinary to the absurd."""
    steps: List[Dict[str, Any]] = []
    inner: List[str] = []  # mapped inside a loop: unmapped at its end
    for _ in range(rng.randint(0 if depth else 1, 4)):
        r = rng.random()
        if r < 0.25 or not maps:
            name = f"m{len(maps)}" if depth == 0 else f"l{depth}_{len(inner)}"
            step: Dict[str, Any] = {"op": "mmap", "map": name,
                                    "size_mib": pick(rng, [1, 2, 4, 0.25, 64, 4096], [0, -1, 1e300])}
            if rng.random() < 0.2:
                step["populate"] = True
            (maps if depth == 0 else inner).append(name)
            steps.append(step)
        elif r < 0.6:
            step = {"op": "access", "map": pick(rng, maps + inner, ["nowhere"], 0.03)}
            pattern = pick(rng, ["sequential", "strided", "uniform", "normal", "zipf"], ["bogus"], 0.03)
            step["pattern"] = pattern
            if pattern == "strided":
                step["stride"] = pick(rng, [8, 64, 4096], [4, 1 << 40])
            elif pattern == "normal":
                step["sigma_pages"] = pick(rng, [0.5, 10, 256, 2560], [1e15, 0, math.nan, 10**7], 0.15)
            elif pattern == "zipf":
                step["zipf_s"] = pick(rng, [0.5, 0.99, 10], [11, 0])
            amount = rng.random()
            if amount < 0.4:
                step["count"] = pick(rng, [1, 1000, 10**5, 10**12], [0, -5])
            elif amount < 0.6:
                step["duration_ms"] = pick(rng, [0.01, 1, 10**6], [0, -1])
            elif amount < 0.8:
                step["passes"] = pick(rng, [1, 2, 10**9], [0])
            step["write_ratio"] = pick(rng, [0, 0.5, 1], [1.5])
            steps.append(step)
        elif r < 0.75:
            steps.append({"op": "sleep", rng.choice(["ns", "us", "ms"]): pick(rng, [1, 1000, 10**6], [0, 3.7e15, -1])})
        elif r < 0.95 and depth < 3:
            step = {"op": "repeat", "steps": program_steps(rng, maps, depth + 1)}
            if rng.random() < 0.7:
                step["count"] = pick(rng, [1, 3, 10**9], [0, -1])
            else:
                step["duration_ms"] = pick(rng, [0.01, 1, 10**6], [0])
            steps.append(step)
        elif depth == 0 and maps:
            name = rng.choice(maps)
            maps.remove(name)
            steps.append({"op": "munmap", "map": name})
    steps += [{"op": "munmap", "map": name} for name in inner]
    return steps


#: Generated clear policies: (source, what the run must do).
POLICIES = {
    "descending": ("def p(ctx):\n    return [Subpage(i) for i in reversed(range(ctx.nr_pages))]\n", "ok"),
    "target-first": ("def p(ctx):\n    rest = [i for i in range(ctx.nr_pages) if i != ctx.target]\n"
                     "    return [Subpage(ctx.target)] + [Subpage(i) for i in rest]\n", "ok"),
    "twice": ("def p(ctx):\n    return [Subpage(0)] + [Subpage(i) for i in range(ctx.nr_pages)]\n", "error"),
    "missing-one": ("def p(ctx):\n    return [Subpage(i) for i in range(1, ctx.nr_pages)]\n", "error"),
    "out-of-range": ("def p(ctx):\n    return [Subpage(i) for i in range(ctx.nr_pages + 1)]\n", "error"),
    "not-a-plan": ("def p(ctx):\n    return RETURN\n", "error"),
    "raises": ("def p(ctx):\n    raise ValueError('no plan')\n", "error"),
    "endless": ("import itertools\ndef p(ctx):\n    return (Subpage(i % ctx.nr_pages) for i in itertools.count())\n",
                "error"),
    "sleeps": ("import time\ndef p(ctx):\n    time.sleep(3600)\n", "stuck"),
    "spins": ("def p(ctx):\n    while True:\n        pass\n", "stuck"),
}


# ---- the input kinds ----------------------------------------------------------

class Fuzz:
    def __init__(self, seed: int, folder: str, run_limit: float, run_every: int, stop_after: float = 0.5):
        self.rng = random.Random(seed)
        self.folder = folder
        self.run_limit = run_limit
        self.run_every = run_every  # simulate one cheap accepted input in this many
        self.accepted = 0
        self.policies = 0
        self.stop_after = stop_after  # seconds a program or policy runs before it is told to stop
        self.presets = {m: open(os.path.join(PRESET_DIR, f"{m}.toml"), encoding="utf-8").read() for m in MACHINES}
        self.schema = {m: dotted_keys(_config.tomllib.loads(t)) for m, t in self.presets.items()}

    def _accepted(self, cfg: Any, base_dir: Optional[str]) -> str:
        self.accepted += 1
        if cheap(cfg) and self.accepted % self.run_every == 0:
            return run_checked(cfg, base_dir, self.run_limit)
        return "accepted"

    def config_input(self) -> Tuple[str, str]:
        rng = self.rng
        cfg = copy.deepcopy(rng.choice(BASES))
        touched = mutate(rng, cfg)
        known = dotted_keys(cfg)
        form = rng.choice(["dict", "toml", "toml-file", "json-file", "toml-broken"])
        try:
            if form == "dict":
                text, fmt, base = _config.load_text(cfg)
                _core.check_config(text, fmt, base)
                return form, self._accepted(cfg, None)
            text = to_toml(cfg)
            if form == "toml-broken":
                text = break_text(rng, text)
            if form == "json-file":
                path = os.path.join(self.folder, "c.json")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(json.dumps(cfg, allow_nan=True))
            elif form == "toml-file":
                path = os.path.join(self.folder, "c.toml")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            else:
                path = None
            if form == "toml-broken":
                known |= keys_in_text(text)
            text, fmt, base = _config.load_text(path or text)
            _core.check_config(text, fmt, base)
            return form, self._accepted(cfg if form != "toml-broken" else None, base)
        except Failure:
            raise
        except Exception as e:  # noqa: BLE001 - the oracle judges it
            return form, check_error(e, known, touched, text=text if form == "toml-broken" else "")

    def preset_input(self) -> Tuple[str, str]:
        rng = self.rng
        name = rng.choice(MACHINES)
        text = self.presets[name]
        lines = text.splitlines()
        leaves = [i for i, l in enumerate(lines) if "= { value = " in l]
        touched = []
        for _ in range(rng.randint(1, 3)):
            i = rng.choice(leaves)
            head, rest = lines[i].split("= { value = ", 1)
            v = toml_value(value(rng)) or "0"
            cut = rest.find(", source")
            lines[i] = f"{head}= {{ value = {v}{rest[cut:] if cut >= 0 else ' }'}"
            touched.append(head.strip())
        text = "\n".join(lines) + "\n"
        broken = rng.random() < 0.1
        if broken:
            text = break_text(rng, text)
        path = os.path.join(self.folder, "m.toml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        cfg = copy.deepcopy(BASES[0])
        cfg["machine"] = path
        try:
            doc = _config.tomllib.loads(text)
        except Exception:  # noqa: BLE001 - a broken preset: only "machine" can be named
            doc = {}
        # A broken text may lose a table or key: the error names it as the
        # schema (the stock preset) has it.
        known = dotted_keys(doc) | keys_in_text(text) | self.schema[name]
        # Sections' keys as the core names them (l1d.fill_buffers).
        touched = [f"{sec}.{k}" for sec, t in doc.items() if isinstance(t, dict) for k in t if k in touched] or touched
        try:
            text, fmt, base = _config.load_text(cfg)
            _core.check_config(text, fmt, base)
            # A preset that grew its caches may be slow to build: only stock sizes run.
            size_keys = ("size_kib", "cores_per_socket", "sockets", "instances_per_socket", "threads_per_core")
            grew = any(k.endswith(size_keys) for k in touched)
            return "preset", "accepted" if grew else self._accepted(cfg, None)
        except Failure:
            raise
        except Exception as e:  # noqa: BLE001
            return "preset", check_error(e, known | {"machine"}, touched, text=text if broken else "")

    def experiment_input(self) -> Tuple[str, str]:
        rng = self.rng
        name = rng.choice(sorted(vmsim.experiments()))
        doc = _config.tomllib.loads(_core.builtin_toml("experiment", name))
        touched: List[str] = []
        for _ in range(rng.randint(1, 3)):
            r = rng.random()
            if r < 0.4:
                sub = doc.setdefault("config", {})
                if isinstance(sub, dict):
                    touched += mutate(rng, sub)
            elif r < 0.6:
                doc["scale"] = value(rng)
                touched.append("scale")
            elif r < 0.8:
                arms = [doc.get("baseline")] + _as_list(doc.get("variants"))
                arm = rng.choice([a for a in arms if isinstance(a, dict)] or [{}])
                key = rng.choice(KEYS)
                if isinstance(arm.setdefault("set", {}), dict):
                    arm["set"][key] = value(rng, key)
                touched += ["set", key]
            else:
                key = rng.choice(["name", "description", "baseline", "variants", "cases", "bogus"])
                doc[key] = value(rng)
                touched.append(key)
        text = to_toml(doc)
        broken = rng.random() < 0.1
        if broken:
            text = break_text(rng, text)
        path = os.path.join(self.folder, "exp.toml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        # Errors about an arm's config name run-config keys: those of [config]
        # and of the arms' and cases' set tables.
        known = dotted_keys(doc) | keys_in_text(text) | {"config", path, "experiment"}
        if isinstance(doc.get("config"), dict):
            known |= dotted_keys(doc["config"])
        for part in [doc.get("baseline")] + _as_list(doc.get("variants")) + _as_list(doc.get("cases")):
            if isinstance(part, dict) and isinstance(part.get("set"), dict):
                for k, v in part["set"].items():
                    known |= {k} | dotted_keys(v, k)
                    known |= {".".join(k.split(".")[:i]) for i in range(1, k.count(".") + 1)}
        if "scale" in touched:
            touched += ["workload", "min_scale"]  # a scale too small or too large is a workload size's error (or below min_scale)
        return "experiment", self._compare(path, known, touched, scale=None, settings=None,
                                           text=text if broken else "")

    def compare_input(self) -> Tuple[str, str]:
        rng = self.rng
        name = rng.choice(sorted(vmsim.experiments()))
        settings: Any = {}
        touched = []
        for _ in range(rng.randint(0, 3)):
            key = rng.choice(KEYS)
            settings[key] = value(rng, key)
            touched.append(f"set.{key}")
        if rng.random() < 0.1:
            settings = value(rng)
        scale = rng.choice([None, 1 / 8192, 0.5, value(rng)])
        seed = rng.choice([0, 1, 2**63 - 1, value(rng)])
        known = set()
        for k, v in (settings if isinstance(settings, dict) else {}).items():
            # Refused by the Python check ("set.KEY") or by the core once set
            # in the arms' config (the run-config key itself).
            known |= {k, f"set.{k}"} | dotted_keys(v, k) | {".".join(k.split(".")[:i]) for i in range(1, k.count(".") + 1)}
        doc = _config.tomllib.loads(_core.builtin_toml("experiment", name))
        known |= dotted_keys(doc.get("config", {}))
        touched.append("workload")  # a scale too small or too large is a workload size's error
        return "compare", self._compare(name, known, touched + ["scale", "seed"], scale=scale, settings=settings,
                                        seed=seed)

    def _compare(self, exp: str, known: set, touched: List[str], scale: Any, settings: Any, seed: Any = 0,
                 text: str = "") -> str:
        class Stop(Exception):
            pass

        def stop(label: str, fraction: float) -> None:
            raise Stop()

        try:
            vmsim.compare(exp, scale=scale, seed=seed, set=settings or None, progress=stop, threads=1, check=False)
            raise Failure("compare ran without calling progress")
        except Stop:
            return "accepted"
        except Failure:
            raise
        except Exception as e:  # noqa: BLE001
            return check_error(e, known, touched, extra=("experiment",), text=text)

    def sweep_input(self) -> Tuple[str, str]:
        rng = self.rng
        cfg = copy.deepcopy(rng.choice(BASES))
        grid: Dict[Any, Any] = {}
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(KEYS)
            grid[key] = rng.choice([[value(rng, key)], [value(rng, key), value(rng, key)], value(rng)])
        try:
            _api.sweep_points(grid, cfg)
            return "sweep", "accepted"
        except Exception as e:  # noqa: BLE001
            return "sweep", check_error(e, dotted_keys(cfg) | set(grid), list(grid), extra=("grid",))

    def cli_input(self) -> Tuple[str, str]:
        rng = self.rng
        cfg = copy.deepcopy(rng.choice(BASES))
        if rng.random() < 0.5:
            mutate(rng, cfg)
        path = os.path.join(self.folder, "cli.toml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(to_toml(cfg))
        odd = lambda: rng.choice(["0", "-1", "99999999999999999999", "nan", "1/0", "", "x", "1e400",  # noqa: E731
                                  "[" * 2000, "k" * 5000, "1"])
        cmd = rng.choice(["run", "sweep", "compare-saved", "compare", "machines", "experiments"])
        if cmd == "run":
            argv = ["run", "-q", path] + rng.choice([[], ["--threads", odd()], ["--json", os.path.join(self.folder, "o.json")]])
        elif cmd == "sweep":
            key = rng.choice(KEYS)
            argv = ["sweep", "-q", path, "--set", f"{key}={odd()}", "-j", rng.choice(["1", odd()])]
            if rng.random() < 0.3:
                argv += ["--set", f"{rng.choice([key, 'seed'])}={odd()}"]
            if cheap(cfg) is False or rng.random() < 0.7:
                argv += ["--metrics", "nope"]  # refused before any point runs
        elif cmd == "compare-saved":
            saved = os.path.join(self.folder, "saved.json")
            with open(saved, "w", encoding="utf-8") as f:
                f.write(break_text(rng, json.dumps({"metrics": {"elapsed_s": 1.0}, "machine": {"name": "m"}})))
            argv = ["compare", saved] + rng.choice([[], ["--min-change", odd()], ["--metrics", odd()]])
        elif cmd == "compare":
            argv = ["compare", "-q", rng.choice(["clear-target-last", "nope", path]),
                    rng.choice(["--seed", "--runs", "-j", "--threads", "--scale", "--set"]), odd(), "--scale", "0"]
        else:
            argv = [cmd, "--show", odd()]
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli.main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
        except Exception as e:  # noqa: BLE001
            raise Failure(f"vmsim {' '.join(a[:40] for a in argv)}: {type(e).__name__} escaped: {str(e)[:200]}")
        text = err.getvalue()
        if "Traceback" in text:
            raise Failure(f"vmsim {' '.join(a[:40] for a in argv)}: traceback")
        if code == 0:
            return "cli", "cli_ok"
        lines = text.splitlines()
        if code in (1, 2) and len(lines) == 1 and lines[0].startswith("vmsim: error: "):
            return "cli", f"cli_exit_{code}"
        raise Failure(f"vmsim {' '.join(a[:40] for a in argv)}: exit {code}, stderr {text[:300]!r}")

    def program_input(self) -> Tuple[str, str]:
        rng = self.rng
        maps: List[str] = []
        tasks = [{"name": f"t{i}", "steps": program_steps(rng, maps)} for i in range(rng.choice([1, 1, 2]))]
        cfg = {"machine": M, "seed": rng.randrange(4), "workload": {"kind": "program", "task": tasks}}
        try:
            text, fmt, base = _config.load_text(cfg)
            _core.check_config(text, fmt, base)
        except Exception as e:  # noqa: BLE001 - the oracle judges it
            return "program", check_error(e, dotted_keys(cfg), [], extra=("workload.task",))
        return "program", run_stoppable(cfg, self.stop_after, rng.choice(["signal", "callback"]))

    def policy_input(self) -> Tuple[str, str]:
        rng = self.rng
        name = rng.choice(sorted(POLICIES))
        source, expect = POLICIES[name]
        source = source.replace("RETURN", repr(rng.choice([None, "x", 3, [None], [-1], {}])))
        # A file of its own each time: a policy is loaded by content, once.
        self.policies += 1
        path = os.path.join(self.folder, f"policy{self.policies}.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write("from vmsim.policy import Subpage\n" + source)
        cfg = {"machine": M, "kernel": {"thp": "always", "clear_huge_page": f"{path}:p"},
               "workload": {"kind": "usemem", "nr_task": rng.choice([1, 2]), "size_per_task_mib": 4}}
        outcome = run_stoppable(cfg, self.stop_after, "signal", expect_policy_error=expect == "error")
        want = {"ok": "ok_verified", "error": "policy_error", "stuck": "stopped_by_signal"}[expect]
        if outcome != want:
            raise Failure(f"policy {name!r}: {outcome}, expected {want}")
        return "policy", f"{name}:{outcome}"

    def trace_input(self) -> Tuple[str, str]:
        rng = self.rng
        lines = "".join(f"I  0040{i % 4096:04x},4\n {rng.choice('LSM')} {0x10000000 + 64 * rng.randrange(1 << 14):08x},8\n"
                        for i in range(rng.choice([100, 5000, 50000])))
        path = os.path.join(self.folder, "t.lackey")
        with open(path, "w", encoding="utf-8") as f:
            f.write(lines)
        how = rng.choice(["cut", "grown", "rewritten"])
        cut = lines.index("\n", len(lines) // 2) + 1
        after = {"cut": lines[:cut], "grown": lines + " L 10000000,8\n",
                 "rewritten": lines.replace(" S ", " L ", 1) if " S " in lines else lines.replace(" L ", " S ", 1)}[how]
        cfg = {"machine": M, "workload": {"kind": "trace", "trace": path}}
        first_key = cache.run_key(json.dumps(cfg), None)
        edited = []

        def edit(label: str, fraction: float) -> None:
            if not edited:
                edited.append(True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(after)

        old_cache = os.environ.get("VMSIM_CACHE")
        os.environ["VMSIM_CACHE"] = "1"
        try:
            try:
                r = vmsim.run(cfg, progress=edit, threads=1)
                outcome = "finished_first"
                if r["metrics"].get("data_verified") is not True:
                    raise Failure("a trace run's data_verified is not true")
            except vmsim.ConfigError as e:
                if e.key != "workload.trace" or "changed while it was replayed" not in str(e) or path not in str(e):
                    raise Failure(f"a trace {how} under its replay: {str(e)[:300]}")
                outcome = "refused_changed"
            if not edited:
                raise Failure("the trace run never called its progress callback")
            now_key = cache.run_key(json.dumps(cfg), None)
            for key in (first_key, now_key):
                if cache.get(key) is not None:
                    raise Failure(f"a trace {how} under its replay left a result in the cache ({outcome})")
        finally:
            if old_cache is None:
                os.environ.pop("VMSIM_CACHE", None)
            else:
                os.environ["VMSIM_CACHE"] = old_cache
        return "trace", f"{how}:{outcome}"

    KINDS = (("config", 40), ("preset", 13), ("experiment", 9), ("compare", 9), ("sweep", 9), ("cli", 9),
             ("program", 6), ("policy", 3), ("trace", 2))

    def pick(self) -> str:
        return self.rng.choices([k for k, _ in self.KINDS], [w for _, w in self.KINDS])[0]


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=1000, help="inputs to generate (default 1000)")
    ap.add_argument("--seed", type=int, default=0, help="generator seed (default 0): the same seed, the same inputs")
    ap.add_argument("--run-every", type=int, default=10,
                    help="simulate one in this many cheap accepted inputs (default 10)")
    ap.add_argument("--run-limit", type=float, default=60.0, help="seconds a simulated input may take (default 60)")
    ap.add_argument("--stop-after", type=float, default=0.5,
                    help="seconds a generated program or policy runs before it is told to stop (default 0.5)")
    ap.add_argument("--json", metavar="OUT", help="write the outcome counts and failures as JSON")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    args = ap.parse_args(argv)
    # Every input simulated runs: a cached result would stand in for the run
    # (for the command lines it starts too).
    os.environ["VMSIM_CACHE"] = "0"
    # The families that stop runs send SIGINT: started in the background
    # (`make fuzz &`), a process inherits SIGINT ignored and would never see it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # The generator and the oracle walk 1000-deep values; vmsim's own limits
    # (nesting refused at 32) are what is tested.
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20000))
    try:
        return _fuzz(args)
    finally:
        sys.setrecursionlimit(old_limit)


def _fuzz(args: argparse.Namespace) -> int:
    counts: Counter = Counter()
    failures: List[Dict[str, Any]] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vmsim-fuzz-") as folder:
        # The trace family turns the cache on: in a folder of its own.
        old_dir = os.environ.get("VMSIM_CACHE_DIR")
        os.environ["VMSIM_CACHE_DIR"] = os.path.join(folder, "cache")
        fz = Fuzz(args.seed, folder, args.run_limit, max(1, args.run_every), args.stop_after)
        for i in range(args.n):
            kind = fz.pick()
            try:
                form, outcome = getattr(fz, f"{kind}_input")()
                counts[f"{form}:{outcome}"] += 1
            except Failure as e:
                counts[f"{kind}:FAILURE"] += 1
                failures.append({"input": i, "kind": kind, "what": str(e)})
            except BaseException as e:  # noqa: BLE001 - a bug of the harness or an escape
                if isinstance(e, KeyboardInterrupt):
                    raise
                counts["harness:FAILURE"] += 1
                failures.append({"input": i, "kind": kind, "what": f"harness {type(e).__name__}: {e}",
                                 "traceback": traceback.format_exc()[-2000:]})
            if not args.quiet and (i + 1) % 1000 == 0:
                print(f"fuzz: {i + 1}/{args.n} inputs, {len(failures)} failure(s), "
                      f"{time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
        if old_dir is None:
            os.environ.pop("VMSIM_CACHE_DIR", None)
        else:
            os.environ["VMSIM_CACHE_DIR"] = old_dir
    report = {"inputs": args.n, "seed": args.seed, "seconds": round(time.monotonic() - t0, 1),
              "counts": dict(sorted(counts.items())), "failures": failures[:200], "nr_failures": len(failures)}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    width = max((len(k) for k in counts), default=0)
    for k, v in sorted(counts.items()):
        print(f"{k.ljust(width)}  {v}")
    print(f"{args.n} inputs (seed {args.seed}) in {report['seconds']} s: {len(failures)} failure(s)")
    for f in failures[:20]:
        print(f"  input {f['input']} ({f.get('kind', '?')}): {f['what']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

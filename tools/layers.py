#!/usr/bin/env python3
"""The module graph of vmsim-core and the layer rule it must keep.

Every `crate::…` and `super::…` path in a source file (in `use` lines and
inline alike; `#[cfg(test)]` modules and doc comments excluded) is an arrow
from that file's module to the module it names. The layers, lowest first:

    leaves (error, interrupt, rng, stats) < machine < policy < kernel < sim < workload
    < config, metrics, validate < experiment, parallel < api

An arrow may point to its own layer or below. Inside one layer no cycle of
files may form (a file's module is its path: kernel/mm.rs is kernel::mm,
kernel/sched/numa.rs is kernel::sched::numa; a `mod.rs` is its folder).
A module and one of its own descendants may not depend on each other both
ways (a "two-way tie": the parent names a child's item, `child::x` or
`self::child::x`, and the child names the parent's, `super::x`): a state
type the parent composes lives in a module below the paths that use it.

    tools/layers.py            prints the upward arrows and the cycles; exit 1 if any
    tools/layers.py --graph    prints every arrow between files
    tools/layers.py --json     the same as JSON (for tests)
    tools/layers.py --ties     prints the two-way ties between a module and its descendants
"""

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "crates", "vmsim-core", "src")

LAYERS = [
    ["error", "interrupt", "rng", "stats"],
    ["machine"],
    ["policy"],
    ["kernel"],
    ["sim"],
    ["workload"],
    ["config", "metrics", "validate"],
    ["experiment", "parallel"],
    ["api"],
]
RANK = {m: i for i, layer in enumerate(LAYERS) for m in layer}


def module_of(path):
    """`kernel/sched/numa.rs` -> ('kernel', 'sched', 'numa'); `lib.rs` -> ()."""
    rel = os.path.relpath(path, SRC)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib"):
        rel = rel[:-1]
    return tuple(rel)


def strip(text):
    """The code of a file without comments, strings and `#[cfg(test)]` modules."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(?:\(crate\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while depth and j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def known_modules():
    mods = set()
    for d, _, files in os.walk(SRC):
        for f in files:
            if f.endswith(".rs"):
                mods.add(module_of(os.path.join(d, f)))
    return mods


def resolve(mods, base, parts):
    """The longest known module that `base + parts` starts with."""
    path = list(base) + parts
    for n in range(len(path), 0, -1):
        if tuple(path[:n]) in mods:
            return tuple(path[:n])
    return None


def expand(tree):
    """`a::{b, c::{d, e}}` -> [[a, b], [a, c, d], [a, c, e]] (paths only)."""
    tree = tree.strip()
    m = re.match(r"^([\w:]*?)(?:::)?\{(.*)\}$", tree, re.S)
    if not m:
        return [[p for p in re.split(r"::", re.sub(r"\s+as\s+\w+$", "", tree)) if p]]
    head = [p for p in m.group(1).split("::") if p]
    body, parts, depth, cur = m.group(2), [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    return [head + sub for p in parts if p.strip() for sub in expand(p)]


def sources():
    """Every source file as (path, its module, its code as `strip` leaves it)."""
    for d, _, files in os.walk(SRC):
        for f in sorted(files):
            if f.endswith(".rs"):
                path = os.path.join(d, f)
                yield path, module_of(path), strip(open(path, encoding="utf-8").read())


def arrows():
    mods = known_modules()
    edges = set()
    for path, me, code in sources():
        # A file's own `mod x;` children are below it in the tree, not arrows.
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", code):
            paths += expand(m.group(1))
        for m in re.finditer(r"\b((?:crate|super)(?:::\w+)+)", code):
            paths.append(m.group(1).split("::"))
        for p in paths:
            if not p:
                continue
            if p[0] == "crate":
                base, rest = (), p[1:]
            elif p[0] == "super":
                # `super` of a `mod.rs` file is its folder's parent.
                base = list(me)
                rest = list(p)
                parent = base[:-1] if not path.endswith("mod.rs") else base[:-1]
                while rest and rest[0] == "super":
                    rest = rest[1:]
                    base = parent
                    parent = base[:-1]
                base = tuple(base)
            elif p[0] == "self":
                continue
            else:
                continue
            to = resolve(mods, base, rest)
            if to is None or to == me or not to or not me:
                continue
            # A module's own descendants (its `mod` children) are not arrows.
            if to[: len(me)] == me:
                continue
            edges.add((me, to))
    return sorted(edges)


def descent_arrows():
    """Arrows from a module to its own descendants, which `arrows` leaves
    out: paths that start with a child's name (`child::x`, `self::child::x`,
    in `use` lines and inline)."""
    mods = known_modules()
    edges = set()
    for _, me, code in sources():
        children = {m[len(me)] for m in mods if len(m) == len(me) + 1 and m[: len(me)] == me}
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", code):
            paths += expand(m.group(1))
        for m in re.finditer(r"(?<![\w:])((?:self::)?\w+(?:::\w+)+)", code):
            paths.append(m.group(1).split("::"))
        for p in paths:
            if p and p[0] == "self":
                p = p[1:]
            if len(p) < 2 or p[0] not in children:
                continue
            to = resolve(mods, me, p)
            if to and to != me and to[: len(me)] == me:
                edges.add((me, to))
    return sorted(edges)


def ties(edges, down):
    """Pairs (ancestor, descendant) with an arrow each way."""
    up = {(a, b) for a, b in edges if a[: len(b)] == b and len(b) < len(a)}
    return sorted((a, b) for a, b in down if (b, a) in up)


def top(m):
    return m[0]


def check(edges):
    upward = [(a, b) for a, b in edges if RANK.get(top(b), 99) > RANK.get(top(a), 99)]
    unknown = sorted({top(m) for e in edges for m in e if top(m) not in RANK})
    # Cycles among files of one layer (Tarjan's strongly connected components).
    graph = {}
    for a, b in edges:
        if RANK.get(top(a)) == RANK.get(top(b)):
            graph.setdefault(a, []).append(b)
            graph.setdefault(b, [])
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(sorted(scc))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return upward, sorted(sccs), unknown


def name(m):
    return "::".join(m)


def main():
    edges = arrows()
    upward, cycles, unknown = check(edges)
    two_way = ties(edges, descent_arrows())
    if "--json" in sys.argv:
        print(json.dumps({
            "edges": [[name(a), name(b)] for a, b in edges],
            "upward": [[name(a), name(b)] for a, b in upward],
            "cycles": [[name(m) for m in c] for c in cycles],
            "ties": [[name(a), name(b)] for a, b in two_way],
            "unknown": unknown,
        }, indent=1))
        return 0
    if "--ties" in sys.argv:
        for a, b in two_way:
            print(f"{name(a)} <-> {name(b)}")
        return 0
    if "--graph" in sys.argv:
        for a, b in edges:
            print(f"{name(a)} -> {name(b)}")
        return 0
    for a, b in upward:
        print(f"upward: {name(a)} -> {name(b)}")
    for c in cycles:
        print("cycle: " + " <-> ".join(name(m) for m in c))
    for u in unknown:
        print(f"unknown layer: {u}")
    for a, b in two_way:
        print(f"two-way tie: {name(a)} <-> {name(b)}")
    print(f"{len(edges)} arrows, {len(upward)} upward, {len(cycles)} cycles, {len(two_way)} two-way ties")
    return 1 if upward or cycles or unknown else 0


if __name__ == "__main__":
    sys.exit(main())

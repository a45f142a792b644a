"""The layer rule of vmsim-core (tools/layers.py): every arrow between
modules points down or sideways, and no files form a circle. The arrows
still to remove are listed here; the test fails on a new one and on a
listed one that is gone (so the list only shrinks)."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "layers.py")

KNOWN_UPWARD = set()
KNOWN_CYCLES = []
# A module and its own descendant that depend on each other: none, and the
# list only shrinks.
KNOWN_TIES: set = set()


def graph():
    out = subprocess.run([sys.executable, TOOL, "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_no_new_upward_arrow_and_none_stale():
    g = graph()
    upward = {tuple(e) for e in g["upward"]}
    assert upward - KNOWN_UPWARD == set(), "new upward arrows"
    assert KNOWN_UPWARD - upward == set(), "gone: remove them from KNOWN_UPWARD"


def test_no_new_cycle():
    assert graph()["cycles"] == KNOWN_CYCLES


def test_no_new_two_way_tie_between_a_module_and_its_descendant():
    ties = {tuple(t) for t in graph()["ties"]}
    assert ties - KNOWN_TIES == set(), "new two-way ties"
    assert KNOWN_TIES - ties == set(), "gone: remove them from KNOWN_TIES"
    assert not any(a == "kernel" or a.startswith("kernel::") for a, _ in ties)


def test_the_tool_sees_a_two_way_tie(tmp_path):
    sys.path.insert(0, os.path.dirname(TOOL))
    try:
        import layers
    finally:
        sys.path.pop(0)
    edges = [(("kernel", "swap"), ("kernel",)), (("kernel", "mm"), ("kernel",))]
    down = [(("kernel",), ("kernel", "swap")), (("kernel",), ("kernel", "vmstat"))]
    assert layers.ties(edges, down) == [(("kernel",), ("kernel", "swap"))]


def test_every_top_module_has_a_layer():
    assert graph()["unknown"] == []


def test_the_tool_sees_the_arrows_it_should():
    g = graph()
    edges = {tuple(e) for e in g["edges"]}
    # A few arrows that must be there, through `use` lines and inline paths.
    assert ("kernel::vmscan", "kernel::hw") in edges
    assert ("sim", "kernel::hw") in edges
    assert ("experiment", "sim") in edges
    assert ("kernel::mm", "machine::tlb") in edges


def test_tool_reports_an_upward_arrow(tmp_path, monkeypatch):
    # The rule itself: a machine file naming the kernel is reported.
    sys.path.insert(0, os.path.dirname(TOOL))
    try:
        import layers
    finally:
        sys.path.pop(0)
    up, cycles, unknown = layers.check([(("machine", "cache"), ("kernel", "mm")),
                                        (("kernel", "a"), ("kernel", "b")),
                                        (("kernel", "b"), ("kernel", "a"))])
    assert up == [(("machine", "cache"), ("kernel", "mm"))]
    assert cycles == [[("kernel", "a"), ("kernel", "b")]]
    assert unknown == []

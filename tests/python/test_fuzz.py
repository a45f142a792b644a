"""A short seeded pass of tools/fuzz.py (``make fuzz N=100000`` runs a long one):
generated configs, presets, experiment files, sweep grids and command lines
are each refused with a one-line error naming a key of the input, or accepted
(and, where cheap, simulated with their data verified); generated programs
and Python policies run to their end or stop within a second of a SIGINT or
of their progress callback raising; traces changed under their replay are
refused and leave nothing in the cache."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))

import fuzz  # noqa: E402


def test_a_short_seeded_fuzz_pass_finds_nothing(tmp_path, capsys):
    t0 = time.monotonic()
    code = fuzz.main(["-n", "400", "--seed", "36", "--run-every", "2", "-q", "--json", str(tmp_path / "fuzz.json")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "400 inputs (seed 36)" in out and ": 0 failure(s)" in out
    # Every kind of input came up, and some were simulated.
    for kind in ("refused", "ok_verified", "cli_exit_2", "preset:", "experiment:", "compare:", "sweep:",
                 "program:", "stopped_by_", "policy:", "trace:"):
        assert kind in out, (kind, out)
    assert time.monotonic() - t0 < 60

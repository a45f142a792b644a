"""The workload language from Python: a program as a dict runs with its
phases reported and its data verified, a bad step is a typed ConfigError
naming its key, and an experiment on a program compares two kernels."""
from pathlib import Path

import pytest

import vmsim

ROOT = Path(__file__).resolve().parents[2]


def _program(steps, **task):
    return {
        "machine": "xeon-e5-2699v3-2s",
        "seed": 0,
        "kernel": {"thp": "always"},
        "workload": {"kind": "program", "task": [dict(name="app", steps=steps, **task)]},
    }


@pytest.mark.sim
def test_a_program_runs_from_a_dict_with_its_phases():
    cfg = _program(
        [
            {"op": "mmap", "map": "heap", "size_mib": 4},
            {"op": "access", "map": "heap", "write_ratio": 1.0, "phase": "fill"},
            {"op": "access", "map": "heap", "pattern": "zipf", "count": 5000, "dependent": True, "phase": "get"},
        ],
        count=2,
    )
    r = vmsim.run(cfg)
    m = r["metrics"]
    assert m["data_verified"] is True
    assert m["phase.fill.runs"] == 2
    assert m["phase.fill.writes"] == 2 * (4 << 20) // 8
    assert m["phase.get.reads"] == 2 * 5000
    assert m["phase.get.latency_p50_ns"] > 0
    # The same program again gives the same numbers.
    assert vmsim.run(cfg)["metrics"] == m


def test_a_bad_step_is_a_config_error_naming_it():
    cfg = _program([{"op": "access", "map": "heap"}])
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.run(cfg)
    assert e.value.key == "workload.task[0].steps[0].map"
    assert "not mapped" in str(e.value)


@pytest.mark.sim
def test_an_experiment_on_a_program_compares_two_kernels():
    c = vmsim.compare(str(ROOT / "examples/workloads/fork-snapshot.toml"), scale=0.125)
    # A program's headline rows are its phases' rates; --full has every phase figure.
    assert "phase.updates.throughput_bytes_per_s" in vmsim.format_compare(c)
    assert "phase.updates.task_elapsed_s" in vmsim.format_compare(c, full=True)
    arms = {a["name"]: a for a in c["arms"]} if "arms" in c else None
    assert arms is None or set(arms) == {"split", "copy"}


@pytest.mark.sim
def test_a_program_timing_little_data_gets_a_note(tmp_path):
    # 4 MiB timed after a warm-up, against 90 MiB of LLC: the note names it;
    # a run of another workload, or a program timing more, gets none.
    steps = [
        {"op": "mmap", "map": "a", "size_mib": 4},
        {"op": "access", "map": "a", "write_ratio": 1.0, "phase": "warm"},
        {"op": "clock", "at": "start"},
        {"op": "access", "map": "a", "write_ratio": 1.0, "phase": "timed"},
        {"op": "clock", "at": "end"},
    ]
    r = vmsim.run(_program(steps), cache=False)
    assert r["metrics"]["timed_bytes"] == 4 << 20
    from vmsim._data_check import timed_data_notes
    [note] = timed_data_notes(r)
    assert note.startswith("the timed interval accessed 4 MiB, 0.044 times the machine's LLCs")
    big = dict(steps[3], passes=400)
    r = vmsim.run(_program(steps[:3] + [big, steps[4]]), cache=False)
    assert r["metrics"]["timed_bytes_per_llc"] > 4 and timed_data_notes(r) == []
    import json
    import subprocess
    import sys
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_program(steps)))
    p = subprocess.run([sys.executable, "-m", "vmsim", "run", str(path), "-q", "--no-cache"],
                       capture_output=True, text=True)
    assert p.returncode == 0 and "vmsim: note: the timed interval accessed 4 MiB" in p.stderr, p.stderr


@pytest.mark.sim
def test_compare_with_runs_says_each_note_once():
    # Every seed's runs time the same little data: one note per arm.
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-m", "vmsim", "compare", str(ROOT / "examples/workloads/fork-snapshot.toml"),
                        "--scale", "1/8", "--runs", "2", "-q", "--no-cache"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    notes = [l for l in p.stderr.splitlines() if "the timed interval accessed" in l]
    assert sorted(l.split(":")[2].strip() for l in notes) == ["copy", "split"], p.stderr

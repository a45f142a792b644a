"""Trace replay (docs/workloads.md#trace-replay) from Python and the command
line: examples/trace's C program traced with valgrind into a temporary
folder (never the repository), run with `vmsim run` and compared under two
THP settings with `vmsim compare`, data verified and byte-identical on
re-run; a malformed line and an access outside every region are
`ConfigError`s naming the line (one line, exit 2, on the command line);
the result cache keys a run by the trace's content. Skipped, saying why,
without gcc or valgrind."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import vmsim
from vmsim import cache

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trace"


def vmsim_cmd(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "vmsim", *args], capture_output=True, text=True,
                          cwd=cwd, env=dict(os.environ), timeout=900)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """A copy of examples/trace with prog.lackey made by its script."""
    for tool in ("gcc", "valgrind"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (the test traces a C program with valgrind --tool=lackey)")
    d = tmp_path_factory.mktemp("trace")
    for f in ("prog.c", "make-trace.sh", "run.toml", "thp.toml"):
        shutil.copy(EXAMPLE / f, d / f)
    subprocess.run(["sh", str(d / "make-trace.sh"), str(d)], check=True, capture_output=True, timeout=600)
    assert (d / "prog.lackey").stat().st_size > 1 << 20
    return d


@pytest.mark.sim
def test_run_is_verified_counted_and_byte_identical(traced):
    a = vmsim.run(str(traced / "run.toml"), cache=False)
    m = a["metrics"]
    assert m["data_verified"] is True
    assert m["trace_threads"] == 3
    # Each worker stores to and loads from every line of its 8 MiB buffer.
    workers = m["task_accesses"][1:]
    assert len(workers) == 2
    assert all(w["writes"] >= 131072 and w["reads"] >= 131072 for w in workers), workers
    assert m["trace_accesses"] >= m["trace_loads"] + m["trace_stores"] + 2 * m["trace_modifies"]
    assert m["thp_fault_alloc"] >= 8, "each buffer's four 2 MiB blocks are huge pages"
    b = vmsim.run(str(traced / "run.toml"), cache=False)
    assert json.dumps(a["metrics"], sort_keys=True) == json.dumps(b["metrics"], sort_keys=True)


@pytest.mark.sim
def test_cli_run_and_compare(traced):
    p = vmsim_cmd("run", str(traced / "run.toml"), "--no-cache")
    assert p.returncode == 0, p.stderr
    assert "trace: prog.lackey" in p.stdout
    p = vmsim_cmd("compare", str(traced / "thp.toml"), "--no-cache")
    assert p.returncode == 0, p.stderr
    assert "thp-never" in p.stdout and "thp-always" in p.stdout
    r = vmsim.compare(str(traced / "thp.toml"), cache=False)
    never, always = r["baseline"], r["variants"]["thp-always"]
    assert never["data_verified"] and always["data_verified"]
    # Without THP each page touched faults once; with it far fewer faults.
    assert never["pgfault"] >= never["trace_pages"] >= 2 * 2048
    assert always["pgfault"] < never["pgfault"] / 20
    assert never["trace_accesses"] == always["trace_accesses"]


@pytest.mark.sim
def test_bad_line_and_sigsegv_are_config_errors_naming_the_line(traced, tmp_path):
    lines = (traced / "prog.lackey").read_text().splitlines()
    lines[4999] = " S 0x1234,8"
    bad = tmp_path / "bad.lackey"
    bad.write_text("\n".join(lines) + "\n")
    cfg = {"machine": "xeon-e5-2699v3-2s", "workload": {"kind": "trace", "trace": str(bad)}}
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.run(cfg, cache=False)
    assert e.value.key == "workload.trace"
    assert "bad.lackey line 5000: the address is not a hexadecimal number" in str(e.value)
    conf = tmp_path / "bad.toml"
    conf.write_text(f'machine = "xeon-e5-2699v3-2s"\n[workload]\nkind = "trace"\ntrace = "{bad}"\n')
    p = vmsim_cmd("run", str(conf), "--no-cache")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines() == [p.stderr.strip()] and "line 5000" in p.stderr, p.stderr
    # Only the low 4 GiB mapped: the first stack access is a simulated SIGSEGV.
    cfg["workload"] = {"kind": "trace", "trace": str(traced / "prog.lackey"),
                       "regions": [{"start": "0x10000", "len": "0xffff0000"}]}
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.run(cfg, cache=False)
    assert e.value.key == "workload.regions"
    assert str(e.value).startswith("workload.regions: simulated SIGSEGV: ")
    assert "prog.lackey line " in str(e.value) and "outside every mapping" in str(e.value)


def test_cache_key_follows_the_trace_content(tmp_path):
    t = tmp_path / "t.lackey"
    t.write_text(" S 10000000,8\n")
    cfg = json.dumps({"machine": "xeon-e5-2699v3-2s", "workload": {"kind": "trace", "trace": "t.lackey"}})
    k1 = cache.run_key(cfg, str(tmp_path))
    assert k1 is not None and k1 == cache.run_key(cfg, str(tmp_path))
    t.write_text(" S 10000008,8\n")
    assert cache.run_key(cfg, str(tmp_path)) != k1
    t.unlink()
    assert cache.run_key(cfg, str(tmp_path)) is None, "a missing trace is not cached"
    # Other workloads keep their keys: no trace entry is added for them.
    other = json.dumps({"machine": "xeon-e5-2699v3-2s", "workload": {"kind": "usemem"}})
    assert cache._traces(json.loads(other), None, []) == {}


def test_a_trace_edited_before_the_core_reads_it_leaves_nothing_cached(tmp_path, monkeypatch):
    """The key is made from the content hashed first; a trace edited after
    that, even before the core's own first reading, must not leave the
    result of the new content under the old content's key."""
    monkeypatch.setenv("VMSIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VMSIM_CACHE", raising=False)
    t = tmp_path / "t.lackey"
    t.write_text(" S 10000000,8\n")
    cfg = {"machine": "xeon-e5-2699v3-2s", "workload": {"kind": "trace", "trace": str(t)}}
    first_key = cache.run_key(json.dumps(cfg), None)
    run_config = vmsim._api._core.run_config

    def edit_then_run(*args):
        t.write_text(" L 10000000,8\n S 10000040,8\n")
        return run_config(*args)

    monkeypatch.setattr(vmsim._api._core, "run_config", edit_then_run)
    r = vmsim.run(cfg)
    assert r["metrics"]["data_verified"] is True
    assert cache.get(first_key) is None, "the edited trace's result is under the first content's key"


@pytest.mark.sim
def test_user_l1_misses_agree_with_cachegrind(tmp_path):
    # examples/cachegrind: the program traced by lackey and replayed with
    # the L1d cachegrind simulates and huge pages; its user-mode L1 misses
    # (by_mode) beside cachegrind's D1 misses of the same binary.
    for tool in ("gcc", "valgrind"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (the test sets vmsim beside valgrind's cachegrind)")
    src = EXAMPLE.parent / "cachegrind"
    shutil.copy(src / "run.toml", tmp_path / "run.toml")
    prog = tmp_path / "prog"
    subprocess.run(["gcc", "-O1", "-o", str(prog), str(src / "prog.c")], check=True, timeout=120)
    subprocess.run(["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-file={tmp_path / 'prog.lackey'}",
                    str(prog)], check=True, capture_output=True, timeout=600)
    cg = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--D1=32768,8,64",
                         "--LL=8388608,16,64", "--cachegrind-out-file=/dev/null", str(prog)],
                        check=True, capture_output=True, text=True, timeout=600)
    line = next(l for l in cg.stderr.splitlines() if "D1  misses:" in l)
    d1 = int(line.split("D1  misses:")[1].split("(")[0].replace(",", ""))
    r = vmsim.run(str(tmp_path / "run.toml"), cache=False)
    user = r["metrics"]["by_mode"]["user"]["cache"]["l1d_misses"]
    assert abs(user / d1 - 1) < 0.01, (user, d1)
    assert r["metrics"]["by_mode"]["kernel"]["cache"]["l1d_misses"] > 0

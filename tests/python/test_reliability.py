"""Bad input, lost data and interruption: each case here was a traceback, a
hang, an abort or a silently wrong result before."""

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

import vmsim
from vmsim import _io, cli

from conftest import TINY_TOML

PRESET = os.path.join(os.path.dirname(__file__), "..", "..", "machines", "xeon-e5-2699v3-2s.toml")


def vmsim_proc(*args, cwd=None):
    return subprocess.Popen([sys.executable, "-m", "vmsim", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd)


def vmsim_cmd(*args, cwd=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "vmsim", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


def one_line_error(proc, code=2):
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vmsim: error: "), proc.stderr
    return lines[0]


@pytest.mark.parametrize("value", [None, math.nan, math.inf, 2**63])
def test_run_dict_errors_name_the_key(tiny_config, value):
    tiny_config["seed"] = value
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.run(tiny_config)
    assert e.value.key == "seed"


def test_overflowing_preset_value_is_a_config_error(tmp_path, tiny_config):
    text = open(PRESET).read()
    start = text.index("fill_buffers = { value = ")
    end = text.index(",", start)
    (tmp_path / "m.toml").write_text(text[:start] + "fill_buffers = { value = 1099511627776" + text[end:])
    tiny_config["machine"] = str(tmp_path / "m.toml")
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.run(tiny_config)
    assert e.value.key.endswith("l1d.fill_buffers.value")


def test_lost_data_raises_after_the_result_is_complete(tiny_config):
    tiny_config["sim"] = {"fault_injection": {"skip_clear_subpage": 5}}
    with pytest.raises(vmsim.DataVerificationError) as e:
        vmsim.run(tiny_config)
    assert e.value.result["metrics"]["data_verified"] is False
    r = vmsim.run(tiny_config, check=False)
    assert r["metrics"]["data_verified"] is False


def test_cli_lost_data_writes_json_then_fails(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(TINY_TOML + "\n[sim.fault_injection]\nskip_clear_subpage = 5\n")
    out = tmp_path / "r.json"
    proc = vmsim_cmd("run", "-q", str(cfg), "--json", str(out))
    line = one_line_error(proc, code=cli.EXIT_DATA_LOST)
    assert "data verification failed" in line
    assert json.loads(out.read_text())["metrics"]["data_verified"] is False


def test_one_line_errors_everywhere(tmp_path, tiny_toml):
    for doc in ("[]", "{}", "null"):
        (tmp_path / "r.json").write_text(doc)
        one_line_error(vmsim_cmd("plot", str(tmp_path / "r.json"), "--out", str(tmp_path / "p.png")))
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"metrics": {"elapsed_s": 1.0}, "machine": {"name": "m"}}))
    line = one_line_error(vmsim_cmd("plot", str(good), "--out", str(tmp_path / "p.png"), "--metrics", "nope"))
    assert "nope" in line
    line = one_line_error(vmsim_cmd("plot", str(good), "--out", str(tmp_path / "x.xyz")))
    assert ".png" in line
    one_line_error(vmsim_cmd("sweep", str(tiny_toml), "--set", "seed=1", "-j", "-1"))
    line = one_line_error(vmsim_cmd("sweep", str(tiny_toml), "--set", "a..b=1"))
    assert "a..b" in line
    line = one_line_error(vmsim_cmd("sweep", str(tiny_toml), "--set", "machine.x=1"))
    assert "machine.x" in line
    line = one_line_error(vmsim_cmd("compare", "clear-target-last", "--seed", "-1"))
    assert "seed" in line
    one_line_error(vmsim_cmd("run", str(tiny_toml), "--json", ""))
    one_line_error(vmsim_cmd("sweep", str(tiny_toml), "--set", "seed=1", "--metrics", "nope", "-j", "1"))


def test_fifo_config_is_refused_without_hanging(tmp_path, tiny_config):
    fifo = tmp_path / "c.toml"
    os.mkfifo(fifo)
    line = one_line_error(vmsim_cmd("run", str(fifo), timeout=30))
    assert "not a regular file" in line
    with pytest.raises(vmsim.ConfigError):
        vmsim.run(str(fifo))
    tiny_config["machine"] = str(fifo)
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.run(tiny_config)
    assert e.value.key == "machine"


def test_plot_out_folder_writes_into_it(tmp_path):
    pytest.importorskip("matplotlib")
    good = tmp_path / "res.json"
    good.write_text(json.dumps({"metrics": {"elapsed_s": 1.0, "sys_s": 0.5}, "machine": {"name": "m"}}))
    out = tmp_path / "figs"
    out.mkdir()
    assert cli.main(["plot", "-q", str(good), "--out", str(out)]) == 0
    assert (out / "res.png").stat().st_size > 0


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("old\n")
    with pytest.raises(KeyboardInterrupt):
        with _io.atomic_path(target) as tmp:
            with open(tmp, "w") as f:
                f.write("half")
            raise KeyboardInterrupt
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["r.json"]
    _io.atomic_write_text(target, "new\n")
    assert target.read_text() == "new\n"
    assert os.listdir(tmp_path) == ["r.json"]


def test_reproduce_refuses_a_foreign_folder(tmp_path):
    (tmp_path / "mine.txt").write_text("keep")
    line = one_line_error(vmsim_cmd("reproduce", "--out", str(tmp_path), "--only", "clear-target-last"))
    assert "not written by vmsim reproduce" in line
    assert (tmp_path / "mine.txt").read_text() == "keep"


def test_sweep_stops_on_first_ctrl_c(tmp_path, tiny_toml):
    # 32 points of 2 x 256 MiB (8 M simulated line accesses each) on one worker: together
    # far longer than the wait below even at 10 M accesses per host second, and each short
    # enough to be checked before the first runs without delaying the signal.
    seeds = ",".join(str(i) for i in range(32))
    # As from a terminal: SIGINT at its default in the child, whatever the test runner
    # inherited (a background job of a non-interactive shell starts with it ignored).
    proc = subprocess.Popen([sys.executable, "-m", "vmsim", "sweep", "-q", str(tiny_toml),
                             "--set", "workload.size_per_task_mib=256", "--set", f"seed={seeds}",
                             "-j", "1", "--json", str(tmp_path / "s.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(3)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)  # a second one must not hang either
        proc.wait(timeout=20)
        pytest.fail("the first Ctrl-C did not stop the sweep")
    assert time.monotonic() - t0 < 15
    assert proc.returncode == 130, proc.stderr.read()
    # Whatever finished is on disk, marked incomplete, for --resume.
    if (tmp_path / "s.json").exists():
        doc = json.loads((tmp_path / "s.json").read_text())
        assert doc["complete"] is False and len(doc["rows"]) < 8


def _hugetlb_writable():
    path = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
    return os.geteuid() == 0 and os.access(path, os.W_OK)


@pytest.mark.skipif(not _hugetlb_writable(), reason="needs root and a writable 2 MiB hugetlb pool")
def test_hw_sigterm_stops_and_restores_the_pool():
    path = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
    before = open(path).read().strip()
    proc = vmsim_proc("hw", "pf-test", "--opt", "size_mib=64", "--opt", 'kinds=["hugetlb-2m"]', "--opt", "reps=1000")
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=20)
    assert proc.returncode == -signal.SIGTERM, proc.stderr.read()
    assert open(path).read().strip() == before


def test_hw_quiet_is_quiet():
    proc = vmsim_cmd("hw", "pf-test", "-q", "--opt", "size_mib=4", "--opt", 'kinds=["4k"]', "--opt", "reps=1")
    if proc.returncode != 0:
        pytest.skip(f"host measurement unavailable: {proc.stderr.strip()}")
    assert proc.stderr == ""


def test_hw_size_beyond_host_memory_is_refused():
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.hw("pf-test", size_mib=1 << 20, kinds=["4k"], reps=1)
    assert e.value.key == "size_mib"


def test_plot_every_json_vmsim_writes(tmp_path):
    pytest.importorskip("matplotlib")
    from vmsim import plot

    run = {"metrics": {"throughput_bytes_per_s": 1e10, "elapsed_s": 1.0, "sys_s": 0.5, "sys_s_clear_page": 0.4,
                       "sys_s_exc_page_fault": 0.1, "per_cpu": [{"cpu": 0, "user_cycles": 5, "sys_cycles": 3}]},
           "machine": {"name": "m"}}
    arms = {"experiment": "e", "baseline_name": "a", "baseline": run["metrics"], "variant_order": ["b"],
            "variants": {"b": dict(run["metrics"], throughput_bytes_per_s=1.2e10)}, "machine": {"name": "m"}}
    runs = {"kind": "compare-runs", "experiment": "e", "seeds": [0, 1], "runs": [arms, arms]}
    sweep = {"kind": "sweep", "grid": {"seed": [0, 1], "workload.nr_task": [1, 2]}, "grid_keys": ["workload.nr_task", "seed"],
             "rows": [{"workload.nr_task": n, "seed": s, "status": "ok", "elapsed_s": n + s / 10} for n in (1, 2) for s in (0, 1)]}
    for name, doc in (("run", run), ("compare", arms), ("runs", runs), ("sweep", sweep)):
        out = tmp_path / f"{name}.png"
        assert plot.plot(doc, out) == [str(out)]
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(plot.PlotError, match="host measurement"):
        plot.plot({"command": "pf-test", "host": {}, "results": []}, tmp_path / "hw.png")
    with pytest.raises(plot.PlotError, match="nope"):
        plot.plot(sweep, tmp_path / "x.png", metrics=["nope"])


def test_calibrate_quick_measures_dram_beyond_the_llc(tmp_path):
    try:
        r = vmsim.hw("calibrate", quick=True, out_dir=str(tmp_path))
    except (vmsim.HwUnsupportedError, vmsim.HwError) as e:
        pytest.skip(f"host calibration unavailable: {e}")
    llc = max((c["size_kib"] * 1024 for c in r["host"].get("caches", []) if c.get("type") != "Instruction"), default=0)
    assert r["raw"]["bandwidth_buffer_bytes"] >= max(4 * llc, 64 << 20)
    text = open(r["preset_path"]).read()
    handler = next(line for line in text.splitlines() if line.startswith("thp_fault_handler_cycles"))
    if r["derived"]["under_hypervisor"]:
        # A guest's first touch includes the host's fault: not stored as the handler's cost.
        assert "not measured" in handler and r["derived"]["first_touch_thp_ns"] > 0

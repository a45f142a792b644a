import json
import re
import os
import subprocess
import sys

import pytest

from conftest import TINY_TOML
from vmsim import cli


def vmsim_cmd(*args, cwd=None):
    """Runs the CLI in a fresh process, as a user would."""
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "vmsim", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=900)


def test_machines_and_experiments(capsys):
    assert cli.main(["machines"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.split()[0] == "xeon-e5-2699v3-2s" for line in out)
    assert cli.main(["experiments"]) == 0
    out = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in out]
    assert "clear-target-last" in names
    # descriptions start in one column
    starts = {len(line) - len(line[len(line.split()[0]):].lstrip()) for line in out if len(line.split()) > 1}
    assert len(starts) == 1


def test_entry_point_process():
    proc = vmsim_cmd("machines")
    assert proc.returncode == 0
    assert "xeon-e5-2699v3-2s" in proc.stdout
    assert proc.stderr == ""


def test_missing_file_exit_2_one_line():
    proc = vmsim_cmd("run", "/nonexistent/run.toml")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vmsim: error: ")
    assert "/nonexistent/run.toml" in lines[0]


def test_bad_config_exit_2_names_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('machine = "xeon-e5-2699v3-2s"\n[workload]\nkind = "usemem"\nbogus = 1\n')
    proc = vmsim_cmd("run", str(bad))
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("vmsim: error: workload.bogus")
    assert "Traceback" not in proc.stderr


def test_unparsable_config_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("this is [not toml\n")
    proc = vmsim_cmd("run", str(bad))
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("vmsim: error: ")


def test_unknown_experiment_exit_2(capsys):
    assert cli.main(["compare", "no-such-experiment"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vmsim: error: ") and len(err.splitlines()) == 1
    assert cli.main(["compare", "missing-file.toml"]) == 2
    assert "missing-file.toml" in capsys.readouterr().err


def test_argparse_errors_exit_2_with_one_line():
    for args in (("compare",), ("compare", "clear-target-last", "--seed", "x"), ("no-such-command",),
                 ("compare", "clear-target-last", "--scale", "1/0"), ("compare", "clear-target-last", "--scale", "-1")):
        proc = vmsim_cmd(*args)
        assert proc.returncode == 2, args
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("vmsim: error: "), (args, proc.stderr)
    assert "--scale" in proc.stderr and "positive" in proc.stderr


def test_scale_takes_a_fraction(tmp_path, capsys):
    out = tmp_path / "f.json"
    assert cli.main(["compare", "-q", "clear-target-last", "--scale", "1/256", "--force-scale", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["provenance"]["scale"] == 1 / 256


def test_run_prints_table(tiny_toml, capsys):
    assert cli.main(["run", "-q", str(tiny_toml)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("machine: xeon-e5-2699v3-2s")
    names = [line.split()[0] for line in lines if line.startswith("  ") and not line.startswith("  (")]
    assert names[:4] == ["throughput_bytes_per_s", "elapsed_s", "user_s", "sys_s"]
    # Compact: the headline, times and the key counters that are not zero; --full every row.
    assert len(names) < 20 and "data_verified" not in names and "l1d_stores" not in names
    assert "--full shows every one" in lines[-1]
    assert captured.err == ""
    assert cli.main(["run", "-q", "--full", str(tiny_toml)]) == 0
    full = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    assert "data_verified" in full and "l1d_stores" in full and "per_cpu" not in full and len(full) > 60


def same_result_bytes(a, b):
    """Byte-identical apart from how the host ran it (provenance.host_seconds, .host_threads)."""
    drop = re.compile(rb'^\s*"host_(seconds|threads)": [0-9.e+-]+,?\n', re.M)
    ta, tb = drop.sub(b"", a.read_bytes()), drop.sub(b"", b.read_bytes())
    assert ta == tb
    assert len(ta) < len(a.read_bytes()), "the host time is recorded"


def test_run_json_is_deterministic(tiny_toml, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert cli.main(["run", "-q", str(tiny_toml), "--json", str(a)]) == 0
    assert cli.main(["run", "-q", str(tiny_toml), "--json", str(b)]) == 0
    same_result_bytes(a, b)
    data = json.loads(a.read_text())
    assert set(data) >= {"config", "machine", "scale", "metrics"}
    # the full result, nested values included
    assert "per_cpu" in data["metrics"]


def test_run_json_to_stdout(tiny_toml, capsys):
    assert cli.main(["run", "-q", str(tiny_toml), "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "metrics" in data


def test_run_threads_spread_a_windowed_run(tmp_path, capsys):
    cfg = tmp_path / "w.toml"
    cfg.write_text(TINY_TOML.replace("nr_task = 2\nsize_per_task_mib = 4",
                                     "nr_task = 24\nsize_per_task_mib = 1")
                   + "\n[sim]\nwindow_cycles = \"auto\"\n")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out, threads in ((a, "1"), (b, "2")):
        assert cli.main(["run", "-q", str(cfg), "--threads", threads, "--json", str(out)]) == 0
    same_result_bytes(a, b)
    assert json.loads(b.read_text())["provenance"]["host_threads"] == 2
    assert cli.main(["run", "-q", str(cfg), "--threads", "0"]) == 2
    assert "--threads must be in 1..65536, not 0" in capsys.readouterr().err


def test_compare_table_and_json(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert cli.main(["compare", "-q", "clear-target-last", "--scale", "1/16", "--set", "workload.nr_task=4",
                     "--json", str(out)]) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    lines = text.splitlines()
    assert lines[0].startswith("experiment: clear-target-last")
    assert lines[1].startswith("machine:    ")
    assert lines[2].startswith("scale:      ") and "seed: 0" in lines[2]
    header = lines[4].split()
    assert header[0] == data["baseline_name"]
    assert header[1:3] == ["%change", data["variant_order"][0]]
    assert any(line.endswith("  throughput_bytes_per_s") for line in lines)


def test_compare_json_deterministic_across_processes_and_threads(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out, threads in ((a, "1"), (b, "2")):
        proc = vmsim_cmd("compare", "clear-target-last", "--scale", str(1 / 256), "--force-scale", "--json", str(out),
                         "--threads", threads)
        assert proc.returncode == 0, proc.stderr
    same_result_bytes(a, b)
    assert json.loads(a.read_text())["provenance"]["host_threads"] == 1
    assert json.loads(b.read_text())["provenance"]["host_threads"] == 2


def test_compare_threads_must_be_positive(capsys):
    for cmd in (["compare", "clear-target-last"], ["reproduce", "--out", "unused"]):
        assert cli.main([*cmd, "-q", "--threads", "0"]) == 2
        assert "--threads must be in 1..65536, not 0" in capsys.readouterr().err


def test_hw_validate_bad_option(capsys):
    assert cli.main(["hw", "validate", "--opt", "bogus=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vmsim: error: bogus: unknown option")


def test_hw_validate_bad_values_name_the_option(capsys):
    for opt, key in [("microbench_reps=0", "microbench_reps"), ("reps=-1", "reps"),
                     ("pages=x", "pages"), ("quick=3", "quick"),
                     ("preset=/nonexistent/host.toml", "preset")]:
        assert cli.main(["hw", "validate", "--opt", opt]) == 2, opt
        err = capsys.readouterr().err
        assert err.startswith(f"vmsim: error: {key}: "), (opt, err)
        assert err.count("\n") == 1, err


def test_hw_microbench_bad_values_name_the_option(capsys):
    for opt, key in [("reps=0", "reps"), ("quick=1", "quick"), ("preset=nope.toml", "preset"),
                     ("size=3", "size")]:
        assert cli.main(["hw", "microbench", "--opt", opt]) == 2, opt
        err = capsys.readouterr().err
        assert key in err.splitlines()[0] and err.count("\n") == 1, (opt, err)


def test_hw_store_sweep_bad_values_name_the_option(capsys):
    for opt, key in [("backing=1g", "backing"), ("chunks_kib=[5]", "chunks_kib"), ("kinds=memset", "kinds"),
                     ("reps=0", "reps")]:
        assert cli.main(["hw", "store-sweep", "--opt", opt]) == 2, opt
        err = capsys.readouterr().err
        assert key in err.splitlines()[0] and err.count("\n") == 1, (opt, err)


def test_hw_bad_opt(capsys):
    assert cli.main(["hw", "clear", "--opt", "novalue"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_parse_opt():
    assert cli._parse_opt("size_mib=64") == ("size_mib", 64)
    assert cli._parse_opt("order=target-last") == ("order", "target-last")
    assert cli._parse_opt("flag=true") == ("flag", True)
    assert cli._parse_opt("list=[1,2]") == ("list", [1, 2])
    assert cli._parse_opt("s=") == ("s", "")


def test_progress_non_tty_short_run_is_silent():
    import io

    from vmsim._progress import StderrProgress

    buf = io.StringIO()
    with StderrProgress(stream=buf) as p:
        p("baseline", 0.5)
    assert buf.getvalue() == ""
    buf = io.StringIO()
    with StderrProgress(stream=buf, delay=0.0) as p:
        p("baseline", 0.0)
        p("baseline", 0.5)  # within interval: not repeated
        p("variant", 0.25)
    assert buf.getvalue() == "vmsim: baseline 0%  elapsed 0:00, ETA --\nvmsim: variant 25%  elapsed 0:00, ETA --\n"


def test_progress_elapsed_and_eta():
    import io

    from vmsim._progress import StderrProgress, clock_text

    assert [clock_text(s) for s in (0, 59.4, 61, 3600 + 62)] == ["0:00", "0:59", "1:01", "1:01:02"]
    now = [100.0]
    buf = io.StringIO()
    with StderrProgress(stream=buf, delay=0.0, interval=0.0, clock=lambda: now[0]) as p:
        p("sequential", 0.0)
        now[0] = 130.0
        p("sequential", 0.25)  # 30 s for a quarter: 90 s left
        now[0] = 160.0
        p("target-last", 0.005)  # a new phase: timed from here, too early to estimate
        now[0] = 170.0
        p("target-last", 0.5)  # 10 s for half: 10 s left
        p("target-last", 1.0)
    assert buf.getvalue().splitlines() == [
        "vmsim: sequential 0%  elapsed 0:00, ETA --",
        "vmsim: sequential 25%  elapsed 0:30, ETA 1:30",
        "vmsim: target-last 0%  elapsed 1:00, ETA --",
        "vmsim: target-last 50%  elapsed 1:10, ETA 0:10",
        "vmsim: target-last 100%  elapsed 1:10, ETA 0:00",
    ]


def test_progress_tty_single_line():
    import io

    from vmsim._progress import StderrProgress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    buf = Tty()
    with StderrProgress(stream=buf) as p:
        p("baseline", 0.5)
        p("b", 1.0)
    text = buf.getvalue()
    assert "\n" not in text and text.startswith("\rvmsim: baseline  50.0%  elapsed 0:00, ETA --")
    assert text.endswith("\r")


def test_plot_compare(tmp_path):
    pytest.importorskip("matplotlib")
    out_json = tmp_path / "c.json"
    assert cli.main(["compare", "-q", "clear-target-last", "--scale", str(1 / 256), "--force-scale", "--json", str(out_json)]) == 0
    png = tmp_path / "c.png"
    assert cli.main(["plot", str(out_json), "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_cli(tiny_toml, tmp_path, capsys):
    out = tmp_path / "s.json"
    assert cli.main(["sweep", "-q", str(tiny_toml), "--set", "workload.nr_task=1,2",
                     "--set", 'kernel.clear_huge_page=["sequential","target-last"]', "-j", "2",
                     "--json", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["workload.nr_task", "kernel.clear_huge_page", "throughput_bytes_per_s", "elapsed_s"]
    assert len(lines) == 2 + 4
    doc = json.loads(out.read_text())
    assert doc["kind"] == "sweep" and doc["provenance"]["command"] == "sweep"
    rows = doc["rows"]
    assert [(r["workload.nr_task"], r["kernel.clear_huge_page"]) for r in rows] == [
        (1, "sequential"), (1, "target-last"), (2, "sequential"), (2, "target-last")]


def test_sweep_cli_bad_set(tiny_toml, capsys):
    assert cli.main(["sweep", str(tiny_toml), "--set", "novalues"]) == 2
    assert capsys.readouterr().err.startswith("vmsim: error: --set")


def test_hw_validate_quick_compares_real_and_simulated(tmp_path, capfd):
    import platform

    import pytest

    import vmsim
    from vmsim.hw_validate import kernel_policy, validate

    if platform.machine() not in ("x86_64", "AMD64") or platform.system() != "Linux":
        pytest.skip("host routines are x86-64 Linux only")
    capfd.readouterr()
    r = validate(quick=True, quiet=True)
    assert capfd.readouterr().err == "", "quiet: no progress notes from any host measurement"
    rows = r["rows"]
    assert [row["sim_policy"] for row in rows[:5]] == [
        "sequential", "target-last", "multipage-2023", "contiguous-7.0", "nontemporal-far"]
    for row in rows:
        assert row["sim_gbps"] > 0
    for row in rows[:5]:
        assert row["real_gbps"] > 0 and row["diff_percent"] is not None
    micro = r["microbench"]
    assert micro["command"] == "microbench" and micro["options"]["quick"] is True
    sizes = micro["sizes"]
    # The DRAM rows' buffer: 4 x the LLC (at least 64 MiB), or less with the
    # cap said (the model's benchmark node, or the host's memory).
    assert sizes["dram_wanted_bytes"] == max(4 * sizes["llc_bytes"], 64 << 20)
    if sizes["dram_bytes"] < sizes["dram_wanted_bytes"]:
        assert sizes["dram_note"].startswith(f"buffer capped at {sizes['dram_bytes'] >> 20} MiB"), sizes
        assert sizes["dram_note"] in micro["table"]
    else:
        assert sizes["dram_bytes"] == sizes["dram_wanted_bytes"] and sizes["dram_note"] is None
    # A row the calibrated preset's benchmark machine cannot run is skipped
    # with the reason, never an error.
    for row in micro["rows"]:
        if "skipped" in row:
            assert row["host"] is None and row["model"] is None and row["skipped"], row
            assert f"skipped: {row['skipped']}" in micro["table"]
    assert isinstance(r["calibration"]["clamped"], list) and r["clamped"] == r["calibration"]["clamped"]
    kinds = {row["bench"] if isinstance(row["bench"], str) else next(iter(row["bench"]))
             for row in micro["rows"]}
    assert {"chase", "idle-latency", "load", "fill", "copy", "update", "string-fill",
            "nt-fill", "socket-load"} <= kinds
    for row in (row for row in micro["rows"] if "skipped" not in row):
        assert row["host"] > 0 and row["model"] > 0, row
        assert abs(row["error"] - (row["model"] - row["host"]) / row["host"]) < 0.01, row
        # Rows inside the core's caches read the fastest of many short timings.
        fastest = row["host_figure"] == "fastest"
        assert fastest == (row["bench"] != "idle-latency" and isinstance(row["bench"], dict)
                           and next(iter(row["bench"].values())).get("kib", 1 << 30) * 1024
                           <= micro["sizes"]["l2_bytes"]
                           and next(iter(row["bench"])) != "socket-load"), row
        if fastest:
            want = row["host_stats"]["min" if "chase" in row["bench"] else "max"]
            assert abs(row["host"] - want) < 1e-3 * want, row
        reps = micro["method"]["in_core_reps"] if fastest else micro["options"]["reps"]
        n = row["host_stats"]["n"]
        # Clean repetitions up to reps; if a switch spoilt every attempt, all of them.
        assert 1 <= n <= (reps if row["host_clean"] else 4 * reps), row
        assert (n if row["host_clean"] else 0) + row["host_reps_switched_out"] <= 4 * reps, row
    assert "host: measured | model (calibrated host preset" in r["table"]
    assert all(row["description"] in r["table"] for row in micro["rows"])
    # The store sweep: every measured chunk and page-order row beside the
    # model's figure for the same calls on the calibrated preset.
    sweep = r["store_sweep"]
    assert sweep["command"] == "store-sweep" and sweep["options"]["preset"] == r["preset"]
    measured = [row for row in sweep["results"] if "skipped" not in row]
    if "skipped" not in sweep:
        assert {row["case"] for row in measured} >= {"stosb 4K", "stosb 4K descending",
                                                     "movnti 64K", "mov 4K", "mov 4K descending"}
        for row in measured:
            host, model = row["gbps"]["median"], row["model_gbps"]
            assert host > 0 and model > 0, row
            assert abs(row["error"] - (model - host) / host) < 0.01, row
        assert "model    error" in sweep["table"] and sweep["table"] in r["table"]
    assert kernel_policy("4.9.0") == "sequential"
    assert kernel_policy("6.18.44-fc") == "target-last"
    assert kernel_policy("7.0.1") == "contiguous-7.0"
    with pytest.raises(vmsim.ConfigError) as info:
        validate(bogus=1)
    assert info.value.key == "bogus"


def test_reproduce_writes_a_results_folder_deterministically(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        assert cli.main(["reproduce", "--only", "clear-target-last", "--scale", "0.00390625", "--force-scale", "-q", "--out", str(out)]) == 0
    names = sorted(p.name for p in a.iterdir())
    assert "README.md" in names and "clear-target-last.json" in names and "clear-target-last.txt" in names
    for n in ("README.md", "clear-target-last.txt"):
        assert (a / n).read_bytes() == (b / n).read_bytes(), n
    same_result_bytes(a / "clear-target-last.json", b / "clear-target-last.json")
    # A re-run into a folder it wrote replaces it whole.
    (a / "stale.txt").write_text("from an older run")
    assert cli.main(["reproduce", "--only", "clear-target-last", "--scale", "0.00390625", "--force-scale", "-q", "--out", str(a)]) == 0
    assert not (a / "stale.txt").exists()
    readme = (a / "README.md").read_text()
    assert "| clear-target-last | sequential -> target-last |" in readme
    # The scale given, and each experiment's sizes at it.
    assert "scale 0.00390625 for every experiment" in readme
    assert "Scale: usemem: 72 task(s) x 0.125 MiB each" in readme
    assert cli.main(["reproduce", "--only", "no-such-thing", "-q", "--out", str(a)]) == 2
    assert "no-such-thing" in capsys.readouterr().err


def test_compare_set_applies_to_every_arm_and_names_bad_keys(tmp_path, capsys):
    out = tmp_path / "set.json"
    # Scale 1/16: 2 MiB per task, one huge page each (below it a task's
    # region is faulted in 4 KiB pages and the arms do the same work).
    args = ["compare", "-q", "clear-target-last", "--scale", str(1 / 16), "--json", str(out)]
    assert cli.main(args + ["--set", "kernel.page_alloc_shuffle=true"]) == 0
    data = json.loads(out.read_text())
    assert data["set"] == {"kernel.page_alloc_shuffle": True}
    arms = data["arm_configs"]
    assert set(arms) == {"sequential", "target-last"}
    assert all(c["kernel"]["page_alloc_shuffle"] is True for c in arms.values())
    # The shuffle moves physical placement, so the result differs from the unshuffled run.
    plain = tmp_path / "plain.json"
    assert cli.main(["compare", "-q", "clear-target-last", "--scale", str(1 / 16), "--json", str(plain)]) == 0
    assert json.loads(plain.read_text())["baseline"] != data["baseline"]
    capsys.readouterr()
    assert cli.main(args + ["--set", "kernel.no_such_key=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "kernel.no_such_key" in err[0]
    assert cli.main(args + ["--set", "novalue"]) == 2


def test_saved_lru_file_compare_prints_mmtests_rows_per_case(tmp_path, capsys):
    def arm(elapsed, ipis):
        return {"lru_file_mmap_read_elapsed_s": elapsed, "lru_file_mmap_read_time_range_s": 0.001,
                "lru_file_mmap_read_time_stddev_s": 0.0005, "user_s": 0.3, "sys_s": 0.5,
                "elapsed_s": elapsed, "ipis_per_s": ipis, "data_verified": True}
    case = {"experiment": "batched-tlb-flush", "baseline_name": "per-page", "baseline": arm(0.0125, 9e6),
            "variants": {"batched": arm(0.0095, 1e6)}, "variant_order": ["batched"]}
    doc = {"experiment": "batched-tlb-flush", "cases": {"a": case, "b": case}, "case_order": ["a", "b"]}
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(doc))
    assert cli.main(["compare", str(path)]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("Ops lru-file-mmap-read-elapsed")]
    assert len(rows) == 2 and "9.50 ( 24.00%)" in rows[0]
    assert "case: a\nmmtests compare" in out and "case: b\nmmtests compare" in out


def test_compare_below_the_smallest_valid_scale_is_refused_unless_forced(tmp_path, capsys):
    assert cli.main(["compare", "-q", "clear-target-last", "--scale", "1/32", "--set", "workload.nr_task=2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "scale: 1/32 is below clear-target-last's smallest valid scale 1/16" in err
    assert "--force-scale" in err
    out = tmp_path / "forced.json"
    assert cli.main(["compare", "-q", "clear-target-last", "--scale", "1/32", "--set", "workload.nr_task=2",
                     "--force-scale", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("SCALE FORCED: 1/32 is below the smallest valid scale 1/16")
    doc = json.loads(out.read_text())
    assert doc["scale_forced"] is True and doc["min_scale"] == 1 / 16
    # The tailored tables carry the mark too.
    assert cli.main(["compare", "-q", "clear-target-last", "--scale", "1/32", "--set", "workload.nr_task=2",
                     "--force-scale", "--format", "lkp"]) == 0
    assert capsys.readouterr().out.startswith("SCALE FORCED:")
    # --force-scale means nothing for saved results.
    assert cli.main(["compare", str(out), "--force-scale"]) == 2
    assert "--force-scale applies to running an experiment" in capsys.readouterr().err

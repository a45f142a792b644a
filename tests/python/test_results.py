"""Provenance, built-ins as TOML, statistics over runs and compare of saved results."""

import json
import re
import subprocess
import sys

import pytest

import vmsim
from vmsim import cli, runtables, stats


def test_every_run_result_carries_provenance(tiny_config):
    r = vmsim.run(tiny_config)
    p = r["provenance"]
    assert p["schema_version"] >= 2 and p["command"] == "run" and p["seeds"] == [0]
    assert p["vmsim_version"] == vmsim.__version__ and p["git_revision"]
    preset = p["machines"]["xeon-e5-2699v3-2s"]
    assert preset["l1d"]["size_kib"] == 32
    assert preset["sources"]["l1d.size_kib"], "each parameter keeps its source"
    assert p["host_seconds"] >= 0


def test_builtins_print_as_toml_that_parses(capsys):
    import tomllib

    assert cli.main(["machines", "--show", "xeon-8358-icx"]) == 0
    doc = tomllib.loads(capsys.readouterr().out)
    assert doc["name"] == "xeon-8358-icx" and doc["l1d"]["size_kib"]["source"]
    assert cli.main(["experiments", "--show", "clear-target-last"]) == 0
    assert tomllib.loads(capsys.readouterr().out)["name"] == "clear-target-last"
    assert cli.main(["machines", "--show", "nope"]) == 2


def test_welch_marks_noise_and_change():
    a = stats.summarise([10.0, 10.2, 9.8, 10.1, 9.9])
    same = stats.summarise([10.1, 9.9, 10.0, 10.2, 9.8])
    moved = stats.summarise([12.0, 12.2, 11.8, 12.1, 11.9])
    assert stats.significant(a, same) is False
    assert stats.significant(a, moved) is True
    assert stats.significant(stats.summarise([1.0]), moved) is None
    assert stats.summarise([3.0, 3.0]).stddev == 0.0


def test_t_critical_beyond_the_table():
    # Published two-sided 5% points of Student's t.
    for df, want in [(1, 12.706), (30, 2.042), (31, 2.0395), (40, 2.0211), (60, 2.0003), (120, 1.9799)]:
        assert abs(stats.t_critical(df) - want) < 5e-4, df
    assert stats.t_critical(10.7) == stats.t_critical(10), "fractional df rounds down"
    assert stats.t_critical(1e9) == pytest.approx(1.95996, abs=1e-4)


def _fake_run(tp, sys_s):
    return {"metrics": {"throughput_bytes_per_s": tp, "sys_s": sys_s, "data_verified": True}, "machine": {"name": "m"}}


def test_compare_saved_results_with_min_change(tmp_path, capsys):
    (tmp_path / "a.json").write_text(json.dumps(_fake_run(10e9, 1.0)))
    (tmp_path / "b.json").write_text(json.dumps(_fake_run(12e9, 1.01)))
    assert cli.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--format", "lkp"]) == 0
    out = capsys.readouterr().out
    assert "+20.0%" in out and "10 GB/s" in out and "12 GB/s" in out and "sys_s" in out
    assert cli.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--min-change", "5"]) == 0
    out = capsys.readouterr().out
    assert "throughput_bytes_per_s" in out and "sys_s" not in out
    # One layout unless asked for both.
    assert "%stddev" in out and "Amean" not in out
    assert cli.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--min-change", "5",
                     "--format", "both"]) == 0
    out = capsys.readouterr().out
    assert "%stddev" in out and "Amean" in out and "CoeffVar" in out


def test_compare_runs_spread_and_significance_from_arms():
    base = ("base", [_fake_run(10e9 + d, 1.0)["metrics"] for d in (0, 1e8, -1e8)])
    new = ("new", [_fake_run(12e9 + d, 1.0)["metrics"] for d in (0, 1e8, -1e8)])
    text = runtables.format_lkp([base, new])
    line = next(l for l in text.splitlines() if l.endswith("throughput_bytes_per_s"))
    assert "±" in line and "+20.0%*" in line
    mm = runtables.format_mmtests([base, new])
    assert any(l.startswith("Amean") and "*" in l for l in mm.splitlines())
    # Names wider than LKP's columns are cut there and given whole below.
    long = ("milan-2m/multipage-2048k", new[1])
    text = runtables.format_lkp([base, long])
    assert "(in full: milan-2m/multipage-2048k)" in text
    assert "in full" not in runtables.format_lkp([base, new])


@pytest.mark.sim
def test_compare_runs_cli_writes_runs_and_provenance(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "vmsim", "compare", "clear-target-last", "--runs", "2", "-j", "2",
                           "--scale", "0.0625", "-q", "--json", str(out)], capture_output=True, text=True, timeout=600)
    # (Scale 1/16: one huge page per task, so the arms differ and rows print.)
    assert proc.returncode == 0, proc.stderr
    # The default is the compact table: the headline, times, IPC and DRAM
    # rows, and the significance result in words.
    assert "%stddev" in proc.stdout and "Amean" not in proc.stdout
    assert len(proc.stdout.splitlines()) < 30
    assert re.search(r"target-last vs sequential: throughput_bytes_per_s [+-][0-9.]+%, (beyond|inside) the noise",
                     proc.stdout)
    doc = json.loads(out.read_text())
    assert doc["kind"] == "compare-runs" and doc["seeds"] == [0, 1] and len(doc["runs"]) == 2
    assert doc["provenance"]["seeds"] == [0, 1]
    # The saved file compares again without re-running.
    again = subprocess.run([sys.executable, "-m", "vmsim", "compare", str(out), "--format", "lkp"],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "%stddev" in again.stdout


@pytest.mark.sim
def test_page_alloc_shuffle_makes_the_seed_matter(tiny_config):
    tiny_config["kernel"]["page_alloc_shuffle"] = True
    tiny_config["workload"].update(nr_task=4, size_per_task_mib=16)
    rows = []
    for seed in (0, 1, 2):
        tiny_config["seed"] = seed
        m = vmsim.run(tiny_config)["metrics"]
        assert m["data_verified"] is True
        rows.append((m["llc_misses"], m["elapsed_s"]))
    assert len(set(rows)) > 1, "the seed decides physical placement once shuffling is on"
    tiny_config["seed"] = 1
    assert (vmsim.run(tiny_config)["metrics"]["llc_misses"], vmsim.run(tiny_config)["metrics"]["elapsed_s"]) == rows[1]


def test_compare_results_from_python(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(_fake_run(10e9, 1.0)))
    text = vmsim.compare_results(tmp_path / "a.json", _fake_run(11e9, 1.0), min_change=5)
    assert "+10.0%" in text and "sys_s" not in text
    assert "Amean" in vmsim.compare_results(_fake_run(1e9, 1.0), _fake_run(2e9, 1.0), layout="mmtests")
    with pytest.raises(vmsim.ConfigError):
        vmsim.compare_results(_fake_run(1e9, 1.0), layout="csv")


def test_to_dataframe_of_sweep_and_runs():
    pytest.importorskip("pandas")
    sweep = {"kind": "sweep", "rows": [{"seed": 0, "elapsed_s": 1.0}, {"seed": 1, "elapsed_s": 2.0}]}
    assert list(vmsim.to_dataframe(sweep)["elapsed_s"]) == [1.0, 2.0]
    arms = {"baseline_name": "a", "baseline": {"x": 1.0}, "variant_order": ["b"], "variants": {"b": {"x": 2.0}}}
    df = vmsim.to_dataframe({"kind": "compare-runs", "seeds": [0, 1], "runs": [arms, arms]})
    assert df.loc[("b", 1), "x"] == 2.0


def test_large_counts_use_one_notation_whatever_their_runs():
    # Identical runs give an integer mean, differing runs a fraction: same notation.
    assert runtables.show("llc_misses", 19474639.0) == runtables.show("llc_misses", 19474639.4) == "1.947e+07"
    assert runtables.show("pgfault", 1152.0) == "1152"


def test_compare_metrics_and_format_apply_without_min_change(tmp_path, capsys):
    # They were ignored unless --min-change was given too.
    args = ["compare", "-q", "clear-target-last", "--scale", str(1 / 256), "--force-scale"]
    assert cli.main(args + ["--metrics", "elapsed_s", "--format", "lkp"]) == 0
    out = capsys.readouterr().out
    assert "%stddev" in out and "Amean" not in out
    assert [l.split()[-1] for l in out.splitlines() if "  elapsed_s" in l or "  sys_s" in l] == ["elapsed_s"]
    (tmp_path / "a.json").write_text(json.dumps(_fake_run(10e9, 1.0)))
    (tmp_path / "b.json").write_text(json.dumps(_fake_run(12e9, 1.01)))
    assert cli.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--metrics", "sys_s",
                     "--format", "mmtests"]) == 0
    out = capsys.readouterr().out
    assert "Amean" in out and "sys_s" in out and "%stddev" not in out and "throughput" not in out


def test_compact_runs_table_and_full_output(monkeypatch, capsys):
    def arm(name, tp, spread):
        return (name, [dict(_fake_run(tp + d, 1.0)["metrics"], ipc=1.0 + d / 1e12, llc_misses=5.0,
                            l2_misses=(tp + d) / 1e6) for d in spread])
    base, new, flat = arm("base", 10e9, (0, 1e8, -1e8)), arm("new", 12e9, (0, 1e8, -1e8)), arm("flat", 10e9, (0, 2e9, -2e9))
    text = runtables.format_compact([base, new, flat])
    lines = text.splitlines()
    rows = [l.split()[-1] for l in lines if l.rstrip().endswith(("_s", "_per_s", "ipc", "_read", "_written", "_misses"))]
    # Only the compact metrics, in their order (llc_misses, a key counter not
    # zero); l2_misses changes but is left to --full.
    assert rows == ["throughput_bytes_per_s", "sys_s", "ipc", "llc_misses"]
    assert "  new vs base: throughput_bytes_per_s +20.0%, beyond the noise (Welch's t-test, 5%; 3 runs per arm)" in lines
    assert "  flat vs base: throughput_bytes_per_s +0.0%, inside the noise (Welch's t-test, 5%; 3 runs per arm)" in lines
    assert lines[-1] == "  1 more metric(s) change: --full shows every one in LKP's and mmtests' layouts"

    # The CLI prints it by default for --runs, and everything with --full.
    doc = {"kind": "compare-runs", "experiment": "clear-target-last", "description": "d", "seeds": [0, 1, 2],
           "runs": [{"baseline_name": "base", "baseline": b, "variant_order": ["new"], "variants": {"new": n}}
                    for b, n in zip(base[1], new[1])]}
    from vmsim import _api
    monkeypatch.setattr(_api, "compare", lambda *a, **kw: doc)
    monkeypatch.setattr(_api, "check_verified", lambda r: None)
    assert cli.main(["compare", "-q", "clear-target-last", "--runs", "3"]) == 0
    out = capsys.readouterr().out
    assert "new vs base" in out and "Amean" not in out and "l2_misses" not in out
    assert cli.main(["compare", "-q", "clear-target-last", "--runs", "3", "--full"]) == 0
    out = capsys.readouterr().out
    assert "Amean" in out and "l2_misses" in out and "new vs base" not in out


def test_base_arm_sets_what_the_statistics_test_against(tmp_path, capsys):
    # --runs tested every arm against the baseline only.
    arms = {"base": 10e9, "new": 12e9, "other": 12.1e9}
    runs = [{"baseline_name": "base", "baseline": _fake_run(arms["base"] + d, 1.0)["metrics"],
             "variant_order": ["new", "other"],
             "variants": {n: _fake_run(arms[n] + d, 1.0)["metrics"] for n in ("new", "other")}}
            for d in (0, 1e8, -1e8)]
    doc = {"kind": "compare-runs", "experiment": "e", "description": "d", "seeds": [0, 1, 2], "runs": runs}
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(doc))
    assert cli.main(["compare", str(path), "--base", "new"]) == 0
    out = capsys.readouterr().out
    header = next(l for l in out.splitlines() if "new" in l and "base" in l)
    assert header.split()[:3] == ["new", "base", "other"]
    row = next(l for l in out.splitlines() if l.endswith("throughput_bytes_per_s"))
    assert "-16.7%" in row and "+0.8%" in row
    records = vmsim.runs_statistics(doc, base="new")
    assert records[0]["arms"][0]["name"] == "new" and records[0]["changes"][0] == pytest.approx(-100 / 6)
    with pytest.raises(vmsim.ConfigError, match="'nope' is not an arm of this result; accepted: base, new, other") as e:
        vmsim.runs_statistics(doc, base="nope")
    assert e.value.key == "base"
    assert "-16.7%" in vmsim.compare_results(doc, base="new")
    assert cli.main(["compare", str(path), "--base", "nope"]) == 2
    err = capsys.readouterr().err
    assert "--base: 'nope' is not an arm" in err and "accepted: base, new, other" in err
    # An experiment's arm is checked before anything runs.
    assert cli.main(["compare", "-q", "clear-target-last", "--runs", "2", "--base", "nope"]) == 2
    err = capsys.readouterr().err
    assert "accepted: sequential, target-last" in err


from concurrent.futures import ThreadPoolExecutor

import pytest

import vmsim


def _rows(result):
    try:
        import pandas as pd
    except ImportError:
        assert isinstance(result, list)
        return result
    assert isinstance(result, pd.DataFrame)
    return result.to_dict("records")


def test_sweep_thread_pool(tiny_config):
    grid = {"workload.nr_task": [1, 2], "kernel.clear_huge_page": ["sequential", "target-last"]}
    with ThreadPoolExecutor(max_workers=2) as ex:
        rows = _rows(vmsim.sweep(grid, tiny_config, executor=ex))
    assert [(r["workload.nr_task"], r["kernel.clear_huge_page"]) for r in rows] == [
        (1, "sequential"), (1, "target-last"), (2, "sequential"), (2, "target-last")]
    for r in rows:
        assert "throughput_bytes_per_s" in r
        assert "per_cpu" not in r
    # each point is the same as a plain run of that config
    cfg = dict(tiny_config, workload=dict(tiny_config["workload"], nr_task=2),
               kernel=dict(tiny_config["kernel"], clear_huge_page="sequential"))
    assert rows[2]["cycles"] == vmsim.run(cfg)["metrics"]["cycles"]


def test_sweep_from_file_with_progress(tiny_toml):
    seen = []
    with ThreadPoolExecutor(max_workers=1) as ex:
        rows = _rows(vmsim.sweep({"workload.nr_task": [1, 2]}, tiny_toml, executor=ex,
                                 progress=lambda label, f: seen.append(f)))
    assert len(rows) == 2
    assert seen == [0.5, 1.0]


def test_sweep_default_process_pool(tiny_config):
    rows = _rows(vmsim.sweep({"seed": [0, 1]}, tiny_config))
    assert [r["seed"] for r in rows] == [0, 1]


def test_sweep_error_propagates(tiny_config):
    with ThreadPoolExecutor(max_workers=1) as ex:
        with pytest.raises(vmsim.ConfigError) as info:
            vmsim.sweep({"workload.bogus": [1]}, tiny_config, executor=ex)
    assert info.value.key == "workload.bogus"


def test_sweep_rejects_bad_grid(tiny_config):
    with pytest.raises(ValueError):
        vmsim.sweep({"workload.nr_task": []}, tiny_config)
    with pytest.raises(ValueError):
        vmsim.sweep({"kernel.thp": "always"}, tiny_config)


def test_plot_compare_with_cases(tmp_path):
    import pytest

    pytest.importorskip("matplotlib")
    from vmsim.plot import plot

    one = {
        "experiment": "e",
        "machine": {"name": "m"},
        "baseline_name": "a",
        "baseline": {"x": 1.0, "same": 2},
        "variants": {"b": {"x": 2.0, "same": 2}},
        "variant_order": ["b"],
    }
    out = tmp_path / "p.png"
    plot({"experiment": "e", "cases": {"c1": one, "c2": one}, "case_order": ["c1", "c2"]}, out)
    assert out.stat().st_size > 0


def _sweep(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "vmsim", "sweep", "-q", *args], capture_output=True, text=True, timeout=300)


def test_sweep_bad_point_is_reported_and_the_rest_run(tiny_toml, tmp_path):
    import json

    out = tmp_path / "s.json"
    proc = _sweep(str(tiny_toml), "--set", 'sim.fault_injection=[{}, {"skip_clear_subpage": 3}]', "-j", "1",
                  "--json", str(out))
    assert proc.returncode == 1, proc.stderr
    assert "1 of 2 sweep point(s) failed" in proc.stderr and "Traceback" not in proc.stderr
    doc = json.loads(out.read_text())
    assert doc["complete"] is True
    assert [r["status"] for r in doc["rows"]] == ["ok", "failed"]
    assert "DataVerificationError" in doc["rows"][1]["error"]


def test_sweep_validates_every_point_first(tiny_toml, tmp_path):
    out = tmp_path / "s.json"
    proc = _sweep(str(tiny_toml), "--set", "workload.nr_task=1,0", "--json", str(out))
    assert proc.returncode == 2
    assert "workload.nr_task" in proc.stderr and "no point was run" in proc.stderr
    assert not out.exists()


def test_sweep_checks_metrics_before_any_point_runs(tiny_toml, tmp_path):
    import time

    out = tmp_path / "s.json"
    t = time.monotonic()
    proc = _sweep(str(tiny_toml), "--set", "seed=0,1,2,3", "-j", "1", "--metrics", "elapsed_s,no_such_metric",
                  "--json", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "--metrics: unknown metric(s) no_such_metric" in proc.stderr and "Traceback" not in proc.stderr
    assert "elapsed_s" in proc.stderr  # the known ones are listed
    assert not out.exists(), "nothing ran, nothing was written"
    # A known metric is accepted and shown.
    proc = _sweep(str(tiny_toml), "--set", "seed=0,1", "-j", "1", "--metrics", "pgfault")
    assert proc.returncode == 0, proc.stderr
    assert "pgfault" in proc.stdout


def test_metric_names_match_a_run(tiny_config):
    import json

    from vmsim import _core

    names = _core.metric_names(json.dumps(tiny_config), "json")
    metrics = vmsim.run(tiny_config)["metrics"]
    scalar = sorted(k for k, v in metrics.items() if isinstance(v, (int, float, str, bool)))
    assert names == scalar


def test_sweep_resume_runs_only_missing_points(tiny_toml, tmp_path):
    import json

    out = tmp_path / "s.json"
    assert _sweep(str(tiny_toml), "--set", "seed=0,1,2", "-j", "1", "--json", str(out)).returncode == 0
    doc = json.loads(out.read_text())
    # As if killed after the first point: one row on disk, marked incomplete.
    marker = dict(doc["rows"][0], elapsed_s=-1.0)  # a value no run gives: shows the row was kept, not re-run
    doc["rows"], doc["complete"] = [marker], False
    out.write_text(json.dumps(doc))
    proc = _sweep(str(tiny_toml), "--set", "seed=0,1,2", "-j", "1", "--json", str(out), "--resume")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [r["seed"] for r in rows] == [0, 1, 2]
    assert rows[0]["elapsed_s"] == -1.0 and rows[1]["elapsed_s"] > 0
    # Another grid cannot resume this file.
    proc = _sweep(str(tiny_toml), "--set", "seed=5,6", "--json", str(out), "--resume")
    assert proc.returncode == 2 and "another config or grid (seed drops 0, 1, 2)" in proc.stderr
    proc = _sweep(str(tiny_toml), "--set", "seed=0,1,2", "--set", "workload.nr_task=1", "--json", str(out), "--resume")
    assert proc.returncode == 2 and "its keys are seed, not seed, workload.nr_task" in proc.stderr


def test_sweep_resume_extends_the_grid_running_only_new_points(tiny_toml, tmp_path):
    import json

    pd = pytest.importorskip("pandas")
    out, csv = tmp_path / "s.json", tmp_path / "s.csv"
    grid = ("--set", "workload.nr_task=1,2", "--set", "seed=0")
    assert _sweep(str(tiny_toml), *grid, "-j", "1", "--json", str(out)).returncode == 0
    doc = json.loads(out.read_text())
    for r in doc["rows"]:
        r["elapsed_s"] = -1.0 - r["workload.nr_task"]  # no run gives these: a kept row keeps them
    out.write_text(json.dumps(doc))
    # A new value of each key: the points (1|2|4) x (0|1) less the two done.
    proc = _sweep(str(tiny_toml), "--set", "workload.nr_task=1,2,4", "--set", "seed=0,1", "-j", "1",
                  "--json", str(out), "--resume", "--csv", str(csv))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["grid"] == {"workload.nr_task": [1, 2, 4], "seed": [0, 1]} and doc["complete"] is True
    rows = doc["rows"]
    assert [(r["workload.nr_task"], r["seed"]) for r in rows] == [(1, 0), (1, 1), (2, 0), (2, 1), (4, 0), (4, 1)]
    kept = [r["elapsed_s"] for r in rows if r["elapsed_s"] < 0]
    assert kept == [-2.0, -3.0] and sum(r["elapsed_s"] > 0 for r in rows) == 4
    # The table's first columns are the swept keys, in the grid's order,
    # though the kept rows came back from JSON with sorted keys.
    table = pd.read_csv(csv)
    assert list(table.columns[:3]) == ["workload.nr_task", "seed", "throughput_bytes_per_s"]
    assert list(table.columns[-1:]) == ["status"] and len(table) == 6


def test_sweep_columns_put_the_swept_keys_first():
    from vmsim._api import grid_extension_problem, sweep_columns

    rows = [{"b": 1, "a": 2, "elapsed_s": 1.0, "status": "ok", "throughput_bytes_per_s": 3.0, "zz": 1},
            {"a": 3, "b": 1, "error": "E", "status": "failed"}]
    assert sweep_columns(rows, ["b", "a"]) == ["b", "a", "throughput_bytes_per_s", "elapsed_s", "zz", "status", "error"]
    assert grid_extension_problem({"k": [1, 2]}, {"k": [1, 2]}) is None
    assert grid_extension_problem({"k": [1, 2]}, {"k": [3, 1, 2]}) is None
    assert grid_extension_problem({"k": [1, 2]}, {"k": [1]}) == "k drops 2"
    assert grid_extension_problem({"k": [1], "j": [1]}, {"j": [1], "k": [1]}) is None
    assert grid_extension_problem({"k": [1], "j": [1]}, {"k": [1]}) == "its keys are j, k, not k"
    assert grid_extension_problem(None, {"k": [1]}) == "it has no grid"


def test_sweep_csv_and_parquet(tiny_toml, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    csv, pq = tmp_path / "s.csv", tmp_path / "s.parquet"
    assert _sweep(str(tiny_toml), "--set", "seed=0,1", "-j", "1", "--csv", str(csv), "--parquet", str(pq)).returncode == 0
    a, b = pd.read_csv(csv), pd.read_parquet(pq)
    assert list(a["seed"]) == [0, 1] and list(b["seed"]) == [0, 1]
    assert (b["throughput_bytes_per_s"] > 0).all()

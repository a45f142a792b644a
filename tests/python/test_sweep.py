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

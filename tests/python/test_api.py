import os
import json
import pickle
import threading
from pathlib import Path

import pytest

import vmsim
from vmsim import _core
from vmsim._config import load_text, set_dotted

BAD_CONFIG = {"machine": "xeon-e5-2699v3-2s", "workload": {"kind": "usemem", "bogus": 1}}


def test_exception_hierarchy():
    assert issubclass(vmsim.VmsimError, Exception)
    assert issubclass(vmsim.ConfigError, vmsim.VmsimError)
    assert issubclass(vmsim.ConfigError, ValueError)
    assert issubclass(vmsim.DataVerificationError, vmsim.VmsimError)
    assert issubclass(vmsim.HwError, vmsim.VmsimError)
    assert issubclass(vmsim.HwUnsupportedError, vmsim.HwError)
    for exc in (vmsim.VmsimError, vmsim.ConfigError, vmsim.DataVerificationError,
                vmsim.HwError, vmsim.HwUnsupportedError):
        assert exc.__module__ == "vmsim._core"
        assert getattr(_core, exc.__name__) is exc


def test_config_error_names_dotted_key():
    with pytest.raises(vmsim.ConfigError) as info:
        vmsim.run(BAD_CONFIG)
    err = info.value
    assert err.key == "workload.bogus"
    assert err.message
    assert str(err).startswith("workload.bogus")
    # ValueError too, so generic code can catch it
    assert isinstance(err, ValueError)


def test_config_error_pickles_with_attributes():
    with pytest.raises(vmsim.ConfigError) as info:
        vmsim.run(BAD_CONFIG)
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is vmsim.ConfigError
    assert copy.key == info.value.key and copy.message == info.value.message


def test_unknown_machine_is_config_error(tiny_config):
    tiny_config["machine"] = "no-such-machine"
    with pytest.raises(vmsim.ConfigError) as info:
        vmsim.run(tiny_config)
    assert info.value.key == "machine"


def test_bad_toml_text_is_config_error():
    with pytest.raises(vmsim.ConfigError):
        vmsim.run("this is [not toml")


def test_missing_config_file():
    with pytest.raises(FileNotFoundError):
        vmsim.run("/nonexistent/dir/run.toml")
    with pytest.raises(FileNotFoundError):
        vmsim.run(Path("/nonexistent/dir/run.json"))


def test_unknown_experiment_is_config_error():
    with pytest.raises(vmsim.ConfigError):
        vmsim.compare("no-such-experiment")


def test_bad_format_argument():
    with pytest.raises(ValueError):
        _core.run_config("{}", "yaml", None, None)


def test_listings():
    machines = vmsim.machines()
    experiments = vmsim.experiments()
    assert "xeon-e5-2699v3-2s" in machines
    assert "clear-target-last" in experiments
    for listing in (machines, experiments):
        for name, description in listing.items():
            assert name and isinstance(description, str)


def _check_run_result(result):
    assert set(result) >= {"config", "machine", "scale", "metrics"}
    assert set(result["machine"]) >= {"name", "description", "summary"}
    assert result["machine"]["name"] == "xeon-e5-2699v3-2s"
    m = result["metrics"]
    for key in ("throughput_bytes_per_s", "elapsed_s", "instructions", "cycles", "data_verified"):
        assert key in m
    assert isinstance(m["per_cpu"], list)


def test_run_dict_toml_file_and_text_agree(tiny_config, tiny_toml):
    from_dict = vmsim.run(tiny_config)
    from_file = vmsim.run(tiny_toml)
    from_str_path = vmsim.run(str(tiny_toml))
    from_text = vmsim.run(tiny_toml.read_text())
    _check_run_result(from_dict)
    assert from_dict["metrics"] == from_file["metrics"] == from_str_path["metrics"] == from_text["metrics"]


def test_run_json_file(tiny_config, tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(tiny_config))
    assert vmsim.run(path)["metrics"] == vmsim.run(tiny_config)["metrics"]


def test_load_text_base_dir(tiny_toml):
    text, fmt, base = load_text(tiny_toml)
    assert fmt == "toml" and base == str(tiny_toml.resolve().parent)
    _, fmt, base = load_text({"a": 1})
    assert fmt == "json" and base is None
    _, _, base = load_text({"a": 1}, base_dir=tiny_toml.parent)
    assert base == str(tiny_toml.parent)


def test_set_dotted():
    cfg = {"workload": {"kind": "usemem"}}
    set_dotted(cfg, "workload.nr_task", 4)
    set_dotted(cfg, "kernel.thp", "never")
    assert cfg == {"workload": {"kind": "usemem", "nr_task": 4}, "kernel": {"thp": "never"}}
    with pytest.raises(ValueError):
        set_dotted(cfg, "workload.kind.x", 1)
    with pytest.raises(ValueError):
        set_dotted(cfg, "a..b", 1)


def test_run_is_deterministic(tiny_config):
    a, b = vmsim.run(tiny_config), vmsim.run(tiny_config)
    # Everything but the host time the run took.
    assert a["provenance"].pop("host_seconds") >= 0
    b["provenance"].pop("host_seconds")
    assert a == b


def test_progress_callback_arguments(tiny_config):
    calls = []
    vmsim.run(tiny_config, progress=lambda label, f: calls.append((label, f)))
    for label, fraction in calls:
        assert isinstance(label, str)
        assert 0.0 <= fraction <= 1.0


def test_compare_shape():
    result = vmsim.compare("clear-target-last", scale=1 / 256, force_scale=True)
    assert result["experiment"] == "clear-target-last"
    assert result["seed"] == 0
    assert result["baseline_name"]
    assert result["variant_order"]
    assert set(result["variant_order"]) == set(result["variants"])
    assert set(result["baseline"]) >= {"throughput_bytes_per_s", "data_verified"}


# Children on both sockets, the windowed run loop (one run over host threads).
WINDOWED = {
    "machine": "xeon-e5-2699v3-2s",
    "kernel": {"thp": "always"},
    "workload": {"kind": "usemem", "nr_task": 24, "size_per_task_mib": 1},
    "sim": {"window_cycles": "auto"},
}


@pytest.mark.sim
def test_a_windowed_run_is_the_same_on_any_number_of_host_threads():
    one, two = vmsim.run(WINDOWED, threads=1), vmsim.run(WINDOWED, threads=2)
    assert one["metrics"] == two["metrics"]
    assert one["metrics"]["windows"]["accesses_partitioned"] > 0
    assert one["config"]["sim"]["window_cycles"] == 247
    assert (one["provenance"]["host_threads"], two["provenance"]["host_threads"]) == (1, 2)


def test_run_threads_and_window_are_checked():
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(vmsim.ConfigError, match="threads"):
            vmsim.run(WINDOWED, threads=bad)
    too_long = {**WINDOWED, "sim": {"window_cycles": 248}}
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.run(too_long)
    assert e.value.key == "sim.window_cycles"
    assert "1..=247" in str(e.value)


def test_compare_threads_are_checked():
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(vmsim.ConfigError, match="threads"):
            vmsim.compare("clear-target-last", scale=1 / 256, force_scale=True, threads=bad)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_default_parallelism_follows_the_cpus_this_process_may_use(monkeypatch, tiny_config):
    # compare's threads, a sweep's and --runs' worker processes all size
    # themselves from the CPUs this process may use, not the host's count.
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert vmsim._api.default_threads() == 1
    asked = []

    def pool(jobs):
        asked.append(jobs)
        return ThreadPoolExecutor(max_workers=jobs)

    # Where the commands look the pool up (vmsim._api re-exports it).
    monkeypatch.setattr(vmsim._pool, "process_pool", pool)
    rows = vmsim._api.sweep_rows({"seed": [0, 1]}, tiny_config)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert asked == [1]


def test_runs_release_the_gil(tiny_config):
    # Several runs on threads must all finish (and agree).
    results = [None] * 3

    def work(i):
        results[i] = vmsim.run(tiny_config)["metrics"]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert results[0] is not None and results[0] == results[1] == results[2]


@pytest.mark.sim
def test_progress_callback_exception_stops_run():
    class Stop(Exception):
        pass

    def progress(label, fraction):
        raise Stop(label)

    with pytest.raises(Stop):
        vmsim.compare("clear-target-last", scale=1 / 256, force_scale=True, progress=progress)


@pytest.mark.sim
def test_tiny_run_results_are_plausible(tiny_config):
    m = vmsim.run(tiny_config)["metrics"]
    assert m["data_verified"] is True
    assert m["throughput_bytes_per_s"] > 0
    assert m["elapsed_s"] > 0
    assert m["instructions"] > 0 and m["cycles"] > 0
    assert 0.0 <= m["llc_miss_rate"] <= 1.0
    assert m["thp_fault_alloc"] > 0  # thp=always, sizes in whole huge pages
    assert len(m["per_cpu"]) >= tiny_config["workload"]["nr_task"]


def test_to_dataframe():
    pd = pytest.importorskip("pandas")
    result = vmsim.compare("clear-target-last", scale=1 / 256, force_scale=True)
    df = vmsim.to_dataframe(result)
    assert isinstance(df, pd.DataFrame)
    assert list(df.index) == [result["baseline_name"]] + result["variant_order"]
    assert "throughput_bytes_per_s" in df.columns
    assert "per_cpu" not in df.columns
    cpus = vmsim.to_dataframe(result, per_cpu=True)
    assert "run" in cpus.columns and "cpu" in cpus.columns


@pytest.mark.sim
def test_pmbench_with_numa_balancing_from_python():
    cfg = {
        "machine": "xeon-e5-2699v3-2s",
        "kernel": {
            "thp": "never",
            "numa_balancing": True,
            "numa_hint_fault": "map-then-migrate",
            "numa_balancing_scan_delay_ms": 1,
            "numa_balancing_scan_period_min_ms": 1,
            "numa_balancing_scan_size_mb": 4,
        },
        "workload": {
            "kind": "pmbench",
            "nr_processes": 2,
            "nr_threads": 2,
            "mapsize_mib": 16,
            "duration_s": 0.03,
            "bind_node": 1,
            "node_memory_mib": 64,
            "eater_mib": 48,
            "eater_node": 1,
            "eater_exit_s": 0.02,
        },
    }
    m = vmsim.run(cfg)["metrics"]
    assert m["data_verified"] is True
    assert m["pmbench_throughput_aps"] > 0
    assert m["numa_pages_migrated"] > 0
    assert m["tlb_shootdown_interrupts"] > 0
    assert 0 < m["try_to_unmap_cycles_share"] < 1


def test_experiment_plan_comes_from_the_core():
    from vmsim import _api
    plan = _api.experiment_plan("batched-tlb-flush")
    assert [c["name"] for c in plan["cases"]] == ["e5-2699v3-2s", "e5-4655v3-4n", "e5-1650v3-1s", "milan-7j13"]
    milan = plan["cases"][-1]
    # A variant that names its cases runs only there.
    assert [a["name"] for a in milan["arms"]] == ["per-page", "batched", "broadcast"]
    assert [a["baseline"] for a in milan["arms"]] == [True, False, False]
    assert milan["arms"][2]["config"]["kernel"]["tlb_flush_on_unmap"] == "broadcast"
    assert milan["arms"][0]["config"]["machine"] == "epyc-7j13-milan"
    assert "lru_file_mmap_read_elapsed_s" in milan["arms"][0]["metrics"]
    # The plan and the run agree on the configs and the metric names.
    plan = _api.experiment_plan("clear-target-last", scale=1 / 16, settings={"workload.nr_task": 2})
    assert plan["cases"][0]["name"] is None
    arms = plan["cases"][0]["arms"]
    assert [a["config"]["workload"]["nr_task"] for a in arms] == [2, 2]
    names = _api.experiment_metric_names("clear-target-last", {"workload.nr_task": 2}, 1 / 16)
    assert names == sorted(set(arms[0]["metrics"]) | set(arms[1]["metrics"]))
    assert "throughput_bytes_per_s" in names


def test_experiment_plan_refuses_what_compare_refuses():
    from vmsim import _api
    with pytest.raises(vmsim.ConfigError) as e:
        _api.experiment_plan("clear-target-last", settings={"kernel.clear_huge_page": "sequential"})
    assert e.value.key == "set.kernel.clear_huge_page"
    assert "baseline arm 'sequential' sets kernel.clear_huge_page itself" in e.value.message
    with pytest.raises(vmsim.ConfigError) as e:
        _api.experiment_plan("clear-target-last", scale=0.0)
    assert e.value.key == "scale"
    with pytest.raises(vmsim.ConfigError) as e:
        _api.experiment_plan("no-such-experiment")
    assert e.value.key == "experiment"


def test_compare_refuses_a_scale_below_the_smallest_valid_one():
    # At 1/32 each clear-target-last task is under a huge page: both arms do
    # the same work and every change reads 0. The scale is refused before
    # anything runs, naming the smallest valid scale and why.
    from vmsim import _api
    plan = _api.experiment_plan("clear-target-last")
    assert plan["min_scale"] == 1 / 16 and "huge page" in plan["min_scale_why"]
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.compare("clear-target-last", scale=1 / 32, set={"workload.nr_task": 2})
    assert e.value.key == "scale"
    assert "smallest valid scale 1/16" in e.value.message and "huge page" in e.value.message
    assert "\n" not in str(e.value)
    # The experiment's measured quick scale is named too.
    assert plan["quick_scale"]["scale"] == 0.5 and plan["quick_scale"]["tolerance"] > 0
    assert "+26.31% at scale 1" in plan["quick_scale"]["measured"]
    assert "its quick scale is 1/2, measured within 0.6 percentage points" in e.value.message
    # numa-delay-map's was measured against its default scale 1/128 (its
    # scale 1 has not been run), and the refusal says so.
    numa = _api.experiment_plan("numa-delay-map")
    assert numa["scale"] == 1 / 128 and numa["quick_scale"]["scale"] == 1 / 256
    assert "at the default scale 1/128" in numa["quick_scale"]["measured"]
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.compare("numa-delay-map", scale=1 / 2048)
    assert e.value.key == "scale"
    assert "its quick scale is 1/256, measured within 1.2 percentage points of scale 1/128's" in e.value.message
    for bad in (1, "yes", None):
        with pytest.raises(vmsim.ConfigError) as e:
            vmsim.compare("clear-target-last", scale=1 / 32, force_scale=bad)
        assert e.value.key == "force_scale"


def test_compare_forced_below_the_smallest_valid_scale_is_marked():
    result = vmsim.compare("clear-target-last", scale=1 / 32, set={"workload.nr_task": 2}, force_scale=True)
    assert result["scale_forced"] is True
    assert result["scale_factor"] == 1 / 32 and result["min_scale"] == 1 / 16
    assert "huge page" in result["min_scale_why"]
    from vmsim.tables import format_compare
    first = format_compare(result).splitlines()[0]
    assert first.startswith("SCALE FORCED: 1/32 is below the smallest valid scale 1/16")
    # At or above the smallest valid scale nothing is marked, forced or not.
    ok = vmsim.compare("clear-target-last", scale=1 / 16, set={"workload.nr_task": 2}, force_scale=True)
    assert "scale_forced" not in ok and not format_compare(ok).startswith("SCALE FORCED")


def test_compare_runs_gives_the_clis_statistics(tmp_path, capsys):
    # compare(runs=N) is `vmsim compare --runs N`: the same document, the
    # same tables (mean, stddev, Welch's test), from the same code.
    from vmsim import cli
    kw = dict(scale=1 / 16, set={"workload.nr_task": 2, "kernel.page_alloc_shuffle": True}, jobs=1)
    doc = vmsim.compare("clear-target-last", runs=2, seed=5, **kw)
    assert doc["kind"] == "compare-runs" and doc["seeds"] == [5, 6] and len(doc["runs"]) == 2
    out = tmp_path / "runs.json"
    assert cli.main(["compare", "-q", "clear-target-last", "--runs", "2", "--seed", "5", "-j", "1", "--scale", "1/16",
                     "--set", "workload.nr_task=2", "--set", "kernel.page_alloc_shuffle=true", "--format", "lkp",
                     "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    saved = json.loads(out.read_text())
    def bare(runs):
        return [{k: v for k, v in r.items() if k != "provenance"} for r in runs]
    assert bare(saved["runs"]) == bare(doc["runs"]) and saved["seeds"] == doc["seeds"]
    table = vmsim.compare_results(doc, layout="lkp")
    assert table.strip() and table in printed
    stats = vmsim.runs_statistics(doc)
    head = next(r for r in stats if r["metric"] == "throughput_bytes_per_s")
    assert [a["name"] for a in head["arms"]] == ["sequential", "target-last"]
    assert all(a["n"] == 2 for a in head["arms"]) and head["significant"][0] in (True, False)
    means = [sum(r[k]["throughput_bytes_per_s"] for r in doc["runs"]) / 2 for k in ("baseline",)]
    assert head["arms"][0]["mean"] == pytest.approx(means[0])
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(vmsim.ConfigError) as e:
            vmsim.compare("clear-target-last", runs=bad)
        assert e.value.key == "runs"
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.compare("clear-target-last", runs=2, jobs=0)
    assert e.value.key == "jobs"
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.compare("clear-target-last", runs=2, scale=1 / 32)
    assert e.value.key == "scale"


def test_a_scale_below_the_quick_scale_is_noted(capsys):
    from vmsim import _api, cli
    note = _api.quick_scale_note("clear-target-last", 1 / 16)
    assert note.startswith("1/16 is below clear-target-last's quick scale 1/2, the smallest measured to give "
                           "scale 1's headline change within 0.6 percentage points: this answer may differ")
    assert _api.quick_scale_note("clear-target-last", 0.5) is None
    assert _api.quick_scale_note("clear-target-last", None) is None
    assert _api.quick_scale_note("numa-delay-map", 0.01) is None  # above its quick scale 1/256
    assert _api.quick_scale_note("numa-delay-map", 1 / 512).startswith(
        "1/512 is below numa-delay-map's quick scale 1/256, the smallest measured to give scale 1/128's headline "
        "change within 1.2 percentage points: this answer may differ from scale 1/128's by more")
    # The CLI says it on stderr under the answer (an error stays one line).
    assert cli.main(["compare", "-q", "clear-target-last", "--scale", "1/16", "--set", "kernel.no_such_key=1"]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1
    assert cli.main(["compare", "-q", "clear-target-last", "--scale", "1/16", "--set", "workload.nr_task=2"]) == 0
    err = capsys.readouterr().err
    # And that two tasks of 2 MiB map less than the LLC, where the real run's
    # tasks mapped a thousand times more (the ledger's regime).
    first, regime = err.splitlines()
    assert first.startswith("vmsim: note: 1/16 is below clear-target-last's quick scale 1/2")
    assert regime == ("vmsim: note: regime: clear-target-last: the memory mapped by the tasks (4 MiB) is 0.044 x the "
                      "LLC (90 MiB), where the real run's was 1.46e+03 x its LLC: they lie on different sides of it")


def test_spinlocks_from_python_report_lock_stat_and_refuse_unknown_names():
    cfg = {"machine": "xeon-e5-2699v3-2s", "seed": 3,
           "kernel": {"spinlocks": "queued", "tlb_flush_on_unmap": "batched"},
           "workload": {"kind": "lru-file-mmap-read", "nr_task": 8, "ram_mib": 16}}
    m = vmsim.run(cfg)["metrics"]
    assert m["data_verified"] is True
    assert m["lock_stat"]["&mapping->tree_lock"]["acquisitions"] > 0
    assert m["lock_stat"]["&zone->lru_lock"]["acquisitions"] > 0
    cfg["kernel"]["spinlocks"] = "mcs"
    with pytest.raises(vmsim.ConfigError) as info:
        vmsim.run(cfg)
    assert info.value.key == "kernel.spinlocks"
    assert "ticket" in info.value.message and "queued" in info.value.message


def test_pte_locks_from_python_count_in_lock_stat_and_name_what_they_need():
    kernel = {"struct_pages": True, "spinlocks": "queued", "page_tables": True, "pte_locks": True}
    cfg = {"machine": "xeon-e5-2699v3-2s", "seed": 3, "kernel": kernel,
           "workload": {"kind": "lru-file-mmap-read", "nr_task": 8, "ram_mib": 16}}
    m = vmsim.run(cfg)["metrics"]
    assert m["data_verified"] is True
    # Faults install under it, and reclaim's rmap walks take it per PTE.
    assert m["lock_stat"]["&(ptlock_ptr(page))->rlock"]["acquisitions"] > m["pgfault"]
    bad = dict(cfg, kernel=dict(kernel, struct_pages=False))
    with pytest.raises(vmsim.ConfigError) as info:
        vmsim.run(bad)
    assert info.value.key == "kernel.pte_locks"
    assert "kernel.struct_pages" in str(info.value)


def test_wakeups_from_python_report_idle_exits_and_refuse_non_booleans():
    cfg = {"machine": "xeon-e5-2699v3-2s", "seed": 0,
           "kernel": {"thp": "always", "wakeups": True},
           "workload": {"kind": "usemem", "nr_task": 8, "size_per_task_mib": 2,
                        "prealloc": True, "prefault": True}}
    m = vmsim.run(cfg)["metrics"]
    assert m["data_verified"] is True
    # The forked children and the ones the parent's "go" wakes start on idle CPUs.
    assert sum(m["counters"]["idle"]["exits"].values()) >= 8
    off = vmsim.run(dict(cfg, kernel={"thp": "always"}))["metrics"]
    assert sum(off["counters"]["idle"]["exits"].values()) == 0
    with pytest.raises(vmsim.ConfigError) as info:
        vmsim.run(dict(cfg, kernel={"wakeups": "yes"}))
    assert info.value.key == "kernel.wakeups"


def test_page_tables_and_rwsems_from_python_report_their_metrics_and_refuse_non_booleans():
    cfg = {"machine": "xeon-e5-2699v3-2s", "seed": 3,
           "kernel": {"page_tables": True, "rwsems": True},
           "workload": {"kind": "lru-file-mmap-read", "nr_task": 8, "ram_mib": 16}}
    m = vmsim.run(cfg)["metrics"]
    assert m["data_verified"] is True
    assert m["pgtable_alloc"] == m["pgtable_free"] > 0
    assert m["nr_page_table_pages"] == 0
    assert sum(m["page_walker_loads"].values()) == m["tlb_walks"]
    assert m["lock_stat"]["&mm->mmap_lock"]["acquisitions"] >= m["pgfault"]
    assert m["lock_stat"]["&mapping->i_mmap_rwsem"]["acquisitions"] > 0
    for key in ("page_tables", "rwsems"):
        bad = dict(cfg, kernel=dict(cfg["kernel"], **{key: "yes"}))
        with pytest.raises(vmsim.ConfigError) as info:
            vmsim.run(bad)
        assert info.value.key == f"kernel.{key}"

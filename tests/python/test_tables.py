"""Formatting of tables, on fabricated results (no simulation)."""

import pytest

from vmsim.tables import (
    format_change,
    format_compare,
    format_run,
    format_tree,
    format_value,
    metric_names,
    percent_change,
)

MACHINE = {"name": "test-machine", "description": "a test machine", "summary": "2 sockets, 4 threads"}


def _metrics(**over):
    m = {
        "data_verified": True,
        "zz_new_counter": 7,
        "throughput_bytes_per_s": 1.234e10,
        "elapsed_s": 0.5,
        "instructions": 1000,
        "llc_miss_rate": 0.25,
        "aa_new_ratio": 0.5,
        "per_cpu": [{"cpu": 0, "cycles": 1}],
        "pgfault_by_kind": {"anon": 1, "thp": 2},
        "nr_tlb_remote_flush": 0,
    }
    m.update(over)
    return m


COMPARE = {
    "experiment": "clear-target-last",
    "description": "clear the faulting sub-page last",
    "machine": MACHINE,
    "scale": "1/64",
    "seed": 0,
    "config": {},
    "baseline_name": "sequential",
    "baseline": _metrics(),
    "variants": {
        "target-last": _metrics(throughput_bytes_per_s=1.414e10, elapsed_s=0.4, instructions=1000,
                                nr_tlb_remote_flush=5, data_verified=True),
        "other": _metrics(throughput_bytes_per_s=1.0e10, extra_only_here=3),
    },
    "variant_order": ["target-last", "other"],
}


def test_metric_order_known_first_then_sorted():
    names = metric_names(_metrics())
    assert names == [
        "throughput_bytes_per_s", "elapsed_s", "instructions", "llc_miss_rate",
        "nr_tlb_remote_flush", "data_verified", "aa_new_ratio", "zz_new_counter",
    ]
    # nested values (lists, objects) are not table rows
    assert "per_cpu" not in names and "pgfault_by_kind" not in names


def test_format_value():
    assert format_value(True) == "true"
    assert format_value(False) == "false"
    assert format_value(123456789012) == "123456789012"
    assert format_value(0) == "0"
    assert format_value(1.234e10) == "1.234e+10"
    assert format_value(0.25) == "0.25"
    assert format_value(1.23456) == "1.235"
    assert format_value(12345.678) == "12345.7"
    assert format_value(2.5e-5) == "2.500e-05"
    assert format_value(0.0) == "0"
    assert format_value(None) == "-"
    assert format_value(float("nan")) == "nan"


def test_percent_change():
    assert percent_change(100, 114.6) == pytest.approx(14.6)
    assert percent_change(-10, -5) == pytest.approx(50.0)
    assert percent_change(0, 5) is None
    assert percent_change(True, False) is None
    assert percent_change("a", 1) is None
    assert percent_change(1, None) is None
    assert format_change(1.234e10, 1.414e10) == "+14.6%"
    assert format_change(0.5, 0.4) == "-20.0%"
    assert format_change(3, 3) == "+0.0%"
    assert format_change(0, 3) == ""
    assert format_change(True, True) == ""


def test_compare_table():
    text = format_compare(COMPARE, full=True)
    lines = text.splitlines()
    assert lines[0] == "experiment: clear-target-last — clear the faulting sub-page last"
    assert lines[1] == "machine:    test-machine — 2 sockets, 4 threads"
    assert lines[2] == "scale:      1/64   seed: 0"
    assert lines[3] == ""
    header, dashes = lines[4], lines[5]
    assert header.split() == ["sequential", "%change", "target-last", "%change", "other"]
    assert set(dashes.replace(" ", "")) == {"-"}
    rows = {line.split()[-1]: line.split()[:-1] for line in lines[6:]}
    # Units from the metric's kind, one per row (the largest its values reach).
    assert rows["throughput_bytes_per_s"] == ["12.34", "GB/s", "+14.6%", "14.14", "GB/s", "-19.0%", "10", "GB/s"]
    assert rows["elapsed_s"] == ["500.0", "ms", "-20.0%", "400.0", "ms", "+0.0%", "500.0", "ms"]
    assert rows["instructions"] == ["1000", "+0.0%", "1000", "+0.0%", "1000"]
    # baseline 0: no %change
    assert rows["nr_tlb_remote_flush"] == ["0", "5", "0"]
    assert rows["data_verified"] == ["true", "true", "true"]
    # a metric only one variant has: '-' elsewhere
    assert rows["extra_only_here"] == ["-", "-", "3"]
    # metric rows in table order
    names = [line.split()[-1] for line in lines[6:]]
    assert names[:2] == ["throughput_bytes_per_s", "elapsed_s"]
    assert names.index("data_verified") < names.index("aa_new_ratio")
    # columns line up: every row as wide up to the name column as the dash line
    for line in lines[6:]:
        assert line[: len(dashes)].rstrip() != "" and line[len(dashes):].startswith("  ")
        assert line[len(dashes) + 2:] == line.split()[-1]


def test_compare_table_is_deterministic():
    assert format_compare(COMPARE) == format_compare(dict(COMPARE))


def test_run_table():
    result = {"config": {}, "machine": MACHINE, "scale": "1/64", "metrics": _metrics()}
    lines = format_run(result, full=True).splitlines()
    assert lines[0] == "machine: test-machine — 2 sockets, 4 threads"
    assert lines[1] == "scale:   1/64"
    body = [line.split() for line in lines[3:]]
    assert body[0] == ["throughput_bytes_per_s", "12.34", "GB/s"]
    assert ["elapsed_s", "500.0", "ms"] in body
    assert ["data_verified", "true"] in body and ["instructions", "1000"] in body
    assert all(len(row) in (2, 3) for row in body)
    assert not any(row[0] == "per_cpu" for row in body)


def test_tree_format():
    text = format_tree({
        "command": "clear",
        "options": {"size_mib": 64},
        "results": [{"order": "sequential", "gb_per_s": 10.5}, {"order": "target-last", "gb_per_s": 10.25}],
    })
    lines = text.splitlines()
    assert lines[0].split() == ["command", "clear"]
    assert lines[1].split() == ["options.size_mib", "64"]
    assert "results:" in lines
    i = lines.index("results:")
    assert lines[i + 1].split() == ["order", "gb_per_s"]
    assert lines[i + 3].split() == ["sequential", "10.5"]
    assert lines[i + 4].split() == ["target-last", "10.25"]


def test_compare_with_cases_prints_one_table_per_case():
    from vmsim.tables import format_compare, iter_scalar_rows

    one = {
        "experiment": "e",
        "machine": {"name": "m", "summary": "s"},
        "baseline_name": "a",
        "baseline": {"x": 1.0},
        "variants": {"b": {"x": 2.0}},
        "variant_order": ["b"],
    }
    res = {"experiment": "e", "cases": {"c2": one, "c1": one}, "case_order": ["c2", "c1"]}
    text = format_compare(res)
    assert text.index("case: c2") < text.index("case: c1")
    assert text.count("+100.0%") == 2
    assert [n for n, _ in iter_scalar_rows(res)] == ["c2/a", "c2/b", "c1/a", "c1/b"]


def test_lru_file_mmap_read_compare_prints_mmtests_rows_with_gains():
    base = {"lru_file_mmap_read_elapsed_s": 0.010, "lru_file_mmap_read_time_range_s": 0.004,
            "lru_file_mmap_read_time_stddev_s": 0.001, "user_s": 0.3, "sys_s": 0.5,
            "elapsed_s": 0.012, "ipis_per_s": 9.0e6}
    var = dict(base, lru_file_mmap_read_elapsed_s=0.0075, lru_file_mmap_read_time_stddev_s=0.0015,
               ipis_per_s=1.0e6)
    result = {"experiment": "batched-tlb-flush", "baseline_name": "per-page", "baseline": base,
              "variants": {"batched": var}, "variant_order": ["batched"]}
    text = format_compare(result)
    rows = {line.split("  ")[0].strip(): line for line in text.splitlines() if line.startswith("Ops ")}
    # mmtests' sign: a shorter time is a positive gain, a wider spread a negative one.
    assert "7.50 ( 25.00%)" in rows["Ops lru-file-mmap-read-elapsed"]
    assert "10.00 (  0.00%)" in rows["Ops lru-file-mmap-read-elapsed"]
    assert "1.50 (-50.00%)" in rows["Ops lru-file-mmap-read-time_stddv"]
    assert "Ops lru-file-mmap-read-time_range" in rows
    ipis = [line for line in text.splitlines() if line.startswith("IPIs/s")][0].split()
    assert ipis[1:] == ["9000000", "1000000"]
    # Other workloads get no mmtests block.
    other = dict(result, baseline={"elapsed_s": 1.0}, variants={"batched": {"elapsed_s": 0.5}})
    assert "Ops " not in format_compare(other)


def test_units_on_the_human_readable_tables():
    # Raw figures such as 1.862e+10 were printed where LKP and mmtests show
    # units, and the per-node DRAM byte counts had none.
    from vmsim import runtables
    from vmsim.tables import format_metric, format_rows
    assert format_metric("dram_bytes_read", 1.862e10) == "18.62 GB"
    assert format_metric("dram_node1_bytes_written", 5.662e7) == "56.62 MB"
    assert format_metric("fault_bytes_per_s", 8.476e9) == "8.476 GB/s"
    assert format_metric("sys_s_clear_huge_page", 2.5) == "2.5 s"
    assert format_metric("ipis_per_s", 12345.0) == "12.35 K/s"
    assert format_metric("instructions", 10**10) == "10000000000" and format_metric("ipc", 1.5) == "1.5"
    assert runtables.unit_of("dram_node0_bytes_read") == ("GB", 1e9)
    result = {"config": {}, "machine": MACHINE, "metrics": _metrics(dram_node0_bytes_read=1.862e10)}
    assert ["dram_node0_bytes_read", "18.62", "GB"] in [line.split() for line in format_run(result, full=True).splitlines()]
    # A sweep's metric columns share one unit each; its grid keys have none.
    rows = [{"workload.nr_task": 1, "throughput_bytes_per_s": 2.5e9, "elapsed_s": 1.5},
            {"workload.nr_task": 2, "throughput_bytes_per_s": 9e8, "elapsed_s": 0.5}]
    table = format_rows(rows, ["throughput_bytes_per_s", "elapsed_s"])
    assert [line.split() for line in table[2:]] == [["1", "2.5", "GB/s", "1.5", "s"], ["2", "0.9", "GB/s", "0.5", "s"]]


def _usemem_run(**over):
    """A usemem run's metrics, many of them zero, as the core reports them."""
    m = {"throughput_bytes_per_s": 8.1e9, "elapsed_s": 0.037, "user_s": 0.1, "sys_s": 0.047, "ipc": 2.7,
         "instructions": 9.4e8, "cycles": 3.4e8, "llc_misses": 4197843, "dram_bytes_read": 1.1e7,
         "dram_bytes_written": 2.3e8, "pgfault": 128, "thp_fault_alloc": 128, "thp_fault_fallback": 0,
         "nr_tlb_remote_flush": 0, "ipis_tlb_shootdown": 0, "data_verified": True, "l1d_stores": 8388608,
         "subpage_clears": 65536, "sys_s_clear_page": 0.046, "sys_s_copy_page": 0.0, "hugetlb_faults": 0}
    m.update(over)
    return m


def test_run_table_is_compact_by_default():
    # `run` printed every metric (85 rows, a third of them zero).
    result = {"config": {}, "machine": MACHINE, "scale": "1/64", "metrics": _usemem_run()}
    lines = format_run(result).splitlines()
    names = [line.split()[0] for line in lines[3:-1]]
    assert names == ["throughput_bytes_per_s", "elapsed_s", "user_s", "sys_s", "ipc", "llc_misses",
                     "dram_bytes_read", "dram_bytes_written", "pgfault", "thp_fault_alloc"]
    assert lines[-1] == "  (11 more row(s): --full shows every one)"
    full = format_run(result, full=True).splitlines()
    assert len(full) == 3 + 21 and "hugetlb_faults" in " ".join(full)
    # A failed data check is shown.
    bad = format_run({"machine": MACHINE, "metrics": _usemem_run(data_verified=False)})
    assert "data_verified" in bad


def test_compare_table_is_compact_with_the_workloads_headline():
    wis = {"will_it_scale_workload": 4.7e6, "will_it_scale_per_process_ops": 5.9e5, "phase.loop.accesses": 8192}
    base = _usemem_run(**wis)
    var = _usemem_run(**dict(wis, will_it_scale_workload=2.0e7, pgfault=64, ipis_tlb_shootdown=56))
    result = dict(COMPARE, baseline=base, variants={"thp": var}, variant_order=["thp"])
    lines = format_compare(result).splitlines()
    names = [line.split()[-1] for line in lines[6:] if not line.lstrip().startswith("(")]
    assert names[:5] == ["will_it_scale_per_process_ops", "will_it_scale_workload", "elapsed_s", "user_s", "sys_s"]
    assert "ipis_tlb_shootdown" in names and "nr_tlb_remote_flush" not in names and "l1d_stores" not in names
    assert "throughput_bytes_per_s" not in names
    assert lines[-1].startswith("  (") and "--full shows every one" in lines[-1]
    full = format_compare(result, full=True)
    assert "l1d_stores" in full and "throughput_bytes_per_s" in full


def test_arms_with_the_same_figures_get_a_note():
    # Arms that differ in a policy that never ran printed identical figures without a word.
    same = _usemem_run()
    result = dict(COMPARE, baseline=same, variants={"target-last": dict(same), "other": _usemem_run(pgfault=7)},
                  variant_order=["target-last", "other"],
                  arm_configs={"sequential": {"kernel": {"clear_huge_page": "sequential"}, "seed": 0},
                               "target-last": {"kernel": {"clear_huge_page": "target-last"}, "seed": 0},
                               "other": {"kernel": {"clear_huge_page": "x"}, "seed": 0}})
    notes = [line.strip() for line in format_compare(result).splitlines() if "note:" in line]
    assert notes == ["note: target-last gives the same figures as sequential in every metric: what they differ in "
                     "(kernel.clear_huge_page) changed nothing in this run (its path never ran, or it decided as "
                     "sequential's does)"]
    from vmsim import runtables

    arms = [("a", [same, same]), ("b", [dict(same), dict(same)]), ("c", [same, _usemem_run(pgfault=1)])]
    text = runtables.format_compact(arms)
    assert "note: b gives the same figures as a" in text and "note: c" not in text


def test_compare_dataframe_has_baseline_and_change_columns():
    pd = pytest.importorskip("pandas")
    import math

    import vmsim

    df = vmsim.to_dataframe(COMPARE)
    assert list(df["baseline"]) == ["sequential"] * 3
    assert df.loc["target-last", "throughput_bytes_per_s_change_pct"] == pytest.approx(14.59, abs=0.01)
    assert df.loc["sequential", "elapsed_s_change_pct"] == 0.0
    assert math.isnan(df.loc["target-last", "nr_tlb_remote_flush_change_pct"])  # a zero baseline
    assert "data_verified_change_pct" not in df.columns
    cases = {"experiment": "e", "cases": {"c1": COMPARE, "c2": COMPARE}, "case_order": ["c1", "c2"]}
    df = vmsim.to_dataframe(cases)
    assert df.loc["c2/other", "baseline"] == "c2/sequential"
    assert isinstance(df, pd.DataFrame)


def test_metrics_tables_say_which_arms_give_the_same_figures():
    # `compare --metrics` (and --format, --min-change, --full) printed the
    # chosen rows without the note the default table gives.
    import argparse

    from vmsim import cli, runtables

    same = _usemem_run()
    result = dict(COMPARE, baseline=same, variants={"target-last": dict(same)}, variant_order=["target-last"],
                  arm_configs={"sequential": {"kernel": {"clear_huge_page": "sequential"}, "seed": 0},
                               "target-last": {"kernel": {"clear_huge_page": "target-last"}, "seed": 0}})
    groups = cli._by_case(runtables.arms_of(result))
    args = argparse.Namespace(metrics="elapsed_s", format=None, full=False, min_change=None, names=None)
    text = cli._runs_text(groups, args, runtables.arm_configs(result))
    assert "note: target-last gives the same figures as sequential in every metric" in text
    assert "(kernel.clear_huge_page)" in text

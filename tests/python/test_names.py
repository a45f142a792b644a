"""--names lkp: LKP's namespaced metric names, as docs/metrics.md lists them."""
import json
import re
from pathlib import Path

import pytest

from vmsim import _api, cli
from vmsim.names import LKP_NAMES, lkp_name, namer, suite_of

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "docs" / "metrics.md"


def _doc_table():
    text = GLOSSARY.read_text(encoding="utf-8")
    section = text.split("## LKP's names (`--names lkp`)", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", section, re.M))


def test_docs_table_is_the_mapping():
    assert _doc_table() == LKP_NAMES


def test_every_mapped_metric_is_reported_by_some_workload():
    reported = set()
    for experiment in ("clear-target-last", "multipage-clear", "numa-delay-map", "batched-tlb-flush"):
        for case in _api.experiment_plan(experiment)["cases"]:
            for arm in case["arms"]:
                reported.update(arm["metrics"])
    # will-it-scale is an example experiment, not a built-in one.
    for case in _api.experiment_plan(str(ROOT / "examples" / "workloads" / "page-fault1.toml"))["cases"]:
        for arm in case["arms"]:
            reported.update(arm["metrics"])
    assert not set(LKP_NAMES) - reported
    # LKP's names are unique: no two rows of one table share one.
    rendered = [name.format(suite="vm-scalability") for name in LKP_NAMES.values()]
    assert len(rendered) == len(set(rendered))


def test_will_it_scale_and_programs_are_not_named_vm_scalability():
    # --names lkp named will-it-scale runs and programs vm-scalability.*:
    # every workload reports throughput_bytes_per_s.
    base = {"throughput_bytes_per_s": 1.0, "elapsed_s": 1.0, "sys_s": 1.0, "pgfault": 1}
    wis = dict(base, will_it_scale_workload=1.0, will_it_scale_per_process_ops=1.0, **{"phase.loop.accesses": 1})
    program = dict(base, **{"phase.write.throughput_bytes_per_s": 1.0})
    trace = dict(base, trace_accesses=1, trace_elapsed_s=1.0)
    assert [suite_of(m) for m in (wis, program, trace)] == ["will-it-scale", None, None]
    n = namer("lkp", wis)
    assert [n(m) for m in ("will_it_scale_workload", "elapsed_s", "sys_s", "throughput_bytes_per_s",
                           "will_it_scale_per_process_ops", "will_it_scale_per_thread_ops", "pgfault")] == [
        "will-it-scale.workload", "will-it-scale.time.elapsed_time", "will-it-scale.time.system_time",
        "throughput_bytes_per_s", "will-it-scale.per_process_ops", "will-it-scale.per_thread_ops",
        "proc-vmstat.pgfault"]
    for metrics in (program, trace):
        n = namer("lkp", metrics)
        assert [n(m) for m in ("throughput_bytes_per_s", "elapsed_s", "sys_s", "pgfault")] == [
            "throughput_bytes_per_s", "elapsed_s", "sys_s", "proc-vmstat.pgfault"]


def test_names_follow_the_workload():
    usemem = {"throughput_bytes_per_s": 1.0, "sys_s": 1.0}
    pmbench = dict(usemem, pmbench_throughput_aps=1.0, tlb_shootdown_interrupts=1)
    pftest = dict(usemem, fault_bytes_per_s=1.0)
    assert [suite_of(m) for m in (usemem, pmbench, pftest)] == ["vm-scalability", "pmbench", None]
    n = namer("lkp", usemem)
    assert [n(m) for m in ("throughput_bytes_per_s", "sys_s", "ipc", "pgfault", "cycles", "llc_miss_rate")] == [
        "vm-scalability.throughput", "vm-scalability.time.system_time", "perf-stat.overall.ipc",
        "proc-vmstat.pgfault", "cycles", "llc_miss_rate"]
    n = namer("lkp", pmbench)
    assert [n(m) for m in ("pmbench_throughput_aps", "throughput_bytes_per_s", "user_s", "ipis_tlb_shootdown",
                           "tlb_shootdown_interrupts")] == [
        "pmbench.throughput.aps", "throughput_bytes_per_s", "pmbench.time.user_time", "interrupts.TLB:TLB_shootdowns",
        "tlb_shootdown_interrupts"]
    # pf-test is not an LKP test: its own figures keep their names.
    n = namer("lkp", pftest)
    assert [n(m) for m in ("throughput_bytes_per_s", "elapsed_s", "ipc")] == [
        "throughput_bytes_per_s", "elapsed_s", "perf-stat.overall.ipc"]
    assert namer("vmsim", usemem) is None and namer(None, usemem) is None
    assert lkp_name("no_such_metric", "vm-scalability") == "no_such_metric"
    with pytest.raises(ValueError):
        namer("perf", usemem)


def _result(tp, sys_s, pgfault):
    return {"metrics": {"throughput_bytes_per_s": tp, "sys_s": sys_s, "pgfault": pgfault, "data_verified": True},
            "machine": {"name": "m"}}


def test_cli_names_lkp_on_saved_results(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_result(10e9, 1.0, 100)))
    b.write_text(json.dumps(_result(12e9, 1.5, 100)))
    for fmt in ("lkp", "mmtests"):
        assert cli.main(["compare", str(a), str(b), "--format", fmt, "--names", "lkp"]) == 0
        out = capsys.readouterr().out
        assert "vm-scalability.throughput" in out and "vm-scalability.time.system_time" in out
        assert "throughput_bytes_per_s" not in out and "GB/s" in out
    assert cli.main(["compare", str(a), str(b), "--format", "lkp"]) == 0
    assert "throughput_bytes_per_s" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        cli.main(["compare", str(a), "--names", "perf"])
    assert e.value.code == 2 and "argument --names: invalid choice: 'perf'" in capsys.readouterr().err


@pytest.mark.sim
def test_cli_run_and_sweep_with_lkp_names(tiny_toml, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert cli.main(["run", "-q", str(tiny_toml), "--names", "lkp", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    for name in ("vm-scalability.throughput", "vm-scalability.time.elapsed_time", "perf-stat.overall.ipc",
                 "proc-vmstat.pgfault", "proc-vmstat.thp_fault_alloc"):
        assert re.search(rf"^  {re.escape(name)} ", text, re.M), name
    # The JSON keeps vmsim's names.
    assert "throughput_bytes_per_s" in json.loads(out.read_text())["metrics"]
    assert cli.main(["sweep", "-q", str(tiny_toml), "--set", "seed=0", "-j", "1", "--names", "lkp",
                     "--metrics", "throughput_bytes_per_s,sys_s"]) == 0
    head = capsys.readouterr().out.splitlines()[0].split()
    assert head == ["seed", "vm-scalability.throughput", "vm-scalability.time.system_time"]


def test_api_compare_results_with_lkp_names():
    import vmsim

    a, b = _result(10e9, 1.0, 100), _result(12e9, 1.5, 100)
    text = vmsim.compare_results(a, b, names="lkp")
    assert "vm-scalability.throughput" in text and "throughput_bytes_per_s" not in text
    assert "throughput_bytes_per_s" in vmsim.compare_results(a, b)
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.compare_results(a, names="perf")
    assert e.value.key == "names"

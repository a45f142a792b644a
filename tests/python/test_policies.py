"""Python policies at the kernel's hooks: the five built-in changes written
again in Python (examples/policies/) give byte-identical results to the
built-ins; a broken policy raises PolicyError naming it; callables, files,
experiments and process pools all work."""

import json
import os
import pickle
import textwrap

import pytest

import vmsim
from vmsim import _core

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POLICIES = os.path.join(ROOT, "examples", "policies")

pytestmark = pytest.mark.sim


def pol(spec):
    """An absolute "FILE.py:NAME" for a file of examples/policies."""
    return os.path.join(POLICIES, spec)


def usemem(clear="target-last", **kernel):
    return {
        "machine": "xeon-e5-2699v3-2s",
        "kernel": {"thp": "always", "clear_huge_page": clear, **kernel},
        "workload": {"kind": "usemem", "nr_task": 8, "size_per_task_mib": 2},
    }


def cow(copy):
    return {
        "machine": "xeon-e5-2699v3-2s",
        "kernel": {"thp": "always", "thp_cow": "copy", "copy_huge_page": copy},
        "workload": {"kind": "usemem", "nr_task": 3, "size_per_task_mib": 4, "prealloc": True, "prefault": True},
    }


def reclaim(flush):
    return {
        "machine": "xeon-e5-2699v3-2s",
        "seed": 3,
        "kernel": {"tlb_flush_on_unmap": flush},
        "workload": {"kind": "lru-file-mmap-read", "nr_task": 8, "ram_mib": 16},
    }


def numa(hint, flush="batched"):
    return {
        "machine": "xeon-e5-2699v3-2s",
        "kernel": {"numa_balancing": True, "numa_hint_fault": hint, "migrate_tlb_flush": flush,
                   "numa_balancing_scan_delay_ms": 1, "numa_balancing_scan_period_min_ms": 1,
                   "numa_balancing_scan_size_mb": 4},
        "workload": {"kind": "pmbench", "nr_processes": 2, "nr_threads": 2, "mapsize_mib": 16,
                     "duration_s": 0.03, "bind_node": 1, "node_memory_mib": 64, "eater_mib": 48,
                     "eater_node": 1, "eater_exit_s": 0.02},
    }


@pytest.mark.parametrize("builtin, python, config", [
    ("target-last", "clear_target_last.py:target_last", usemem),
    ("multipage-2023", "multipage.py:multipage_2023", usemem),
    ("contiguous-7.0", "multipage.py:contiguous_7_0", usemem),
    ("target-last", "copy_target_last.py:target_last", cow),
    ("batched", "batched_flush.py:Batched", reclaim),
    ("migrate-then-map", "migrate_then_map.py:migrate_then_map", numa),
])
def test_the_builtin_changes_written_in_python_give_identical_results(builtin, python, config):
    a = vmsim.run(config(builtin))
    b = vmsim.run(config(pol(python)))
    assert b["metrics"]["data_verified"] is True
    # A flush policy that answers as a built-in everywhere is noted as such.
    notes = b["metrics"].pop("policy_notes", [])
    if config is reclaim:
        assert len(notes) == 1 and f'answered as the built-in "{builtin}"' in notes[0], notes
    else:
        assert notes == []
    assert json.dumps(a["metrics"], sort_keys=True) == json.dumps(b["metrics"], sort_keys=True)
    key = {usemem: "clear_huge_page", cow: "copy_huge_page", reclaim: "tlb_flush_on_unmap",
           numa: "numa_hint_fault"}[config]
    assert b["config"]["kernel"][key] == pol(python)


def test_the_contiguous_plan_chunks_as_the_kernel_does_when_preemptible():
    for preempt in ("none", "full"):
        a = vmsim.run(usemem("contiguous-7.0", preempt=preempt))
        b = vmsim.run(usemem(pol("multipage.py:contiguous_7_0"), preempt=preempt))
        assert a["metrics"] == b["metrics"]


def test_an_experiment_arm_with_a_python_policy_matches_the_builtin(tmp_path):
    text = _core.builtin_toml("experiment", "clear-target-last")
    arm = '"kernel.clear_huge_page" = "target-last"'
    assert arm in text
    (tmp_path / "policy.py").write_text(open(pol("clear_target_last.py")).read())
    exp = tmp_path / "mine.toml"
    # A relative file name resolves against the experiment file's folder.
    exp.write_text(text.replace(arm, '"kernel.clear_huge_page" = "policy.py:target_last"'))
    a = vmsim.compare("clear-target-last", scale=1 / 16, threads=1)
    b = vmsim.compare(str(exp), scale=1 / 16, threads=1)
    assert a["baseline"] == b["baseline"]
    assert a["variants"]["target-last"] == b["variants"]["target-last"]


def test_a_callable_works_in_run_compare_set_and_sweep(tmp_path):
    def ascending(ctx):
        return [vmsim.policy.Region(0, ctx.nr_pages)]

    r = vmsim.run(usemem(ascending))
    assert r["metrics"]["data_verified"] is True
    assert r["config"]["kernel"]["clear_huge_page"].startswith("python:")

    def split_always(ctx):
        return "reuse" if ctx.exclusive else "split"

    # The arms set the clear order; the callable rides along in every arm.
    c = vmsim.compare("clear-target-last", scale=1 / 16, threads=1, set={"kernel.thp_cow": split_always})
    assert c["config"]["kernel"]["thp_cow"].startswith("python:")
    rows = vmsim.sweep_rows({"kernel.clear_huge_page": ["sequential", pol("target_first.py:target_first")]},
                            usemem())
    assert [r["kernel.clear_huge_page"] for r in rows] == ["sequential", pol("target_first.py:target_first")]
    assert all(r["data_verified"] for r in rows)


def test_a_clzero_region_runs_on_milan_and_is_a_policy_error_on_intel():
    def clzero_whole(ctx):
        return [vmsim.policy.Region(0, ctx.nr_pages, how="clzero"), vmsim.policy.Fence()]

    cfg = {"machine": "epyc-7j13-milan",
           "kernel": {"clear_huge_page": clzero_whole},
           "workload": {"kind": "pf-test", "page_size": "2m", "size_mib": 8, "cpu": 0}}
    r = vmsim.run(cfg)
    assert r["metrics"]["data_verified"] is True
    assert r["metrics"]["counters"]["cpu"]["cache"]["nt_stores"] == 8 * 1024 * 1024 // 64
    with pytest.raises(vmsim.PolicyError, match="string.clzero = false"):
        vmsim.run({**cfg, "machine": "xeon-8358-icx"})


def test_a_plan_that_misses_a_subpage_raises_policy_error(tmp_path):
    f = tmp_path / "bad.py"
    f.write_text(textwrap.dedent("""\
        from vmsim.policy import Subpage
        def skip_five(ctx):
            return [Subpage(i) for i in range(ctx.nr_pages) if i != 5]
        def boom(ctx):
            raise RuntimeError("no plan today")
        def twice(ctx):
            return list(range(ctx.nr_pages)) + [0]
    """))
    with pytest.raises(vmsim.PolicyError) as e:
        vmsim.run(usemem(f"{f}:skip_five"))
    assert e.value.key == "kernel.clear_huge_page"
    assert e.value.policy == f"{f}:skip_five"
    assert e.value.message.startswith("sub-page 5 is never cleared"), e.value.message
    with pytest.raises(vmsim.PolicyError) as e:
        vmsim.run(usemem(f"{f}:boom"))
    assert "RuntimeError: no plan today" in e.value.message and "Traceback" in e.value.message
    assert 'line 5, in boom' in e.value.message
    with pytest.raises(vmsim.PolicyError, match="sub-page 0 a second time"):
        vmsim.run(usemem(f"{f}:twice"))
    # Process pools get the error with its parts.
    err = pickle.loads(pickle.dumps(e.value))
    assert isinstance(err, vmsim.PolicyError) and err.key == "kernel.clear_huge_page"


def test_wrong_answers_of_every_hook_are_policy_errors(tmp_path):
    f = tmp_path / "wrong.py"
    f.write_text(textwrap.dedent("""\
        def reuse(ctx):
            return "reuse"
        def maybe(ctx):
            return "yes"
        def hint(ctx):
            return 3
        class HalfFull:
            def should_defer(self, ctx):
                return ctx.others
            def full_flush(self, ctx):
                return "half"
        def order(ctx):
            return range(ctx.nr_pages - 1)
    """))
    with pytest.raises(vmsim.PolicyError, match="another process still maps"):
        vmsim.run({**cow("target-last"), "kernel": {"thp": "always", "thp_cow": f"{f}:reuse"}})
    with pytest.raises(vmsim.PolicyError, match="should_defer returns a bool"):
        vmsim.run(reclaim(f"{f}:maybe"))
    with pytest.raises(vmsim.PolicyError, match="full_flush returns a bool, not 'half'"):
        vmsim.run(reclaim(f"{f}:HalfFull"))
    with pytest.raises(vmsim.PolicyError, match="accepted: 'map-then-migrate'"):
        vmsim.run(numa(f"{f}:hint"))
    with pytest.raises(vmsim.PolicyError, match="is never copied"):
        vmsim.run(cow(f"{f}:order"))


def test_a_policy_that_cannot_be_loaded_is_a_config_error_naming_the_key(tmp_path):
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.run(usemem("nowhere.py:f"))
    assert e.value.key == "kernel.clear_huge_page" and "no such file" in e.value.message
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.run(usemem(pol("clear_target_last.py:nothing_here")))
    assert "has no 'nothing_here'" in e.value.message
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n")
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.run(usemem(f"{broken}:f"))
    assert "SyntaxError" in e.value.message
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.run(usemem("backwards"))
    assert '"target-last"' in e.value.message and 'a Python policy "FILE.py:NAME"' in e.value.message


def test_the_docs_and_the_cli_list_every_registered_policy():
    rows = {line.split("|")[1].strip().strip("`"): line
            for line in open(os.path.join(ROOT, "docs", "config.md")) if line.startswith("| `kernel.")}
    names = _core.policy_names()
    assert [k for k, _ in names] == ["kernel.clear_huge_page", "kernel.copy_huge_page", "kernel.thp_cow",
                                     "kernel.tlb_flush_on_unmap", "kernel.migrate_tlb_flush",
                                     "kernel.numa_hint_fault"]
    for key, accepted in names:
        for n in accepted:
            assert f"`{n}`" in rows[key], f"docs/config.md's {key} row does not name {n}"
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "vmsim", "policies"], capture_output=True, text=True, check=True).stdout
    assert "kernel.clear_huge_page: sequential, target-last, multipage-2023, contiguous-7.0, nontemporal-far" in out


def test_vmsim_hw_clear_runs_a_python_plan_with_the_real_routines(tmp_path):
    r = vmsim.hw("clear", quiet=True, strategies=["target-last", pol("clear_target_last.py:target_last")],
                 pages=2, reps=1, corunner=False, huge="none")
    names = {row["strategy"] for row in r["results"]}
    assert names == {"target-last", pol("clear_target_last.py:target_last")}, r["results"]
    assert all(row["verified"] for row in r["results"])
    f = tmp_path / "short.py"
    f.write_text("def short(ctx):\n    return list(range(1, ctx.nr_pages))\n")
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.hw("clear", quiet=True, strategies=[f"{f}:short"], pages=1, reps=1, corunner=False, huge="none")
    assert e.value.key == "strategies" and "sub-page 0 is never cleared" in e.value.message


def test_vmsim_hw_copy_runs_a_python_copy_plan():
    r = vmsim.hw("copy", quiet=True, strategies=["target-last", pol("copy_target_last.py:target_last")],
                 pages=2, reps=1, corunner=False, huge="none")
    assert {row["strategy"] for row in r["results"]} == {"target-last", pol("copy_target_last.py:target_last")}
    assert all(row["verified"] for row in r["results"])


def test_process_pool_workers_load_a_policy_file_by_path():
    # compare(runs=N) runs each seed in a worker process: the experiment's
    # arm names its policy by a file relative to the experiment.
    exp = os.path.join(POLICIES, "target-first.toml")
    r = vmsim.compare(exp, scale=1 / 16, runs=2, jobs=2, threads=1)
    assert [run["seed"] for run in r["runs"]] == [0, 1]
    for run in r["runs"]:
        assert run["variants"]["target-first"] == run["variants"]["sequential"]


def test_a_flush_policy_sees_what_the_kernel_decides_from():
    seen = set()

    class Recorder:
        def should_defer(self, ctx):
            seen.add(("defer",) + tuple(ctx))
            return ctx.others

        def full_flush(self, ctx):
            seen.add(("full",) + tuple(ctx))
            return vmsim.policy.kernel_full_flush(ctx)

    r = vmsim.run(reclaim(Recorder()), threads=1)
    assert r["metrics"]["data_verified"] is True
    ctxs = [(what, vmsim.policy.FlushContext(*t)) for what, *t in seen]
    defers = [c for w, c in ctxs if w == "defer"]
    batches = [c for w, c in ctxs if w == "full" and c.kind == "batch"]
    assert defers and batches
    assert all(c.kind == "page" and c.sampled == "unmap" and c.nr_pages == 1 and c.ceiling == 33 for c in defers)
    assert max(c.pending for c in defers) >= 8
    assert all(c.sampled == "batch" and c.nr_pages == c.pending >= 1 for c in batches)
    # The kernel's rule written as a policy: the built-in's run, and a note.
    assert r["metrics"].pop("policy_notes")[0].startswith("kernel.tlb_flush_on_unmap: ")
    assert r["metrics"] == vmsim.run(reclaim("batched"))["metrics"]


def test_the_page_count_rule_flushes_small_batches_page_by_page():
    a = vmsim.run(reclaim("batched"))["metrics"]
    b = vmsim.run(reclaim(pol("page_count_flush.py:PageCount")))["metrics"]
    assert b["data_verified"] is True
    assert "policy_notes" not in b, b.get("policy_notes")
    whole = lambda m: m["counters"]["reclaim"]["tlb_ubc_flushes"]
    pages = lambda m: m["counters"]["cpu"]["tlb_flush_page"]
    assert 0 < whole(b) < whole(a) and pages(b) > pages(a)


def test_vmsim_run_prints_a_policy_note(tmp_path):
    import subprocess
    import sys
    cfg = tmp_path / "r.toml"
    cfg.write_text(textwrap.dedent(f"""\
        machine = "xeon-e5-2699v3-2s"
        seed = 3
        [kernel]
        tlb_flush_on_unmap = "{pol('batched_flush.py:Batched')}"
        [workload]
        kind = "lru-file-mmap-read"
        nr_task = 8
        ram_mib = 16
    """))
    p = subprocess.run([sys.executable, "-m", "vmsim", "run", str(cfg), "-q", "--no-cache"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert 'vmsim: note: kernel.tlb_flush_on_unmap: "' in p.stderr
    assert 'answered as the built-in "batched" in all ' in p.stderr

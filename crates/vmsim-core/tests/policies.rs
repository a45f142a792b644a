//! User policies at the kernel's hooks, registered from outside the crate
//! (as a user's own crate would): they run, re-implementations of the
//! built-ins give byte-identical results, and a broken policy stops the run
//! with `Error::Policy` naming it — never a panic or a silently wrong result.

use vmsim_core::api::{Error, Format, Lib, Policies};
use vmsim_core::kernel::policy::clear::{ClearCtx, ClearPlan, ClearStep};
use vmsim_core::kernel::policy::cow::{CopyCtx, CopyPlan, CowAction, CowCtx, ThpCowPolicy};
use vmsim_core::kernel::policy::numa::{HintCtx, HintOrder, NumaHintPolicy};
use vmsim_core::kernel::policy::tlb::{BatchFlush, FlushCtx, UnmapFlush};

/// 8 tasks of one huge page each: every task's region is one 2 MiB clear.
fn usemem(clear: &str) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\nclear_huge_page = \"{clear}\"\n\
         [workload]\nkind = \"usemem\"\nnr_task = 8\nsize_per_task_mib = 2\n"
    )
}

/// Huge pages shared by a parent and its children and written by them.
fn cow(thp_cow: &str, copy: &str) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\nthp_cow = \"{thp_cow}\"\ncopy_huge_page = \"{copy}\"\n\
         [workload]\nkind = \"usemem\"\nnr_task = 3\nsize_per_task_mib = 4\nprealloc = true\nprefault = true\n"
    )
}

fn run(lib: &Lib, text: &str) -> Result<serde_json::Value, Error> {
    lib.run_config(text, Format::Toml, None, 1, &mut |_, _| {})
        .map(|s| serde_json::from_str(&s).unwrap())
}

/// The faulting sub-page first, then the rest ascending.
struct TargetFirst;
impl ClearPlan for TargetFirst {
    fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
        out.push(ClearStep::Subpage(ctx.target));
        out.extend(
            (0..ctx.nr_pages)
                .filter(|&i| i != ctx.target)
                .map(ClearStep::Subpage),
        );
        Ok(())
    }
}

/// target-last written again from the kernel's description.
struct MyTargetLast;
impl ClearPlan for MyTargetLast {
    fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
        let (n, nr) = (ctx.target, ctx.nr_pages);
        let (base, l) = if 2 * n <= nr {
            out.extend((2 * n..nr).rev().map(ClearStep::Subpage));
            (0, n)
        } else {
            let base = nr - 2 * (nr - n);
            out.extend((0..base).map(ClearStep::Subpage));
            (base, nr - n)
        };
        for i in 0..l {
            out.push(ClearStep::Subpage(base + i));
            out.push(ClearStep::Subpage(base + 2 * l - 1 - i));
        }
        Ok(())
    }
}

/// Forgets one sub-page.
struct SkipsFive;
impl ClearPlan for SkipsFive {
    fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
        out.extend(
            (0..ctx.nr_pages)
                .filter(|&i| i != 5)
                .map(ClearStep::Subpage),
        );
        Ok(())
    }
}

/// Fails as a user's code can.
struct Fails;
impl ClearPlan for Fails {
    fn plan(&self, _: &ClearCtx, _: &mut Vec<ClearStep>) -> Result<(), String> {
        Err("no plan today".into())
    }
}

struct Ascending;
impl CopyPlan for Ascending {
    fn plan(&self, ctx: &CopyCtx, out: &mut Vec<u64>) -> Result<(), String> {
        out.extend(0..ctx.nr_pages);
        Ok(())
    }
}

/// Reuses even a shared page: what copy-on-write must never do.
struct ReuseAlways;
impl ThpCowPolicy for ReuseAlways {
    fn decide(&self, _: &CowCtx) -> Result<CowAction, String> {
        Ok(CowAction::Reuse)
    }
}

struct MyBatched;
impl UnmapFlush for MyBatched {
    fn should_defer(&self, ctx: &FlushCtx) -> Result<bool, String> {
        Ok(ctx.others)
    }
    fn batch_flush(&self) -> BatchFlush {
        BatchFlush::Ipis
    }
}

struct MyMigrateFirst;
impl NumaHintPolicy for MyMigrateFirst {
    fn decide(&self, _: &HintCtx) -> Result<HintOrder, String> {
        Ok(HintOrder::MigrateThenMap)
    }
}

fn lib() -> Lib {
    let p = Policies::builtin()
        .register_clear("target-first", TargetFirst)
        .and_then(|p| p.register_clear("my-target-last", MyTargetLast))
        .and_then(|p| p.register_clear("skips-five", SkipsFive))
        .and_then(|p| p.register_clear("fails", Fails))
        .and_then(|p| p.register_copy("my-sequential", Ascending))
        .and_then(|p| p.register_thp_cow("reuse-always", ReuseAlways))
        .and_then(|p| p.register_unmap_flush("my-batched", MyBatched))
        .and_then(|p| p.register_numa_hint("my-migrate-first", MyMigrateFirst))
        .unwrap();
    Lib::new(p)
}

#[test]
fn a_registered_plan_runs_and_a_reimplemented_builtin_gives_identical_results() {
    let lib = lib();
    let builtin = run(&lib, &usemem("target-last")).unwrap();
    let mine = run(&lib, &usemem("my-target-last")).unwrap();
    assert_eq!(
        mine["config"]["kernel"]["clear_huge_page"],
        "my-target-last"
    );
    assert_eq!(builtin["metrics"], mine["metrics"]);
    let first = run(&lib, &usemem("target-first")).unwrap();
    assert_eq!(first["metrics"]["data_verified"], true);
    assert_ne!(
        first["metrics"], builtin["metrics"],
        "a different order is a different run"
    );

    let copy = run(&lib, &cow("copy", "sequential")).unwrap();
    let mine = run(&lib, &cow("copy", "my-sequential")).unwrap();
    assert!(copy["metrics"]["thp_cow_copies"].as_u64().unwrap() > 0);
    assert_eq!(copy["metrics"], mine["metrics"]);
}

#[test]
fn the_flush_and_hint_hooks_take_user_policies_with_identical_results() {
    let lib = lib();
    let reclaim = |flush: &str| {
        format!(
            "machine = \"xeon-e5-2699v3-2s\"\nseed = 3\n[kernel]\ntlb_flush_on_unmap = \"{flush}\"\n\
             [workload]\nkind = \"lru-file-mmap-read\"\nnr_task = 8\nram_mib = 16\n"
        )
    };
    let a = run(&lib, &reclaim("batched")).unwrap();
    let b = run(&lib, &reclaim("my-batched")).unwrap();
    assert_eq!(a["metrics"], b["metrics"]);
    let numa = |hint: &str, flush: &str| {
        format!(
            "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nnuma_balancing = true\nnuma_hint_fault = \"{hint}\"\n\
             migrate_tlb_flush = \"{flush}\"\nnuma_balancing_scan_delay_ms = 1\nnuma_balancing_scan_period_min_ms = 1\n\
             numa_balancing_scan_size_mb = 4\n[workload]\nkind = \"pmbench\"\nnr_processes = 2\nnr_threads = 2\n\
             mapsize_mib = 16\nduration_s = 0.03\nbind_node = 1\nnode_memory_mib = 64\neater_mib = 48\n\
             eater_node = 1\neater_exit_s = 0.02\n"
        )
    };
    let a = run(&lib, &numa("migrate-then-map", "batched")).unwrap();
    let b = run(&lib, &numa("my-migrate-first", "my-batched")).unwrap();
    assert!(a["metrics"]["numa_hint_faults"].as_u64().unwrap() > 0);
    assert_eq!(a["metrics"], b["metrics"]);
}

#[test]
fn a_broken_policy_stops_the_run_naming_the_policy_and_what_is_wrong() {
    let lib = lib();
    match run(&lib, &usemem("skips-five")) {
        Err(Error::Policy {
            key,
            policy,
            message,
        }) => {
            assert_eq!(
                (key.as_str(), policy.as_str()),
                ("kernel.clear_huge_page", "skips-five")
            );
            assert!(
                message.starts_with("sub-page 5 is never cleared"),
                "{message}"
            );
        }
        r => panic!("{:?}", r.map(|_| ())),
    }
    match run(&lib, &usemem("fails")) {
        Err(e @ Error::Policy { .. }) => {
            assert_eq!(
                e.to_string(),
                "policy \"fails\" (kernel.clear_huge_page): no plan today"
            )
        }
        r => panic!("{:?}", r.map(|_| ())),
    }
    match run(&lib, &cow("reuse-always", "target-last")) {
        Err(Error::Policy { key, message, .. }) => {
            assert_eq!(key, "kernel.thp_cow");
            assert!(message.contains("another process still maps"), "{message}");
        }
        r => panic!("{:?}", r.map(|_| ())),
    }
}

#[test]
fn names_come_from_the_registry() {
    let e = lib()
        .check_config(&usemem("backwards"), Format::Toml, None)
        .unwrap_err();
    let Error::Config { key, message } = e else {
        panic!("{e:?}")
    };
    assert_eq!(key, "kernel.clear_huge_page");
    assert!(
        message.contains("\"target-last\"") && message.contains("\"target-first\""),
        "{message}"
    );
    // Without the user's registry the name is unknown.
    assert!(vmsim_core::api::check_config(&usemem("target-first"), Format::Toml, None).is_err());
    let dup = Policies::builtin().register_clear("sequential", TargetFirst);
    assert!(dup.is_err());
}

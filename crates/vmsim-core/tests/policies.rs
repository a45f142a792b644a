//! User policies at the kernel's hooks, registered from outside the crate
//! (as a user's own crate would): they run, re-implementations of the
//! built-ins give byte-identical results, and a broken policy stops the run
//! with `Error::Policy` naming it — never a panic or a silently wrong result.

use vmsim_core::api::{Error, Format, Lib, Policies};
use vmsim_core::kernel::policy::clear::{ClearCtx, ClearPlan, ClearStep};
use vmsim_core::kernel::policy::cow::{CopyCtx, CopyPlan, CowAction, CowCtx, ThpCowPolicy};
use vmsim_core::kernel::policy::numa::{HintCtx, HintOrder, NumaHintPolicy};
use vmsim_core::kernel::policy::tlb::{
    kernel_full_flush, BatchFlush, FlushCtx, FlushKind, MaskSampled, UnmapFlush,
};

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

/// "Flush each page below N pending pages, the whole TLB above": deferred
/// as the kernel defers, the ceiling its own.
struct PageCount(u64);
impl UnmapFlush for PageCount {
    fn should_defer(&self, ctx: &FlushCtx) -> Result<bool, String> {
        Ok(ctx.others)
    }
    fn full_flush(&self, ctx: &FlushCtx) -> Result<bool, String> {
        Ok(ctx.nr_pages > self.0)
    }
    fn batch_flush(&self) -> BatchFlush {
        BatchFlush::Ipis
    }
}

/// Batched, its batch flushed by INVLPGB.
struct MyBroadcast;
impl UnmapFlush for MyBroadcast {
    fn should_defer(&self, ctx: &FlushCtx) -> Result<bool, String> {
        Ok(ctx.others)
    }
    fn batch_flush(&self) -> BatchFlush {
        BatchFlush::Broadcast
    }
}

/// Every context a `Recorder` was asked, with whether it was `should_defer`.
static SEEN: std::sync::Mutex<Vec<(bool, FlushCtx)>> = std::sync::Mutex::new(Vec::new());

/// Batched, writing down what it is asked (a test's eyes: a real policy
/// keeps no state).
struct Recorder;
impl UnmapFlush for Recorder {
    fn should_defer(&self, ctx: &FlushCtx) -> Result<bool, String> {
        SEEN.lock().unwrap().push((true, *ctx));
        Ok(ctx.others)
    }
    fn full_flush(&self, ctx: &FlushCtx) -> Result<bool, String> {
        SEEN.lock().unwrap().push((false, *ctx));
        Ok(kernel_full_flush(ctx))
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
        .and_then(|p| p.register_unmap_flush("page-count-64", PageCount(64)))
        .and_then(|p| p.register_unmap_flush("my-broadcast", MyBroadcast))
        .and_then(|p| p.register_unmap_flush("recorder", Recorder))
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
    // The same run, and a note that says so.
    assert_eq!(a["metrics"], without_notes(&b["metrics"]));
    assert!(b["metrics"]["policy_notes"][0]
        .as_str()
        .unwrap()
        .contains("as the built-in \"batched\""));
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
    assert_eq!(a["metrics"], without_notes(&b["metrics"]));
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

/// A run's metrics without its `policy_notes`.
fn without_notes(m: &serde_json::Value) -> serde_json::Value {
    let mut m = m.clone();
    m.as_object_mut().unwrap().remove("policy_notes");
    m
}

fn reclaim(flush: &str) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\nseed = 3\n[kernel]\ntlb_flush_on_unmap = \"{flush}\"\n\
         [workload]\nkind = \"lru-file-mmap-read\"\nnr_task = 8\nram_mib = 16\n"
    )
}

fn numa_on(machine: &str, flush: &str) -> String {
    format!(
        "machine = \"{machine}\"\n[kernel]\nnuma_balancing = true\nnuma_hint_fault = \"map-then-migrate\"\n\
         migrate_tlb_flush = \"{flush}\"\nnuma_balancing_scan_delay_ms = 1\nnuma_balancing_scan_period_min_ms = 1\n\
         numa_balancing_scan_size_mb = 4\n[workload]\nkind = \"pmbench\"\nnr_processes = 2\nnr_threads = 2\n\
         mapsize_mib = 16\nduration_s = 0.03\nbind_node = 1\nnode_memory_mib = 64\neater_mib = 48\n\
         eater_node = 1\neater_exit_s = 0.02\n"
    )
}

/// The flush hook sees what the kernel has when it decides: the entries
/// pending in the batch, the pages the flush covers, what is decided (an
/// entry's flush or the batch's) and the mask with when it was sampled.
#[test]
fn the_flush_hook_sees_the_pending_pages_the_range_the_kind_and_the_mask_as_sampled() {
    let r = run(&lib(), &reclaim("recorder")).unwrap();
    assert_eq!(r["metrics"]["data_verified"], true);
    let seen = std::mem::take(&mut *SEEN.lock().unwrap());
    let defers: Vec<&FlushCtx> = seen.iter().filter(|(d, _)| *d).map(|(_, c)| c).collect();
    let batches: Vec<&FlushCtx> = seen
        .iter()
        .filter(|(d, c)| !d && c.kind == FlushKind::Batch)
        .map(|(_, c)| c)
        .collect();
    assert!(!defers.is_empty() && !batches.is_empty());
    for c in &defers {
        assert_eq!(
            (c.kind, c.sampled, c.nr_pages),
            (FlushKind::Page, MaskSampled::Unmap, 1)
        );
        assert_eq!(
            c.ceiling, 33,
            "kernel.tlb_single_page_flush_ceiling's default"
        );
    }
    // Reclaim defers many entries into one batch: later ones see them pending.
    assert!(defers.iter().any(|c| c.pending >= 8), "{defers:?}");
    for c in &batches {
        assert_eq!(c.sampled, MaskSampled::Batch);
        assert!(c.pending >= 1 && c.nr_pages == c.pending as u64, "{c:?}");
        assert!(c.nr_cpus >= 1);
    }
    let most = batches.iter().map(|c| c.pending).max().unwrap();
    assert!(
        most >= 8,
        "a reclaim round's batch holds many entries: {most}"
    );
}

/// The ceiling is the policy's: a rule that flushes a batch page by page
/// while it holds at most N entries changes the run (no full flush of a
/// batch), reads every page back intact, and the kernel's rule written as
/// a policy gives the built-in's run.
#[test]
fn a_policy_decides_the_ceiling_and_flushes_a_batch_page_by_page() {
    let lib = lib();
    let batched = run(&lib, &reclaim("batched")).unwrap();
    let pages = run(&lib, &reclaim("page-count-64")).unwrap();
    let (b, p) = (&batched["metrics"], &pages["metrics"]);
    assert_eq!(p["data_verified"], true);
    let n = |m: &serde_json::Value, path: &[&str]| {
        path.iter()
            .fold(&m["counters"], |v, k| &v[*k])
            .as_u64()
            .unwrap()
    };
    let batches = ["reclaim", "tlb_ubc_flushes"];
    let (full, page) = (["cpu", "tlb_flush_full"], ["cpu", "tlb_flush_page"]);
    assert!(n(b, &batches) > 0, "{b}");
    assert_eq!(
        n(p, &batches),
        0,
        "every batch is at most 64 pages: none is flushed whole"
    );
    assert!(n(p, &full) < n(b, &full) && n(p, &page) > n(b, &page));
    // With the kernel's rule written as a policy (the recorder's), the
    // built-in's run byte for byte.
    let kernel_rule = run(&lib, &reclaim("recorder")).unwrap();
    assert_eq!(&without_notes(&kernel_rule["metrics"]), b);
}

/// A user's policy that answered as a built-in in every decision is noted
/// in the run's report; one that differed once is not, nor are built-ins.
#[test]
fn a_user_policy_that_matched_a_builtin_everywhere_is_noted() {
    let lib = lib();
    let builtin = run(&lib, &reclaim("batched")).unwrap();
    assert!(builtin["metrics"].get("policy_notes").is_none());
    let mine = run(&lib, &reclaim("my-batched")).unwrap();
    let notes = mine["metrics"]["policy_notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let n = notes[0].as_str().unwrap();
    assert!(
        n.starts_with("kernel.tlb_flush_on_unmap: \"my-batched\" answered as the built-in \"batched\" in all "),
        "{n}"
    );
    let differs = run(&lib, &reclaim("page-count-64")).unwrap();
    assert!(
        differs["metrics"].get("policy_notes").is_none(),
        "{}",
        differs["metrics"]["policy_notes"]
    );
    // Migration's hook alike; reclaim's, never asked in a run without
    // reclaim, is said to be so.
    let cfg = numa_on("xeon-e5-2699v3-2s", "my-batched").replace(
        "[workload]",
        "tlb_flush_on_unmap = \"page-count-64\"\n[workload]",
    );
    let r = run(&lib, &cfg).unwrap();
    let notes: Vec<&str> = r["metrics"]["policy_notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert_eq!(
        notes[0],
        "kernel.tlb_flush_on_unmap: \"page-count-64\" was never asked (no reclaim TLB flush in this run)"
    );
    assert!(
        notes[1].starts_with(
            "kernel.migrate_tlb_flush: \"my-batched\" answered as the built-in \"batched\" in all "
        ),
        "{notes:?}"
    );
}

/// `kernel.migrate_tlb_flush`'s `batch_flush` is what migration's batch
/// flush uses (reclaim's setting is reclaim's): on a CPU with INVLPGB a
/// broadcast policy for migration sends no shootdown IPI for its batches.
#[test]
fn migration_flushes_its_batch_as_its_own_policy_says() {
    let lib = lib();
    let ipis = run(&lib, &numa_on("epyc-7j13-milan", "batched")).unwrap();
    let mine = run(&lib, &numa_on("epyc-7j13-milan", "my-broadcast")).unwrap();
    let builtin = run(&lib, &numa_on("epyc-7j13-milan", "broadcast")).unwrap();
    let (i, m) = (&ipis["metrics"], &mine["metrics"]);
    assert_eq!(m["data_verified"], true);
    assert!(i["numa_pages_migrated"].as_u64().unwrap() > 0, "{i}");
    assert!(i["nr_tlb_remote_flush"].as_u64().unwrap() > 0, "{i}");
    assert!(
        m["nr_tlb_remote_flush"].as_u64() < i["nr_tlb_remote_flush"].as_u64(),
        "broadcast batches send no IPI"
    );
    assert_eq!(
        without_notes(m),
        builtin["metrics"],
        "as the built-in broadcast"
    );
    // Without INVLPGB, a broadcast migration flush is refused by name.
    let e = lib
        .check_config(
            &numa_on("xeon-e5-2699v3-2s", "broadcast"),
            Format::Toml,
            None,
        )
        .unwrap_err();
    let Error::Config { key, message } = e else {
        panic!("{e:?}")
    };
    assert_eq!(key, "kernel.migrate_tlb_flush");
    assert!(
        message.contains("INVLPGB") && message.contains("\"batched\""),
        "{message}"
    );
}

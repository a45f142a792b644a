//! NUMA balancing end to end: hinting faults on PROT_NONE pages, migration
//! of misplaced pages with and without a TLB shootdown, the race of two
//! threads faulting one page, content carried over, local pages left
//! alone, and a pmbench run with the scanner that is byte-identical twice.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use vmsim_core::config::{KernelConfig, Preset, RunConfig};
use vmsim_core::experiment::simulate;
use vmsim_core::kernel::mm::{Pte, VmaKind};
use vmsim_core::machine::ipi::IpiCause;
use vmsim_core::policy::{MigrateTlbFlush, NumaHintFault};
use vmsim_core::sim::Sim;
use vmsim_core::workload::{Access, Expect, Op, Pattern, Program};

const NODE_BYTES: u64 = 256 << 20;
/// Cores 18..36 (CPUs 18..36 and their SMT siblings 54..72) are node 1 on this preset.
const NODE1_CPU: usize = 18;
/// When both threads make their access (ns).
const T_ACCESS: u64 = 50_000;

fn preset() -> Preset {
    common::preset("xeon-e5-2699v3-2s")
}

fn sim(hint: NumaHintFault, flush: MigrateTlbFlush) -> Sim {
    let p = preset();
    let cfg = KernelConfig {
        numa_hint_fault: hint.into(),
        migrate_tlb_flush: flush.into(),
        ..KernelConfig::default()
    };
    common::sim(&p.name, cfg, NODE_BYTES, 0)
}

/// A thread of the test process: optionally clones a sibling first, waits
/// until `T_ACCESS`, makes `count` reads at `addr` (or a long run over its
/// own page if `busy`), then checks the page.
#[derive(Clone)]
struct Thread {
    addr: Arc<AtomicU64>,
    clone_first: bool,
    sibling_busy: bool,
    busy: bool,
    /// When the sibling makes its access (ns); the first thread's is `T_ACCESS`.
    sibling_at: u64,
    at: u64,
    step: u32,
}

impl Program for Thread {
    fn next(&mut self, _ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 if self.clone_first => Op::Clone,
            1 => self.next(0),
            2 => Op::ClockNanosleepAbs { ns: self.at },
            3 => {
                let (start, count) = if self.busy {
                    // A page of its own, next to the contended one: stays mapped and local.
                    (self.addr.load(Ordering::Relaxed) + 4096, 20_000)
                } else {
                    (self.addr.load(Ordering::Relaxed), 1)
                };
                Op::Access(Access {
                    start,
                    len: 4096,
                    pattern: Pattern::Sequential,
                    count,
                    write_permille: 0,
                    instr_per_access: 4,
                    dependent: false,
                    seed: 1,
                    until_ns: None,
                })
            }
            4 => Op::Check {
                start: self.addr.load(Ordering::Relaxed),
                len: 4096,
                expect: Expect::AccessWrites,
            },
            _ => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        0
    }
    fn fork(&self) -> Option<Box<dyn Program>> {
        Some(Box::new(Thread {
            clone_first: false,
            busy: self.sibling_busy,
            sibling_busy: false,
            at: self.sibling_at,
            sibling_at: 0,
            step: 0,
            addr: self.addr.clone(),
        }))
    }
}

/// The page's content: zeros, which the threads' closing check expects of
/// a page they never wrote. A migration that did not carry the content over
/// would leave the new frame's stale tag, and the check would fail.
const TAG: u64 = 0;

/// One process with two threads on node 1 and one page (tag `TAG`) on
/// `page_node`, PROT_NONE as the scanner leaves it, and a second page,
/// local and accessible, for the busy sibling. Returns the sim, the mm,
/// the page's address and its frame.
fn setup(s: &mut Sim, page_node: usize, sibling_busy: bool) -> (usize, u64, u64) {
    let addr = Arc::new(AtomicU64::new(0));
    let t = s.spawn(
        Box::new(Thread {
            addr: addr.clone(),
            clone_first: true,
            sibling_busy,
            busy: false,
            at: T_ACCESS,
            sibling_at: T_ACCESS,
            step: 0,
        }),
        NODE1_CPU,
    );
    let mm = s.tasks[t].mm.unwrap();
    let a = s.kernel.mms[mm].mmap(2 << 20, VmaKind::AnonPrivate, true);
    addr.store(a, Ordering::Relaxed);
    let pfn = s.kernel.mem.alloc.alloc(page_node, 0).unwrap();
    s.kernel.mem.alloc.map_folio(pfn, 1, true);
    s.kernel.mem.alloc.tags[pfn as usize] = TAG;
    let mut pte = Pte::new(pfn, true);
    pte.protnone = true;
    s.kernel.mms[mm].set_pte(a, pte);
    let own = s.kernel.mem.alloc.alloc(1, 0).unwrap();
    s.kernel.mem.alloc.map_folio(own, 1, true);
    s.kernel.mem.alloc.tags[own as usize] = 0;
    s.kernel.mms[mm].set_pte(a + 4096, Pte::new(own, true));
    (mm, a, pfn)
}

fn tlb_ipis(s: &Sim) -> u64 {
    let i = IpiCause::TlbShootdown as usize;
    s.machine
        .cpus
        .iter()
        .map(|c| c.stats.ipis_received_by_cause[i])
        .sum()
}

fn free_pages(s: &Sim) -> u64 {
    s.kernel.mem.alloc.nr_free.iter().sum()
}

/// One process, two threads on node 1: the first accesses the page at
/// `T_ACCESS`, the second `delay_ns` later; the page starts on node 0, PROT_NONE.
fn race(delay_ns: u64) -> (Sim, u64) {
    let mut s = sim(NumaHintFault::MigrateThenMap, MigrateTlbFlush::PerPage);
    let addr = Arc::new(AtomicU64::new(0));
    let t = s.spawn(
        Box::new(Thread {
            addr: addr.clone(),
            clone_first: true,
            sibling_busy: false,
            busy: false,
            at: T_ACCESS,
            sibling_at: T_ACCESS + delay_ns,
            step: 0,
        }),
        NODE1_CPU,
    );
    let mm = s.tasks[t].mm.unwrap();
    let a = s.kernel.mms[mm].mmap(2 << 20, VmaKind::AnonPrivate, true);
    addr.store(a, Ordering::Relaxed);
    let pfn = s.kernel.mem.alloc.alloc(0, 0).unwrap();
    s.kernel.mem.alloc.map_folio(pfn, 1, true);
    s.kernel.mem.alloc.tags[pfn as usize] = TAG;
    let mut pte = Pte::new(pfn, true);
    pte.protnone = true;
    s.kernel.mms[mm].set_pte(a, pte);
    let free0 = free_pages(&s);
    s.run(&mut |_| {}).unwrap();
    (s, free0)
}

#[test]
fn two_threads_fault_one_page_one_migrates_the_other_maps_it() {
    // At the same time: the second finds the folio isolated and maps the page.
    let (s, free0) = race(0);
    let n = &s.kernel.numa.stat;
    assert_eq!(
        s.kernel.vmstat.numa_hint_faults, 2,
        "both threads took the hinting fault"
    );
    assert_eq!(
        n.numa_isolate_fail, 1,
        "the second found the folio isolated"
    );
    assert_eq!(
        (n.numa_pages_migrated, n.pgmigrate_success, n.pgmigrate_fail),
        (1, 1, 0)
    );
    // The loser made the PTE accessible again, so the winner's unmap had to flush.
    assert_eq!(n.migrate_unmap_flushes, 1);
    assert_eq!(tlb_ipis(&s), 1);
    // Both threads read the page's content back; after the exit nothing is left allocated.
    assert!(s
        .tasks
        .iter()
        .all(|t| t.pages_checked > 0 && t.bad_pages == 0));
    assert_eq!(
        free_pages(&s),
        free0 + 1,
        "every page freed at exit, none leaked"
    );
}

#[test]
fn a_thread_that_faults_on_the_migration_entry_waits_for_it() {
    // 1.2 us later: the first thread's unmap has made the PTE a migration
    // entry and the copy is under way; the second sleeps until the remap.
    let (s, free0) = race(1_200);
    let n = &s.kernel.numa.stat;
    assert_eq!(n.migration_entry_waits, 1, "{n:?}");
    assert_eq!((n.numa_isolate_fail, n.numa_pages_migrated), (0, 1));
    assert_eq!(tlb_ipis(&s), 0, "PROT_NONE throughout: no shootdown");
    assert_eq!(
        s.kernel.vmstat.numa_hint_faults, 1,
        "the retry finds the new page mapped"
    );
    assert!(s
        .tasks
        .iter()
        .all(|t| t.pages_checked > 0 && t.bad_pages == 0));
    assert_eq!(free_pages(&s), free0 + 1);
}

#[test]
fn migrating_while_prot_none_needs_no_shootdown_mapping_first_does() {
    let mut ipis = Vec::new();
    for hint in [NumaHintFault::MigrateThenMap, NumaHintFault::MapThenMigrate] {
        let mut s = sim(hint, MigrateTlbFlush::PerPage);
        // Only the first thread touches the page; its sibling runs on another
        // CPU of the same mm throughout, so that CPU is in mm_cpumask.
        setup(&mut s, 0, true);
        s.run(&mut |_| {}).unwrap();
        assert_eq!(s.kernel.numa.stat.numa_pages_migrated, 1, "{hint:?}");
        assert!(
            s.tasks
                .iter()
                .all(|t| t.pages_checked > 0 && t.bad_pages == 0),
            "the content moved with the page ({hint:?})"
        );
        ipis.push((s.kernel.numa.stat.migrate_unmap_flushes, tlb_ipis(&s)));
    }
    assert_eq!(
        ipis[0],
        (0, 0),
        "PROT_NONE PTE: no TLB can hold it, no shootdown"
    );
    assert_eq!(
        ipis[1],
        (1, 1),
        "accessible PTE: one shootdown to the sibling's CPU"
    );
}

#[test]
fn batched_migration_flush_sends_one_full_flush_per_cpu() {
    let mut s = sim(NumaHintFault::MapThenMigrate, MigrateTlbFlush::Batched);
    setup(&mut s, 0, true);
    let full0: u64 = s.machine.cpus.iter().map(|c| c.stats.tlb_flush_full).sum();
    s.run(&mut |_| {}).unwrap();
    assert_eq!(tlb_ipis(&s), 1);
    let full: u64 = s.machine.cpus.iter().map(|c| c.stats.tlb_flush_full).sum();
    assert!(full > full0, "the batch flush empties whole TLBs");
}

#[test]
fn a_local_page_is_never_migrated() {
    for hint in [NumaHintFault::MigrateThenMap, NumaHintFault::MapThenMigrate] {
        let mut s = sim(hint, MigrateTlbFlush::PerPage);
        setup(&mut s, 1, false);
        s.run(&mut |_| {}).unwrap();
        // The first fault finds the page local and maps it; the other thread
        // then finds it mapped.
        assert_eq!(s.kernel.vmstat.numa_hint_faults, 1);
        assert_eq!(s.kernel.vmstat.numa_hint_faults_local, 1);
        assert_eq!(s.kernel.numa.stat.numa_pages_migrated, 0);
        assert_eq!(
            s.kernel.vmstat.pgalloc, 0,
            "no page allocated for a migration"
        );
        assert_eq!(tlb_ipis(&s), 0);
    }
}

fn pmbench(hint: &str) -> serde_json::Value {
    let text = format!(
        r#"
machine = "xeon-e5-2699v3-2s"
seed = 5
[kernel]
thp = "never"
numa_balancing = true
numa_hint_fault = "{hint}"
numa_balancing_scan_delay_ms = 20
numa_balancing_scan_period_min_ms = 20
[workload]
kind = "pmbench"
nr_processes = 8
nr_threads = 8
mapsize_mib = 4480
duration_s = 0.6
bind_node = 1
node_memory_mib = 32768
eater_mib = 20480
eater_node = 1
eater_exit_s = 0.15
"#
    );
    let cfg = RunConfig::from_table(toml::from_str(&text).unwrap(), None, 1.0 / 512.0).unwrap();
    simulate(&cfg, &mut |_| {}).unwrap()
}

#[test]
fn pmbench_with_64_threads_migrates_verifies_and_is_deterministic() {
    let a = pmbench("migrate-then-map");
    let b = pmbench("migrate-then-map");
    assert_eq!(
        a.to_string(),
        b.to_string(),
        "same config and seed, same bytes"
    );
    assert_eq!(a["data_verified"], true);
    assert!(
        a["numa_pte_updates"].as_u64().unwrap() > 0,
        "the scanner ran"
    );
    assert!(a["numa_pages_migrated"].as_u64().unwrap() > 0, "{a}");
    assert!(a["pmbench_throughput_aps"].as_f64().unwrap() > 0.0);
    let m = pmbench("map-then-migrate");
    assert_eq!(m["data_verified"], true);
    assert!(
        m["tlb_shootdown_interrupts"].as_u64().unwrap()
            > a["tlb_shootdown_interrupts"].as_u64().unwrap(),
        "mapping first shoots down more"
    );
}

/// The result of a THP run whose NUMA scanner starts at once and scans
/// `scan_mb` per pass, with `workload` as its `[workload]` table's body.
fn run_thp_fast_scan(scan_mb: u64, workload: &str) -> serde_json::Value {
    let text = format!(
        "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"always\"\nnuma_balancing = true\n\
         numa_balancing_scan_delay_ms = 1\nnuma_balancing_scan_period_min_ms = 1\n\
         numa_balancing_scan_size_mb = {scan_mb}\n[workload]\n{workload}"
    );
    let cfg = RunConfig::from_table(toml::from_str(&text).unwrap(), None, 1.0).unwrap();
    let r = simulate(&cfg, &mut |_| {}).unwrap();
    assert_eq!(r["data_verified"], true);
    r
}

#[test]
fn huge_pmds_are_scanned_and_fault_but_stay_in_place() {
    let r = run_thp_fast_scan(
        4,
        r#"kind = "pmbench"
nr_processes = 2
nr_threads = 2
mapsize_mib = 16
duration_s = 0.03
bind_node = 1
node_memory_mib = 64
eater_mib = 48
eater_node = 1
eater_exit_s = 0.02
"#,
    );
    let huge = r["numa_huge_pte_updates"].as_u64().unwrap();
    assert!(huge > 0, "{r}");
    // A huge PMD counts 512; 4 KiB PTEs (THP fallbacks once a node has no
    // free 2 MiB block) count one each.
    let small = r["numa_pte_updates"].as_u64().unwrap() - huge * 512;
    assert!(r["numa_hint_faults"].as_u64().unwrap() > 0);
    // THP migration is not modelled: only 4 KiB pages can have moved.
    assert!(r["numa_pages_migrated"].as_u64().unwrap() <= small, "{r}");
}

/// `change_huge_pmd()` of 4.x-6.x skips only the huge zero page and an
/// entry already PROT_NONE: the huge pages a forked child still shares with
/// its parent (copy-on-write) are marked as well, where the 4 KiB path
/// (`change_pte_range`) skips shared COW pages. usemem's children share
/// every huge page the parent populated until they write it.
#[test]
fn shared_cow_huge_pmds_are_marked_as_change_huge_pmd_marks_them() {
    let r = run_thp_fast_scan(
        8,
        r#"kind = "usemem"
nr_task = 2
size_per_task_mib = 64
prealloc = true
"#,
    );
    let vm = &r["counters"]["vmstat"];
    let huge = vm["numa_huge_pte_updates"].as_u64().unwrap();
    assert!(huge > 0, "{vm}");
    assert_eq!(vm["numa_pte_updates"].as_u64().unwrap(), huge * 512);
}

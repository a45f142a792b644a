//! Reclaim of mapped page-cache folios end to end: readers of files larger
//! than memory keep kswapd and direct reclaim busy; every page read back is
//! the cache's folio with its content, TLBs never hold a translation whose
//! PTE is gone (the TLB truth check stops the run otherwise), a batched
//! flush IPIs each CPU at most once, and refaults get their content back.

mod common;

use vmsim_core::config::{embedded_machines, KernelConfig, Preset};
use vmsim_core::kernel::Kernel;
use vmsim_core::machine::ipi::IpiCause;
use vmsim_core::policy::TlbFlushOnUnmap;
use vmsim_core::sim::Sim;
use vmsim_core::workload::lrufile::FileReader;
use vmsim_core::workload::{Access, Op, Pattern, Program};

const NODE_BYTES: u64 = 16 << 20;

fn sim(flush: TlbFlushOnUnmap) -> Sim {
    sim_on("xeon-e5-2699v3-2s", flush)
}

fn sim_on(preset: &str, flush: TlbFlushOnUnmap) -> Sim {
    let cfg = KernelConfig {
        tlb_flush_on_unmap: flush.into(),
        ..KernelConfig::default()
    };
    let mut s = common::sim(preset, cfg, NODE_BYTES, 0);
    for n in 0..s.machine.topo.nr_nodes() {
        s.kswapd_run(n);
    }
    s
}

/// Runs `readers` readers, each of its own file of `file_bytes`, on CPUs 1.. (CPU 0 keeps kswapd0).
fn run_readers(flush: TlbFlushOnUnmap, readers: usize, file_bytes: u64) -> (Sim, Vec<usize>) {
    let mut s = sim(flush);
    let pids: Vec<usize> = (0..readers)
        .map(|i| {
            let f = s.kernel.create_sparse_file(file_bytes);
            s.spawn(Box::new(FileReader::new(f, file_bytes)), 1 + i)
        })
        .collect();
    s.run(&mut |_| {}).unwrap();
    (s, pids)
}

#[test]
fn readers_of_files_beyond_memory_read_everything_back_under_both_flush_policies() {
    for flush in [TlbFlushOnUnmap::PerPage, TlbFlushOnUnmap::Batched] {
        // Four readers of 16 MiB each: twice the 32 MiB of the two nodes.
        let (s, pids) = run_readers(flush, 4, 16 << 20);
        for &t in &pids {
            let task = &s.tasks[t];
            assert_eq!(
                (task.pages_checked, task.bad_pages),
                (4096, 0),
                "{flush:?}: {:?}",
                task.first_bad
            );
        }
        let r = &s.kernel.reclaim.stat;
        assert!(
            r.pgsteal_kswapd > 0 && r.pgscan_kswapd >= r.pgsteal_kswapd,
            "{flush:?}: {r:?}"
        );
        assert!(
            s.kernel
                .mem
                .pgdat
                .iter()
                .map(|p| p.nr_kswapd_wakeups)
                .sum::<u64>()
                > 0
        );
        // Every freed folio left the cache; what is cached is on an LRU list.
        let cached: usize = s
            .kernel
            .pagecache
            .inodes
            .iter()
            .map(|i| i.pages.len())
            .sum();
        let on_lru: usize = (0..2).map(|n| s.kernel.nr_file_lru(n)).sum();
        assert_eq!(cached, on_lru, "{flush:?}");
        // Each remote flush IPIs a CPU at most once.
        let flushes = s.kernel.vmstat.nr_tlb_remote_flush;
        for (c, cpu) in s.machine.cpus.iter().enumerate() {
            assert!(
                cpu.stats.ipis_received_by_cause[IpiCause::TlbShootdown as usize] <= flushes,
                "{flush:?}: CPU {c}"
            );
        }
        // Batched unmaps leave the readers' mms marked; each reader's munmap
        // (zap_pte_range → flush_tlb_batched_pending) caught up once.
        for &t in &pids {
            let mm = &s.kernel.mms[s.tasks[t].mm.unwrap()];
            let pending = mm.tlb_flush_batched & 0x7fff;
            assert_eq!(mm.tlb_flush_batched >> 16, pending, "{flush:?}");
            assert_eq!(pending > 0, flush == TlbFlushOnUnmap::Batched, "{flush:?}");
        }
        if flush == TlbFlushOnUnmap::Batched {
            assert!(r.tlb_ubc_flushes > 0);
            assert!(
                r.tlb_ubc_ipis <= r.tlb_ubc_flushes * pids.len() as u64,
                "{r:?}"
            );
        } else {
            assert_eq!(r.tlb_ubc_flushes, 0);
        }
    }
}

#[test]
fn batching_sends_fewer_shootdowns_than_flushing_each_page() {
    let (per_page, _) = run_readers(TlbFlushOnUnmap::PerPage, 4, 16 << 20);
    let (batched, _) = run_readers(TlbFlushOnUnmap::Batched, 4, 16 << 20);
    let ipis = |s: &Sim| {
        s.machine
            .cpus
            .iter()
            .map(|c| c.stats.ipis_received_by_cause[IpiCause::TlbShootdown as usize])
            .sum::<u64>()
    };
    assert!(
        ipis(&batched) < ipis(&per_page),
        "batched {} per-page {}",
        ipis(&batched),
        ipis(&per_page)
    );
    assert!(ipis(&per_page) > 0);
}

/// Reads its file through twice.
struct TwoPasses {
    ino: usize,
    size: u64,
    step: u32,
    addr: u64,
}

impl Program for TwoPasses {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let pass = Access {
            start: self.addr,
            len: self.size,
            pattern: Pattern::Strided { stride: 4096 },
            count: self.size / 4096,
            write_permille: 0,
            instr_per_access: 24,
            dependent: false,
            seed: 0,
            until_ns: None,
        };
        match self.step {
            1 => Op::MmapFile {
                ino: self.ino,
                len: self.size,
            },
            2 | 3 => {
                if self.step == 2 {
                    self.addr = ret;
                }
                Op::Access(Access {
                    start: self.addr,
                    ..pass
                })
            }
            _ => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        2 * self.size
    }
}

#[test]
fn reclaimed_pages_refault_with_their_content() {
    let mut s = sim(TlbFlushOnUnmap::Batched);
    let size = 48 << 20;
    let f = s.kernel.create_sparse_file(size);
    s.spawn(Box::new(FileReader::new(f, size)), 1);
    s.run(&mut |_| {}).unwrap();
    // Frames not in the page cache now hold other data, as reused memory would.
    for pfn in 0..s.kernel.mem.alloc.tags.len() as u64 {
        if !s.kernel.pagecache.owner.contains_key(&pfn) {
            s.kernel.mem.alloc.tags[pfn as usize] = 0xBAD0_0000 ^ pfn;
        }
    }
    let t = s.spawn(
        Box::new(TwoPasses {
            ino: f,
            size,
            step: 0,
            addr: 0,
        }),
        2,
    );
    s.run(&mut |_| {}).unwrap();
    let task = &s.tasks[t];
    assert_eq!(
        (task.pages_checked, task.bad_pages),
        (2 * size / 4096, 0),
        "{:?}",
        task.first_bad
    );
    assert!(
        s.kernel.reclaim.stat.workingset_refault_file > size / 4096,
        "{:?}",
        s.kernel.reclaim.stat
    );
}

/// Reads a 64-page file (one word per page), stays busy writing anonymous
/// memory while reclaim runs on another CPU, then reads the file again.
struct ReadBusyReread {
    ino: usize,
    step: u32,
    file: u64,
}

impl Program for ReadBusyReread {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let pass = |start| Access {
            start,
            len: 64 * 4096,
            pattern: Pattern::Strided { stride: 4096 },
            count: 64,
            write_permille: 0,
            instr_per_access: 24,
            dependent: false,
            seed: 0,
            until_ns: None,
        };
        match self.step {
            1 => Op::MmapFile {
                ino: self.ino,
                len: 64 * 4096,
            },
            2 => {
                self.file = ret;
                Op::Access(pass(self.file))
            }
            3 => Op::Mmap {
                len: 8 << 20,
                populate: false,
            },
            4 => Op::WriteSeq {
                start: ret,
                len: 8 << 20,
                seed: 9,
                instr_per_word: vmsim_core::workload::usemem::USEMEM_INSTR_PER_WORD,
            },
            5 => Op::Access(pass(self.file)),
            _ => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        0
    }
}

/// Sleeps until `at`, then runs reclaim rounds on node 0 from its CPU.
struct Shrinker {
    at: u64,
    rounds: u32,
}

impl vmsim_core::kernel::kthread::KthreadFn for Shrinker {
    fn name(&self) -> String {
        "shrinker".into()
    }
    fn step(
        &mut self,
        _k: &mut Kernel,
        _cpu: usize,
        now: u64,
        work: &mut std::collections::VecDeque<vmsim_core::kernel::Work>,
    ) -> vmsim_core::kernel::kthread::KthreadStep {
        use vmsim_core::kernel::kthread::KthreadStep;
        if now < self.at {
            return KthreadStep::SleepUntil(self.at);
        }
        if self.rounds == 0 {
            return KthreadStep::Exit;
        }
        self.rounds -= 1;
        work.push_back(vmsim_core::kernel::Work::Kernel(
            vmsim_core::kernel::KStep::ShrinkNode {
                node: 0,
                kswapd: false,
            },
        ));
        KthreadStep::Continue
    }
}

fn reclaim_under_a_running_reader(inject: bool) -> (Sim, Result<(), vmsim_core::api::Error>) {
    reclaim_under_a_running_reader_with(TlbFlushOnUnmap::Batched, inject)
}

fn reclaim_under_a_running_reader_with(
    flush: TlbFlushOnUnmap,
    inject: bool,
) -> (Sim, Result<(), vmsim_core::api::Error>) {
    reclaim_under_a_running_reader_on("xeon-e5-2699v3-2s", flush, inject)
}

fn reclaim_under_a_running_reader_on(
    preset: &str,
    flush: TlbFlushOnUnmap,
    inject: bool,
) -> (Sim, Result<(), vmsim_core::api::Error>) {
    let mut s = sim_on(preset, flush);
    let f = s.kernel.create_sparse_file(64 * 4096);
    let t = s.spawn(
        Box::new(ReadBusyReread {
            ino: f,
            step: 0,
            file: 0,
        }),
        1,
    );
    let mm = s.tasks[t].mm.unwrap();
    s.kernel.mms[mm].inject_no_shootdown = inject;
    // 1 ms in: the first pass is done, the anonymous writes are under way.
    s.kthread_run(
        Box::new(Shrinker {
            at: 2_300_000,
            rounds: 8,
        }),
        0,
    );
    let r = s.run(&mut |_| {});
    (s, r)
}

#[test]
fn the_tlb_truth_check_catches_a_batched_flush_that_misses_a_cpu() {
    let (s, r) = reclaim_under_a_running_reader(false);
    r.expect("with the batch's IPIs sent, no TLB entry is stale");
    assert!(
        s.kernel.reclaim.stat.pgsteal_direct >= 32,
        "{:?}",
        s.kernel.reclaim.stat
    );
    assert!(
        s.kernel.reclaim.stat.tlb_ubc_ipis >= 1,
        "the reader's CPU was running its mm: IPI'd"
    );
    assert!(
        s.kernel.reclaim.stat.workingset_refault_file >= 32,
        "the second pass refaulted"
    );
    let (_, r) = reclaim_under_a_running_reader(true);
    match r {
        Err(vmsim_core::api::Error::Internal(m)) => {
            assert!(m.contains("stale TLB entry on CPU 1"), "{m}")
        }
        other => panic!("a missing flush must fail the run, got {other:?}"),
    }
}

#[test]
fn per_page_flushing_sends_a_round_per_page_and_batching_one_ipi_per_batch() {
    let shootdowns =
        |s: &Sim| s.machine.cpus[1].stats.ipis_received_by_cause[IpiCause::TlbShootdown as usize];
    let (s, r) = reclaim_under_a_running_reader_with(TlbFlushOnUnmap::PerPage, false);
    r.unwrap();
    // Every reclaimed page was mapped by the reader running on CPU 1: one IPI each.
    let stolen = s.kernel.reclaim.stat.pgsteal_direct;
    assert!(stolen >= 32);
    assert_eq!(
        (s.kernel.vmstat.nr_tlb_remote_flush, shootdowns(&s)),
        (stolen, stolen)
    );
    let (s, r) = reclaim_under_a_running_reader_with(TlbFlushOnUnmap::Batched, false);
    r.unwrap();
    // One flush per batch that unmapped anything, one IPI to CPU 1 in each.
    let batches = s.kernel.reclaim.stat.tlb_ubc_flushes;
    assert!(
        batches >= 1 && batches * 32 >= s.kernel.reclaim.stat.pgsteal_direct,
        "{:?}",
        s.kernel.reclaim.stat
    );
    assert_eq!(
        (s.kernel.vmstat.nr_tlb_remote_flush, shootdowns(&s)),
        (batches, batches)
    );
}

/// `__alloc_pages_slowpath`: on one node, readers that fill memory faster
/// than the fault-entry reclaim frees it find no free page; the fault
/// reclaims and retries instead of failing (this config ran out of memory
/// before the retry).
#[test]
fn a_fault_that_finds_no_free_page_reclaims_and_retries() {
    let cfg = r#"
machine = "xeon-e5-1650v3-1s"
seed = 0
[kernel]
tlb_flush_on_unmap = "batched"
[workload]
kind = "lru-file-mmap-read"
ram_mib = 24
nr_task = 4
file_ram_ratio = 2
"#;
    let out = vmsim_core::api::run_config(cfg, vmsim_core::api::Format::Toml, None, &mut |_, _| {})
        .expect("the run completes");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["metrics"]["data_verified"], true);
    assert!(v["metrics"]["pgsteal_direct"].as_u64().unwrap() > 0);
}

fn shootdowns_received(s: &Sim) -> u64 {
    s.machine
        .cpus
        .iter()
        .map(|c| c.stats.ipis_received_by_cause[IpiCause::TlbShootdown as usize])
        .sum()
}

/// INVLPGB broadcast (6.15's `arch_tlbbatch_flush` on AMD): the reader's
/// TLB is emptied by hardware, no IPI is sent, and the TLB truth check
/// (which stops the run on any stale entry) finds nothing stale.
#[test]
fn broadcast_invalidation_sends_no_shootdown_and_leaves_no_stale_entry() {
    let (s, r) =
        reclaim_under_a_running_reader_on("epyc-7j13-milan", TlbFlushOnUnmap::Broadcast, false);
    r.expect("every TLB was invalidated by the broadcast before the folios were freed");
    let rc = &s.kernel.reclaim.stat;
    assert!(rc.pgsteal_direct >= 32, "{rc:?}");
    assert!(
        rc.workingset_refault_file >= 32,
        "the second pass refaulted"
    );
    assert!(rc.tlb_ubc_invlpgb >= 1, "{rc:?}");
    assert_eq!((rc.tlb_ubc_flushes, rc.tlb_ubc_ipis), (0, 0));
    assert_eq!(shootdowns_received(&s), 0);
    assert_eq!(s.kernel.vmstat.nr_tlb_remote_flush, 0);
    // The shrinker on CPU 0 issued every broadcast; it reached the reader's CPU 1 and all others.
    assert_eq!(s.machine.cpus[0].stats.invlpgb_issued, rc.tlb_ubc_invlpgb);
    for cpu in [0, 1, 255] {
        assert_eq!(
            s.machine.cpus[cpu].stats.tlb_flush_broadcast,
            rc.tlb_ubc_invlpgb
        );
    }
    // The same run batched through IPIs does send shootdowns.
    let (b, r) =
        reclaim_under_a_running_reader_on("epyc-7j13-milan", TlbFlushOnUnmap::Batched, false);
    r.unwrap();
    assert!(shootdowns_received(&b) >= 1 && b.kernel.reclaim.stat.tlb_ubc_invlpgb == 0);
}

#[test]
fn readers_beyond_memory_read_everything_back_with_broadcast_invalidation() {
    let mut s = sim_on("epyc-7j13-milan", TlbFlushOnUnmap::Broadcast);
    let pids: Vec<usize> = (0..4)
        .map(|i| {
            let f = s.kernel.create_sparse_file(16 << 20);
            s.spawn(Box::new(FileReader::new(f, 16 << 20)), 1 + i)
        })
        .collect();
    s.run(&mut |_| {}).unwrap();
    for &t in &pids {
        assert_eq!((s.tasks[t].pages_checked, s.tasks[t].bad_pages), (4096, 0));
    }
    assert!(s.kernel.reclaim.stat.tlb_ubc_invlpgb > 0);
    assert_eq!(shootdowns_received(&s), 0);
}

#[test]
fn broadcast_on_a_cpu_without_invlpgb_is_a_config_error_naming_the_field_and_preset() {
    let cfg = r#"
machine = "xeon-e5-2699v3-2s"
[kernel]
tlb_flush_on_unmap = "broadcast"
[workload]
kind = "lru-file-mmap-read"
ram_mib = 64
"#;
    match vmsim_core::api::run_config(cfg, vmsim_core::api::Format::Toml, None, &mut |_, _| {}) {
        Err(vmsim_core::api::Error::Config { key, message }) => {
            assert_eq!(key, "kernel.tlb_flush_on_unmap");
            assert!(
                message.contains("xeon-e5-2699v3-2s") && message.contains("INVLPGB"),
                "{message}"
            );
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    // A preset that claims INVLPGB must give its costs.
    let (name, text) = embedded_machines()
        .iter()
        .find(|(n, _)| *n == "epyc-7j13-milan")
        .unwrap();
    let cut: String = text
        .lines()
        .filter(|l| !l.starts_with("tlbsync_latency_ns"))
        .map(|l| format!("{l}\n"))
        .collect();
    match Preset::parse(&cut, name) {
        Err(vmsim_core::api::Error::Config { key, .. }) => {
            assert_eq!(key, "costs.tlbsync_latency_ns")
        }
        other => panic!("{other:?}"),
    }
}

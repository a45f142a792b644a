//! NUMA balancing's state (include/linux/sched.h's `numa_*` task fields,
//! include/linux/mm.h's `cpupid` helpers): each task's scan and fault
//! state, the `cpupid` of the last hinting fault on every frame, and the
//! migration counters. The paths are sched/numa.rs (the scanner and the
//! scan period), mempolicy.rs (PROT_NONE and the placement decision) and
//! migrate.rs (the migration).

/// No `cpupid` recorded on the frame (`cpupid_pid_unset`).
pub const CPUPID_UNSET: u32 = u32::MAX;

/// `cpu_pid_to_cpupid`: 12 bits of CPU, 20 of pid.
#[inline]
pub fn cpupid(cpu: usize, pid: usize) -> u32 {
    ((cpu as u32 & 0xfff) << 20) | (pid as u32 & 0xf_ffff)
}
#[inline]
pub fn cpupid_to_cpu(c: u32) -> usize {
    (c >> 20) as usize
}
#[inline]
pub fn cpupid_to_pid(c: u32) -> usize {
    (c & 0xf_ffff) as usize
}

crate::counters! {
/// NUMA balancing's counters, with their /proc/vmstat names.
pub struct NumaStat {
    /// Pages migrated by NUMA balancing (`numa_pages_migrated`).
    pub numa_pages_migrated: u64,
    /// Pages migrated successfully (`pgmigrate_success`).
    pub pgmigrate_success: u64,
    /// Pages whose migration failed after isolation (`pgmigrate_fail`).
    pub pgmigrate_fail: u64,
    /// Hinting faults that found the folio already isolated by another
    /// migration (`isolate_lru_page` failed) and just mapped it (no
    /// /proc/vmstat counter exists).
    pub numa_isolate_fail: u64,
    /// Misplaced pages not migrated because the target node had no free
    /// memory above its high watermark (`migrate_balanced_pgdat` false; no
    /// /proc/vmstat counter exists).
    pub numa_migrate_node_full: u64,
    /// Faults that found a migration entry and waited for the migration
    /// (`migration_entry_wait`; no /proc/vmstat counter exists).
    pub migration_entry_waits: u64,
    /// Migrations whose unmap found an accessible PTE and flushed TLBs.
    pub migrate_unmap_flushes: u64,
    /// Scans made by `task_numa_work` (no /proc/vmstat counter exists).
    pub task_numa_work_runs: u64,
}
}

/// A task's NUMA balancing state.
#[derive(Clone, Debug, Default)]
pub struct TaskNuma {
    /// `numa_scan_period` (ms, unscaled); 0 until the first scan sets it.
    pub scan_period: u64,
    pub scan_period_max: u64,
    /// `node_stamp`: the run time (cycles) at which the task next scans.
    pub node_stamp: u64,
    /// The task's copy of its mm's `numa_scan_seq`.
    pub scan_seq: u64,
    /// `numa_faults_locality`: remote, local, failed migrations.
    pub faults_locality: [u64; 3],
    /// Hinting faults since the last period update: shared, private.
    pub faults_priv: [u64; 2],
    /// `se.sum_exec_runtime` in cycles, up to the task's last switch out.
    pub sum_exec_runtime: u64,
    /// Times the period was updated (for tests and reports).
    pub nr_period_updates: u64,
}

/// NUMA balancing's state.
pub struct NumaBalancing {
    pub stat: NumaStat,
    /// Per frame: the cpupid of the last NUMA hinting fault (kernel/mempolicy.rs).
    pub last_cpupid: Vec<u32>,
    /// Per task (by pid): the scan and fault state (kernel/sched/numa.rs).
    pub tasks: Vec<TaskNuma>,
}

impl NumaBalancing {
    pub fn new(nr_frames: u64) -> NumaBalancing {
        NumaBalancing {
            stat: NumaStat::default(),
            last_cpupid: vec![CPUPID_UNSET; nr_frames as usize],
            tasks: Vec::new(),
        }
    }
}

//! pmbench (docs/mechanisms.md#pmbench) and a memory eater, as in the experiment
//! of "NUMA balancing: reduce TLB flush via delaying mapping on hint page
//! fault": an eater allocates and touches memory on one node, then
//! pmbench processes start, each mapping its own region and running
//! worker threads on the CPUs of one node; the eater exits a fixed time
//! after pmbench starts, freeing its memory, and NUMA balancing moves
//! pmbench's pages to the freed node.
//!
//! pmbench's worker (`main_bm_thread`): a warm-up pass of `setsize_pages`
//! accesses with the benchmark's pattern (unless `cold`), then accesses
//! until its own duration has passed; each access is one 8-byte read or
//! write of a page drawn from the pattern, timed by the CPU (rdtsc around
//! it, so the next access waits for it: dependent). Throughput is LKP's
//! `pmbench.throughput.aps`: the sum over workers of benchmark accesses
//! over the worker's measured time. The control thread of each process
//! takes no part; it waits for the workers, then checks the map's content
//! against what the workers wrote.
//!
//! Differences from pmbench: a normal draw outside the set is redrawn
//! (pmbench clamps it to the mean page); the offset in the page is a
//! random 8-byte word (pmbench: a random 32-bit word); the start barrier
//! between processes is a 10 µs poll of the eater's readiness.

use super::base::Workload;
use crate::error::Error;
use crate::kernel::uapi::{Access, Expect, Op, Pattern, Program};
use crate::machine::ipi::CpuMask;
use crate::machine::topology::Topology;
use crate::sim::Sim;
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PmbenchPattern {
    Linear,
    Uniform,
    Normal,
}
#[derive(Clone, Debug, Serialize)]
pub struct PmbenchConfig {
    pub nr_processes: u64,
    /// Worker threads per process (`-j`), sharing the process's map.
    pub nr_threads: u64,
    /// Bytes each process maps (`-m`), scaled.
    pub mapsize: u64,
    /// Bytes of the map accessed (`-s`), scaled.
    pub setsize: u64,
    pub pattern: PmbenchPattern,
    /// `-e` shape of the normal pattern: its standard deviation, as a
    /// fraction of the set's pages (so that it scales with the set).
    pub stdev_fraction: f64,
    /// `-e` shape of the linear pattern: its stride in pages.
    pub stride_pages: u64,
    /// `-r`: percentage of reads.
    pub read_ratio: u64,
    /// Benchmark duration per thread, ns, scaled.
    pub duration_ns: u64,
    /// `-c`: no warm-up pass.
    pub cold: bool,
    /// The node whose CPUs run pmbench (taskset / numactl --cpunodebind).
    pub bind_node: u64,
    /// Simulated memory per node, scaled.
    pub node_memory: u64,
    /// The memory eater: bytes (0: none), its node, and when it exits
    /// (ns after pmbench starts, scaled; required with an eater).
    pub eater: u64,
    pub eater_node: u64,
    pub eater_exit_ns: u64,
    pub scale: f64,
}

/// Instructions per pmbench access: the pattern draw (for `normal`,
/// Box–Muller: two uniform draws, `log`, `sqrt`, `cos` through libm, ~100),
/// the offset and read/write draws (~20), `rdtsc` and `rdtscp` around the
/// access and the latency histogram update (~30). Estimate from pmbench's
/// source (`main_bm_thread`, `pattern_normal`), not a measurement; pmbench
/// reports its own pattern-generation overhead per draw, which a run on a
/// real machine would replace this with.
pub const PMBENCH_INSTR_PER_ACCESS: u64 = 150;
/// How often a pmbench process checks whether the eater is ready (ns).
pub const START_POLL_NS: u64 = 10_000;

/// One pmbench process: the control thread, which makes the map, starts
/// the workers (each a clone running `Role::Worker`), and checks the map.
#[derive(Clone)]
struct Pmbench {
    cfg: PmbenchConfig,
    ready: Arc<AtomicBool>,
    role: Role,
    step: u32,
    map: u64,
    seed: u64,
    started: u64,
}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    Control,
    Worker(u64),
}

impl Pmbench {
    fn access(&self, count: u64, until_ns: Option<u64>, n: u64) -> Access {
        let c = &self.cfg;
        let pages = c.setsize / 4096;
        let pattern = match c.pattern {
            PmbenchPattern::Linear => Pattern::Strided {
                stride: c.stride_pages * 4096,
            },
            PmbenchPattern::Uniform => Pattern::Uniform,
            PmbenchPattern::Normal => Pattern::Normal {
                sigma_pages: (pages as f64 * c.stdev_fraction).max(1.0),
            },
        };
        Access {
            start: self.map,
            len: c.setsize,
            pattern,
            count,
            write_permille: (10 * (100 - c.read_ratio)) as u32,
            instr_per_access: PMBENCH_INSTR_PER_ACCESS,
            dependent: true,
            // Each worker draws its own sequence (pmbench seeds per thread).
            seed: self.seed ^ (n + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            until_ns,
        }
    }
}

impl Program for Pmbench {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let c = self.cfg.clone();
        match self.role {
            Role::Control => match self.step {
                1 if !self.ready.load(Ordering::Relaxed) => {
                    self.step = 0;
                    Op::Nanosleep { ns: START_POLL_NS }
                }
                1 => Op::Mmap {
                    len: c.mapsize,
                    populate: false,
                },
                2 => {
                    self.map = ret;
                    self.started = 0;
                    self.next(0)
                }
                s if s >= 3 && self.started < c.nr_threads => {
                    self.started += 1;
                    Op::Clone
                }
                s if s == 3 + c.nr_threads as u32 => Op::Wait,
                s if s == 4 + c.nr_threads as u32 => Op::Check {
                    start: self.map,
                    len: c.mapsize,
                    expect: Expect::AccessWrites,
                },
                _ => Op::Exit,
            },
            Role::Worker(n) => match self.step {
                1 if c.cold => self.next(0),
                1 => Op::Access(self.access(c.setsize / 4096, None, n)),
                2 => Op::MarkStart,
                3 => Op::Access(self.access(u64::MAX, Some(c.duration_ns), n)),
                4 => Op::MarkEnd,
                // Untimed: the map holds what every thread wrote so far.
                5 => Op::Check {
                    start: self.map,
                    len: c.mapsize,
                    expect: Expect::AccessWrites,
                },
                _ => Op::Exit,
            },
        }
    }

    fn total_bytes(&self) -> u64 {
        0
    }

    /// A clone is the next worker.
    fn fork(&self) -> Option<Box<dyn Program>> {
        let mut w = self.clone();
        w.role = Role::Worker(self.started - 1);
        w.step = 0;
        Some(Box::new(w))
    }
}

/// The memory eater: maps and touches `bytes` on the CPU's node, tells
/// pmbench it is ready, sleeps until its exit time, checks its memory and exits.
struct Eater {
    bytes: u64,
    exit_ns: u64,
    ready: Arc<AtomicBool>,
    step: u32,
    map: u64,
}

impl Program for Eater {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Mmap {
                len: self.bytes,
                populate: true,
            },
            2 => {
                self.map = ret;
                self.ready.store(true, Ordering::Relaxed);
                Op::Nanosleep { ns: self.exit_ns }
            }
            3 => Op::Check {
                start: self.map,
                len: self.bytes,
                expect: Expect::Zero,
            },
            _ => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        0
    }
}

/// The workload as configured (`kind = "pmbench"`).
pub struct PmbenchWorkload<'a>(pub &'a PmbenchConfig);

fn node_cpus(sim: &Sim, node: usize) -> (Vec<usize>, CpuMask) {
    let cpus: Vec<usize> = (0..sim.machine.topo.nr_cpus())
        .filter(|&c| sim.machine.topo.node_of(c) == node)
        .collect();
    let mut mask = CpuMask::empty();
    for &c in &cpus {
        mask.set(c);
    }
    (cpus, mask)
}

impl Workload for PmbenchWorkload<'_> {
    fn node_bytes(&self, _topo: &Topology, _nr_cpus: usize) -> u64 {
        self.0.node_memory
    }

    fn spawn(&self, sim: &mut Sim, seed: u64) -> Result<(), Error> {
        let c = self.0;
        for n in 0..sim.machine.topo.nr_nodes() {
            sim.kswapd_run(n);
        }
        let ready = Arc::new(AtomicBool::new(c.eater == 0));
        let (ecpus, emask) = node_cpus(sim, c.eater_node as usize);
        if c.eater > 0 {
            let e = Eater {
                bytes: c.eater,
                exit_ns: c.eater_exit_ns,
                ready: ready.clone(),
                step: 0,
                map: 0,
            };
            sim.spawn_bound(Box::new(e), ecpus[0], emask);
        }
        // Progress: the eater's set-up, a warm-up and the run, roughly.
        let run_ns = c.duration_ns + c.duration_ns / 4 + c.eater / 4096 * 2000;
        sim.progress_horizon = run_ns * sim.machine.freq_mhz / 1000;
        let (cpus, mask) = node_cpus(sim, c.bind_node as usize);
        for p in 0..c.nr_processes {
            let prog = Pmbench {
                cfg: c.clone(),
                ready: ready.clone(),
                role: Role::Control,
                step: 0,
                map: 0,
                seed: seed ^ (p + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93),
                started: 0,
            };
            // Control threads spread over the node's CPUs; workers follow round-robin.
            let cpu = cpus[(p as usize * c.nr_threads as usize) % cpus.len()];
            sim.spawn_bound(Box::new(prog), cpu, mask);
        }
        Ok(())
    }

    fn scale_text(&self) -> String {
        let c = self.0;
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        format!(
            "pmbench: {} processes x {} threads on node {}, each process {:.0} MiB mapped ({:.0} MiB accessed, {:?}), {:.1} ms per thread; eater {:.0} MiB on node {} exiting after {:.1} ms; {:.0} MiB per node",
            c.nr_processes,
            c.nr_threads,
            c.bind_node,
            mib(c.mapsize),
            mib(c.setsize),
            c.pattern,
            c.duration_ns as f64 / 1e6,
            mib(c.eater),
            c.eater_node,
            c.eater_exit_ns as f64 / 1e6,
            mib(c.node_memory)
        )
    }

    /// pmbench's throughput as LKP computes it, NUMA balancing's counters,
    /// TLB-shootdown interrupts and the share of cycles in `try_to_unmap`.
    fn report(&self, sim: &Sim, r: &mut Value) {
        let hz = sim.machine.freq_mhz as f64 * 1e6;
        let warm = if self.0.cold {
            0
        } else {
            self.0.setsize / 4096
        };
        let mut aps = 0.0;
        let mut accesses = 0u64;
        for t in &sim.tasks {
            let (Some(s), Some(e)) = (t.start, t.end) else {
                continue;
            };
            let n = (t.access.reads + t.access.writes).saturating_sub(warm);
            accesses += n;
            if e > s {
                aps += n as f64 / ((e - s) as f64 / hz);
            }
        }
        r["pmbench_throughput_aps"] = json!(aps);
        r["pmbench_accesses"] = json!(accesses);
        for (k, x) in sim.numa_balancing_counters() {
            r[k] = json!(x);
        }
        // The TLB line of /proc/interrupts counts shootdown IPIs received.
        let i = crate::machine::ipi::IpiCause::TlbShootdown as usize;
        let tlb: u64 = sim
            .machine
            .cpus
            .iter()
            .map(|c| c.stats.ipis_received_by_cause[i])
            .sum();
        r["tlb_shootdown_interrupts"] = json!(tlb);
        let total: u64 = sim
            .machine
            .cpus
            .iter()
            .map(|c| c.stats.user_cycles + c.stats.sys_cycles)
            .sum();
        let unmap = sim.kfn_cycles[crate::kernel::KFn::TryToUnmap as usize];
        r["try_to_unmap_cycles_share"] = json!(if total > 0 {
            unmap as f64 / total as f64
        } else {
            0.0
        });
    }
}

//! A page-fault test after Ankur Arora's `pf-test` (`taskset -c 15 bench/pf-test
//! --sz 64g --huge 1|2`) and its upstream successor `perf bench mem map -p
//! $pg -f demand` (docs/mechanisms.md#pf-test-and-perf-bench-mem-map): one task maps a `MAP_HUGETLB` region
//! and touches it once per huge page, in ascending order, so each touch is a
//! demand fault that zeroes one huge page. The timed interval runs from before
//! the mmap to after the last touch; the rate reported is bytes faulted per
//! second. Before unmapping, the task checks (untimed) that every 4 KiB
//! sub-page is zero except the line it touched.

use super::base::Workload;
use super::base::MIB;
use crate::error::Error;
use crate::kernel::uapi::{Expect, Op, Program};
use crate::machine::topology::Topology;
use crate::sim::Sim;
use serde::Serialize;
use serde_json::Value;

/// Instructions per word of the touch that faults each huge page (one line
/// a page): 24, judgement (range 1-28: one store up to usemem's measured
/// write loop). pf-test's own loop was not counted; 24 is what usemem's
/// write loop was modelled with before it was measured, kept so that the
/// touch, a few ns per 2 MiB page, does not move the clearing rates.
const TOUCH_INSTR_PER_WORD: u64 = 24;

#[derive(Clone, Debug, Serialize)]
pub struct PfTestConfig {
    /// Bytes mapped (from `size_mib`, times the scale, rounded up to whole huge pages).
    pub size: u64,
    pub size_mib: f64,
    /// "2m" or "1g".
    pub page_size: String,
    #[serde(skip)]
    pub page_shift: u32,
    /// The CPU the task is bound to (`taskset -c`); the region comes from its node.
    pub cpu: u64,
}

pub struct PfTest {
    size: u64,
    page_shift: u32,
    seed: u64,
    step: u64,
    addr: u64,
}

impl PfTest {
    /// `size` bytes (a multiple of the huge page size) in pages of `1 << page_shift`.
    pub fn new(size: u64, page_shift: u32, seed: u64) -> PfTest {
        debug_assert_eq!(size % (1 << page_shift), 0);
        PfTest {
            size,
            page_shift,
            seed,
            step: 0,
            addr: 0,
        }
    }

    fn nr_pages(&self) -> u64 {
        self.size >> self.page_shift
    }
}

impl Program for PfTest {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let nr = self.nr_pages();
        match self.step {
            1 => Op::MarkStart,
            2 => Op::MmapHugetlb {
                len: self.size,
                page_shift: self.page_shift,
            },
            s if s < 3 + nr => {
                if s == 3 {
                    self.addr = ret;
                }
                // One store to the first line of huge page s-3.
                Op::WriteSeq {
                    start: self.addr + ((s - 3) << self.page_shift),
                    len: 64,
                    seed: self.seed,
                    instr_per_word: TOUCH_INSTR_PER_WORD,
                }
            }
            s if s == 3 + nr => Op::MarkEnd,
            s if s == 4 + nr => Op::Check {
                start: self.addr,
                len: self.size,
                expect: Expect::FirstLineWritten {
                    seed: self.seed,
                    stride: 1 << self.page_shift,
                },
            },
            s if s == 5 + nr => Op::Munmap { start: self.addr },
            _ => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        self.nr_pages() * 64
    }
    /// pf-test reports the bytes it made present (every huge page it faulted), not the bytes it stored.
    fn reported_bytes(&self, _written: u64) -> u64 {
        self.size
    }
}

/// pf-test as a configured workload (`kind = "pf-test"`).
pub struct PfTestWorkload<'a>(pub &'a PfTestConfig);

impl Workload for PfTestWorkload<'_> {
    fn node_bytes(&self, topo: &Topology, _nr_cpus: usize) -> u64 {
        let p = self.0;
        // The hugetlb pool on the task's node; 1 GiB pages want whole, aligned GiBs.
        let mut per_node = vec![0u64; topo.nr_nodes()];
        per_node[topo.node_of(p.cpu as usize)] += p.size;
        if p.page_shift == 30 {
            let need = per_node.into_iter().max().unwrap_or(0) + 64 * MIB;
            return need.div_ceil(1 << 30) << 30;
        }
        super::base::with_headroom(&per_node)
    }

    fn spawn(&self, sim: &mut Sim, seed: u64) -> Result<(), Error> {
        let p = self.0;
        let cpu = p.cpu as usize;
        let node = sim.machine.topo.node_of(cpu);
        let want = p.size >> p.page_shift;
        let got = sim.kernel.hugetlb_reserve(node, p.page_shift, want);
        if got < want {
            return Err(Error::Config {
                key: "sim.node_memory_mib".into(),
                message: format!("node {node} has room for only {got} of the {want} {} huge pages pf-test needs; raise it or set 0 (sized from the workload)", p.page_size),
            });
        }
        let seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 1;
        sim.spawn(Box::new(PfTest::new(p.size, p.page_shift, seed)), cpu);
        Ok(())
    }

    fn scale_text(&self) -> String {
        let p = self.0;
        format!(
            "pf-test: 1 task on CPU {}, {} MiB of MAP_HUGETLB memory in {} page(s) of {}",
            p.cpu,
            p.size_mib,
            p.size >> p.page_shift,
            if p.page_shift == 30 { "1 GiB" } else { "2 MiB" }
        )
    }

    /// pf-test's own figure: bytes made present per second of its timed interval.
    fn report(&self, _sim: &Sim, r: &mut Value) {
        r["fault_bytes_per_s"] = r["throughput_bytes_per_s"].clone();
    }
}

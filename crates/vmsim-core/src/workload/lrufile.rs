//! vm-scalability's case-lru-file-mmap-read (docs/mechanisms.md#lru-file-mmap-read): one
//! reader per CPU, each `usemem -f FILE --readonly SIZE` on its own sparse
//! file: map it `MAP_SHARED`, `PROT_READ`, read every 8-byte word from start
//! to end once, unmap. The files together are ten times RAM, so reclaim
//! runs throughout. The reader checks every page it reads (sim/access.rs:
//! the frame is the page cache's folio of that file and index and holds its
//! content). As in usemem, the timed interval runs from the start to the end
//! of the reads; the unmap is timed apart.

use super::base::Workload;
use super::usemem::USEMEM_READ_INSTR_PER_WORD;
use crate::error::Error;
use crate::kernel::uapi::{Access, Op, Pattern, Program};
use crate::machine::topology::Topology;
use crate::sim::Sim;
use serde::Serialize;
use serde_json::{json, Value};

#[derive(Clone, Debug, Serialize)]
pub struct LruFileConfig {
    /// Readers, one per CPU from CPU 0 (the case runs one per CPU).
    pub nr_task: u64,
    /// Simulated RAM in all (from `ram_mib`, times the scale), split evenly over the nodes.
    pub ram: u64,
    pub ram_mib: f64,
    /// Total file size over RAM: 10 in the case (`ROTATE_BYTES` = 10 x RAM in Mel Gorman's description).
    pub file_ram_ratio: u64,
    /// Bytes of each reader's file: `ram * file_ram_ratio / nr_task`, in whole pages.
    pub file_size: u64,
}

/// One reader: `usemem -f FILE --readonly SIZE`.
pub struct FileReader {
    ino: usize,
    size: u64,
    step: u32,
    addr: u64,
}

impl FileReader {
    pub fn new(ino: usize, size: u64) -> FileReader {
        FileReader {
            ino,
            size,
            step: 0,
            addr: 0,
        }
    }
}

impl Program for FileReader {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::MarkStart,
            2 => Op::MmapFile {
                ino: self.ino,
                len: self.size,
            },
            3 => {
                self.addr = ret;
                // usemem's read loop, measured (USEMEM_READ_INSTR_PER_WORD).
                Op::Access(Access {
                    start: self.addr,
                    len: self.size,
                    pattern: Pattern::Sequential,
                    count: self.size / 8,
                    write_permille: 0,
                    instr_per_access: USEMEM_READ_INSTR_PER_WORD,
                    dependent: false,
                    seed: 0,
                    until_ns: None,
                })
            }
            4 => Op::MarkEnd,
            5 => Op::Munmap { start: self.addr },
            _ => Op::Exit,
        }
    }
    fn total_bytes(&self) -> u64 {
        self.size
    }
}

/// The case as a configured workload (`kind = "lru-file-mmap-read"`).
pub struct LruFileWorkload<'a>(pub &'a LruFileConfig);

impl Workload for LruFileWorkload<'_> {
    fn node_bytes(&self, topo: &Topology, _nr_cpus: usize) -> u64 {
        self.0.ram / topo.nr_nodes() as u64
    }

    /// The case script's `truncate` of one sparse file per reader, the
    /// readers on CPUs 0.., and kswapd on every node.
    fn spawn(&self, sim: &mut Sim, _seed: u64) -> Result<(), Error> {
        let c = self.0;
        for n in 0..sim.machine.topo.nr_nodes() {
            sim.kswapd_run(n);
        }
        for cpu in 0..c.nr_task as usize {
            let ino = sim.kernel.create_sparse_file(c.file_size);
            sim.spawn(Box::new(FileReader::new(ino, c.file_size)), cpu);
        }
        Ok(())
    }

    fn scale_text(&self) -> String {
        let c = self.0;
        format!(
            "lru-file-mmap-read: {} readers, one per CPU, each of its own sparse file of {:.1} MiB mapped MAP_SHARED PROT_READ; files {} x the {} MiB of simulated RAM",
            c.nr_task,
            c.file_size as f64 / (1u64 << 20) as f64,
            c.file_ram_ratio,
            c.ram_mib
        )
    }

    /// As mmtests reports the case: elapsed time per reader (mean, range,
    /// standard deviation), interrupts per second, and the reclaim counters.
    fn report(&self, sim: &Sim, r: &mut Value) {
        let hz = sim.machine.freq_mhz as f64 * 1e6;
        let el: Vec<f64> = sim
            .tasks
            .iter()
            .filter_map(|t| Some((t.end? - t.start?) as f64 / hz))
            .collect();
        let n = el.len().max(1) as f64;
        let mean = el.iter().sum::<f64>() / n;
        let (min, max) = el
            .iter()
            .fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        let sd = (el.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt();
        r["lru_file_mmap_read_elapsed_s"] = json!(mean);
        r["lru_file_mmap_read_time_range_s"] = json!(if el.is_empty() { 0.0 } else { max - min });
        r["lru_file_mmap_read_time_stddev_s"] = json!(sd);
        r["reader_elapsed_s"] = json!(el);
        let ipis: u64 = sim.machine.cpus.iter().map(|c| c.stats.ipis_received).sum();
        let elapsed = r["elapsed_s"].as_f64().unwrap_or(0.0);
        r["ipis_per_s"] = json!(if elapsed > 0.0 {
            ipis as f64 / elapsed
        } else {
            0.0
        });
        let st = &sim.kernel.reclaim.stat;
        for (k, v) in [
            ("pgscan_kswapd", st.pgscan_kswapd),
            ("pgsteal_kswapd", st.pgsteal_kswapd),
            ("pgscan_direct", st.pgscan_direct),
            ("pgsteal_direct", st.pgsteal_direct),
            ("pgactivate", st.pgactivate),
            ("pgdeactivate", st.pgdeactivate),
            ("pgrefill", st.pgrefill),
            ("workingset_refault_file", st.workingset_refault_file),
            ("pgmajfault", sim.kernel.pagecache.stat.pgmajfault),
        ] {
            r[k] = json!(v);
        }
    }
}

//! vm-scalability's case-lru-file-mmap-read (MECHANISMS.md §6.1): one
//! reader per CPU, each `usemem -f FILE --readonly SIZE` on its own sparse
//! file: map it `MAP_SHARED`, `PROT_READ`, read every 8-byte word from start
//! to end once, unmap. The files together are ten times RAM, so reclaim
//! runs throughout. The reader checks every page it reads (sched/access.rs:
//! the frame is the page cache's folio of that file and index and holds its
//! content). As in usemem, the timed interval runs from the start to the end
//! of the reads; the unmap is timed apart.

use super::{Access, Op, Pattern, Program};
use crate::kernel::sched::USEMEM_INSTR_PER_WORD;

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
                // usemem's read path is taken to cost what its write path does
                // (the same loop with a load for the store): not measured.
                Op::Access(Access {
                    start: self.addr,
                    len: self.size,
                    pattern: Pattern::Sequential,
                    count: self.size / 8,
                    write_permille: 0,
                    instr_per_access: USEMEM_INSTR_PER_WORD,
                    dependent: false,
                    seed: 0,
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

//! The page cache end to end: readers of sparse files mapped MAP_SHARED
//! read back every page's content; a corrupted page-cache folio is caught.

mod common;

use vmsim_core::config::KernelConfig;
use vmsim_core::sim::Sim;
use vmsim_core::workload::lrufile::FileReader;

const NODE_BYTES: u64 = 64 << 20;

fn sim() -> Sim {
    common::sim("xeon-e5-2699v3-2s", KernelConfig::default(), NODE_BYTES, 0)
}

#[test]
fn readers_read_back_every_page_of_their_files() {
    let mut s = sim();
    let size = 1 << 20;
    let files: Vec<usize> = (0..3).map(|_| s.kernel.create_sparse_file(size)).collect();
    let pids: Vec<usize> = files
        .iter()
        .enumerate()
        .map(|(i, &f)| s.spawn(Box::new(FileReader::new(f, size)), i))
        .collect();
    s.run(&mut |_| {}).unwrap();
    for &t in &pids {
        let task = &s.tasks[t];
        assert_eq!(
            (task.pages_checked, task.bad_pages),
            (256, 0),
            "{:?}",
            task.first_bad
        );
        assert_eq!(task.access.reads, size / 8);
    }
    for &f in &files {
        assert_eq!(
            s.kernel.pagecache.inodes[f].pages.len(),
            256,
            "the page cache keeps the file after munmap"
        );
        assert!(s.kernel.pagecache.inodes[f].i_mmap.is_empty());
    }
    // Most pages came from readahead and fault-around, not one fault each.
    assert!(
        s.kernel.pagecache.stat.pgfault_file < 3 * 256 / 8,
        "{} faults",
        s.kernel.pagecache.stat.pgfault_file
    );
    assert_eq!(s.kernel.pagecache.stat.nr_page_cache_add, 3 * 256);
}

#[test]
fn a_corrupted_page_cache_folio_is_caught_by_the_reader() {
    let mut s = sim();
    let size = 256 << 10;
    let f = s.kernel.create_sparse_file(size);
    let a = s.spawn(Box::new(FileReader::new(f, size)), 0);
    s.run(&mut |_| {}).unwrap();
    assert_eq!(s.tasks[a].bad_pages, 0);
    // A second reader maps the cached folios; one of them no longer holds the file's bytes.
    let pfn = s.kernel.find_get_page(f, 5).unwrap();
    s.kernel.mem.alloc.tags[pfn as usize] ^= 1;
    let b = s.spawn(Box::new(FileReader::new(f, size)), 1);
    s.run(&mut |_| {}).unwrap();
    assert_eq!((s.tasks[b].pages_checked, s.tasks[b].bad_pages), (64, 1));
    assert!(s.tasks[b].first_bad.as_deref().unwrap().contains("page 5"));
}

//! `mmap_lock` and `i_mmap_rwsem` with `kernel.rwsems`
//! (kernel/locking/rwsem.rs): faults take their mm's semaphore for read,
//! reclaim's rmap walks the file's; readers on many cores move the lines;
//! data is verified, runs are deterministic, and without the option
//! nothing changes.

mod common;

use common::{run_json as run, strip_volatile as strip, windowed_same_on_two_threads};
use serde_json::Value;
use vmsim_core::api::{self, Format};

fn lru(rwsems: &str) -> String {
    format!(
        "machine = \"xeon-e5-2699v3-2s\"\nseed = 3\n[kernel]\nspinlocks = \"queued\"\n{rwsems}[workload]\nkind = \"lru-file-mmap-read\"\nnr_task = 24\nram_mib = 16\n"
    )
}

fn lock(v: &Value, class: &str, k: &str) -> u64 {
    v["metrics"]["lock_stat"][class][k].as_u64().unwrap()
}

#[test]
fn faults_and_rmap_walks_take_the_semaphores_and_readers_share_them() {
    let v = run(&lru("rwsems = true\n"));
    assert_eq!(v["metrics"]["data_verified"], true);
    // Every fault takes its mm's mmap_lock for read, and each of the 24
    // readers' munmap of the file at its end for write.
    let faults = v["metrics"]["pgfault"].as_u64().unwrap();
    let mmap = lock(&v, "&mm->mmap_lock", "acquisitions");
    assert_eq!(mmap, faults + 24);
    // Every reclaim rmap walk of a mapped folio takes the file's i_mmap_rwsem.
    assert!(lock(&v, "&mapping->i_mmap_rwsem", "acquisitions") > 0);
    assert_eq!(lock(&v, "&mapping->i_mmap_rwsem", "contentions"), 0);
    // 24 CPUs' reclaim moves one line between them: more system time.
    let off = run(&lru(""));
    let sys = |v: &Value| v["metrics"]["sys_s"].as_f64().unwrap();
    assert!(sys(&v) > sys(&off), "{} {}", sys(&v), sys(&off));
}

#[test]
fn off_is_the_model_without_rwsems_and_on_is_deterministic() {
    let none = run(&lru(""));
    let off = run(&lru("rwsems = false\n"));
    assert_eq!(strip(&none), strip(&off));
    assert_eq!(lock(&off, "&mm->mmap_lock", "acquisitions"), 0);
    let one = windowed_same_on_two_threads(&lru("rwsems = true\n"));
    assert_eq!(one["metrics"]["data_verified"], true);
}

#[test]
fn rwsems_without_spinlocks_have_kernel_data_of_their_own() {
    let text = "machine = \"xeon-e5-2699v3-2s\"\n[kernel]\nthp = \"never\"\nrwsems = true\n[workload]\nkind = \"usemem\"\nnr_task = 4\nsize_per_task_mib = 8\n";
    let v = run(text);
    assert_eq!(v["metrics"]["data_verified"], true);
    // One read hold per fault, and a write hold for each fork of usemem's parent.
    let faults = v["metrics"]["pgfault"].as_u64().unwrap();
    assert!(lock(&v, "&mm->mmap_lock", "acquisitions") >= faults);
    let bad = api::run_config(
        &text.replace("rwsems = true", "rwsems = 1"),
        Format::Toml,
        None,
        &mut |_, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(bad.contains("kernel.rwsems"), "{bad}");
}

#[test]
fn a_numa_migration_takes_the_anon_vma_lock_to_unmap_and_to_remap() {
    let text = &common::pmbench_numa("rwsems = true\n");
    let v = run(text);
    assert_eq!(v["metrics"]["data_verified"], true);
    let migrated = v["metrics"]["numa_pages_migrated"].as_u64().unwrap();
    assert!(migrated > 0);
    // try_to_migrate's rmap walk, then remove_migration_ptes' (no
    // migration here is abandoned: each unmap has its remap).
    assert_eq!(v["metrics"]["pgmigrate_fail"].as_u64(), Some(0));
    assert_eq!(lock(&v, "&anon_vma->rwsem", "acquisitions"), 2 * migrated);
    // The 8 threads of each process fault under their mm's mmap_lock.
    assert!(lock(&v, "&mm->mmap_lock", "acquisitions") > 0);
}

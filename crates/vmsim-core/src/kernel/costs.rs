//! The software costs the kernel model charges for its own paths (entry and
//! exit, fault handlers, the page allocator, the page cache, reclaim and
//! its rmap walks, the scheduler), in cycles. Hardware costs (IPIs, TLB
//! flushes) belong to the machine, not here.
//!
//! Each cost is declared once, below: its field, its preset key under
//! `[costs]` (the field's name), and whether it is charged per call or per
//! page or entry (which bounds its range, config/preset/params.rs). The preset
//! parser reads exactly these keys and docs/machines.md's table lists them,
//! so a new kernel cost is one line here and a value with its source in
//! every preset.

use serde::Serialize;

/// How often a cost is charged: once per call of its path, or once per
/// page (or entry) the path handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Per {
    Call,
    Page,
}

macro_rules! kernel_costs {
    ($($(#[doc = $doc:literal])* $per:ident $name:ident,)*) => {
        #[derive(Clone, Debug, Serialize)]
        pub struct KernelCosts {
            $($(#[doc = $doc])* pub $name: u64,)*
        }

        impl KernelCosts {
            /// Every cost: its preset key under `[costs]`, how it is charged
            /// and its doc (config/preset/params.rs declares it from these).
            pub const ALL: &'static [(&'static str, Per, &'static str)] =
                &[$((stringify!($name), Per::$per, concat!($($doc, "\n",)* ""))),*];

            /// The costs, each read by `value` from its preset key, in `ALL`'s order.
            pub fn read<E>(mut value: impl FnMut(&'static str) -> Result<u64, E>) -> Result<KernelCosts, E> {
                Ok(KernelCosts { $($name: value(stringify!($name))?,)* })
            }

            /// The cost of preset key `name`.
            pub fn get(&self, name: &str) -> Option<u64> {
                match name {
                    $(stringify!($name) => Some(self.$name),)*
                    _ => None,
                }
            }
        }
    };
}

kernel_costs! {
    /// Exception entry and return of a page fault.
    Call exception_entry_exit_cycles,
    /// System-call entry and exit.
    Call syscall_entry_exit_cycles,
    /// The 4 KiB fault handler's own software.
    Call page_fault_handler_cycles,
    /// The THP fault handler's own software.
    Call thp_fault_handler_cycles,
    /// The page allocator per page.
    Page page_alloc_cycles,
    /// Freeing a page.
    Page page_free_cycles,
    /// `schedule()` and the switch of tasks.
    Call context_switch_cycles,
    /// `try_to_wake_up()` of a sleeping task, as its waker pays it (the
    /// woken CPU's exit from idle is the machine's, `[idle]`).
    Call try_to_wake_up_cycles,
    /// `filemap_add_folio` per folio, allocation and zeroing excluded.
    Page page_cache_add_cycles,
    /// `filemap_map_pages` per page it maps (fault-around).
    Page map_pages_per_pte_cycles,
    /// `shrink_folio_list` and its callers per folio isolated and sorted.
    Page shrink_folio_cycles,
    /// An rmap walk per PTE it visits (`folio_referenced`, `try_to_unmap`).
    Page rmap_pte_cycles,
    /// `migrate_pages()`' own software per 4 KiB folio (isolation, set-up,
    /// `folio_migrate_mapping`/`_flags`, putback), the copy excluded.
    Page migrate_folio_cycles,
    /// `change_pte_range` per entry visited by the NUMA scanner.
    Page change_pte_cycles,
    /// `task_numa_work`'s own software per call (mmap lock, VMA walk set-up).
    Call task_numa_work_cycles,
    /// The scheduler tick's handler (`tick_sched_timer` → `update_process_times`
    /// → `scheduler_tick`), interrupt entry and exit excluded.
    Call tick_handler_cycles,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cost_is_read_from_its_own_key_and_found_by_it() {
        let mut i = 0;
        let c = KernelCosts::read(|name| -> Result<u64, ()> {
            assert_eq!(name, KernelCosts::ALL[i as usize].0);
            i += 1;
            Ok(i * 10)
        })
        .unwrap();
        assert_eq!(i as usize, KernelCosts::ALL.len());
        for (k, (name, _, _)) in KernelCosts::ALL.iter().enumerate() {
            assert_eq!(c.get(name), Some((k as u64 + 1) * 10), "{name}");
        }
        assert_eq!(c.get("no_such_cost"), None);
    }
}

//! The software costs the kernel model charges for its own paths (entry and
//! exit, fault handlers, the page allocator, the scheduler), in cycles.
//! Hardware costs (IPIs, TLB flushes) belong to the machine, not here.

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct KernelCosts {
    pub exception_entry_exit_cycles: u64,
    pub syscall_entry_exit_cycles: u64,
    pub page_fault_handler_cycles: u64,
    pub thp_fault_handler_cycles: u64,
    pub page_alloc_cycles: u64,
    pub page_free_cycles: u64,
    pub context_switch_cycles: u64,
}

//! A system call's way into the kernel and back (arch/x86/entry/entry_64.S
//! `entry_SYSCALL_64`, `syscall_exit_to_user_mode`): its entry and exit
//! cost and the call's own work, charged in kernel mode to the CPU that
//! makes it. A page fault's entry is fault.rs's.

use super::hw::Hw;
use super::Kernel;
use crate::machine::Mode;

impl Kernel {
    /// A system call's entry and exit on `hw.cpu` (`syscall_entry_exit_cycles`)
    /// and `cycles` of its own work, in kernel mode; the caller returns to
    /// user mode when the call does.
    pub fn syscall(&self, hw: &mut Hw, cycles: u64) {
        hw.set_mode(Mode::Kernel);
        hw.charge(self.costs.syscall_entry_exit_cycles + cycles);
    }
}

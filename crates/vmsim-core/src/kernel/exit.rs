//! Task exit's share of the mm (kernel/exit.c `do_exit` → `exit_mm`): the
//! task drops its mm (`mmput`); the last user's drop tears the address
//! space down with `exit_mmap`. The task table's side (the parent woken)
//! is the engine's (sim/task.rs).

use super::hw::Hw;
use super::Kernel;
use crate::machine::Mode;

impl Kernel {
    /// `exit_mm()` → `mmput()` on `hw.cpu`: the last user of `mm_id` releases
    /// every mapping (`exit_mmap()`); the CPU keeps the mm loaded lazily.
    pub fn exit_mm(&mut self, hw: &mut Hw, mm_id: usize) {
        hw.machine.set_mode(hw.cpu, Mode::Kernel);
        if self.mmput(mm_id) {
            for zapped in self.exit_mmap_ranges(mm_id) {
                self.zap(hw, mm_id, &zapped);
            }
            // pgd_free() as the mm goes (mmdrop).
            self.free_pgtables(mm_id, true);
        }
        hw.machine.set_mode(hw.cpu, Mode::User);
    }
}

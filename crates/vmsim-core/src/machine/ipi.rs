//! CPU masks and inter-processor interrupts: the sender pays per target and
//! waits for the acknowledgements; each target pays interrupt entry, the
//! handler and exit when it next runs. Every IPI has a cause, counted per
//! CPU as /proc/interrupts counts them.
//!
//! Invariant: a mask never has a bit at or above `MAX_CPUS`.

use super::topology::MAX_CPUS;
use serde::Serialize;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CpuMask(pub [u64; MAX_CPUS / 64]);

impl CpuMask {
    pub const fn empty() -> CpuMask {
        CpuMask([0; MAX_CPUS / 64])
    }
    #[inline]
    pub fn set(&mut self, cpu: usize) {
        self.0[cpu / 64] |= 1 << (cpu % 64);
    }
    #[inline]
    pub fn clear(&mut self, cpu: usize) {
        self.0[cpu / 64] &= !(1 << (cpu % 64));
    }
    #[inline]
    pub fn test(&self, cpu: usize) -> bool {
        self.0[cpu / 64] & (1 << (cpu % 64)) != 0
    }
    pub fn or(&mut self, other: &CpuMask) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a |= *b;
        }
    }
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }
    pub fn count(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }
    /// CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(i, w)| {
            let mut w = *w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(i * 64 + b)
            })
        })
    }
    /// True if every CPU set here is also set in `other`.
    pub fn is_subset_of(&self, other: &CpuMask) -> bool {
        self.0.iter().zip(other.0.iter()).all(|(a, b)| a & !b == 0)
    }
    /// Like the kernel's `cpumask_any_but()`: true if some CPU other than `cpu` is set.
    pub fn any_but(&self, cpu: usize) -> bool {
        let mut m = *self;
        m.clear(cpu);
        !m.is_empty()
    }
}

/// Why an IPI was sent: the x86 vectors /proc/interrupts counts apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpiCause {
    /// A TLB shootdown (`flush_tlb_func` run on the target): the "TLB" line.
    TlbShootdown,
    /// `smp_send_reschedule`: the "RES" line.
    Reschedule,
    /// Any other `smp_call_function*` work: the "CAL" line. (Linux delivers
    /// shootdowns through the call-function vector too; the model counts each
    /// IPI once, under its cause.)
    CallFunction,
}

impl IpiCause {
    pub const ALL: [IpiCause; 3] = [
        IpiCause::TlbShootdown,
        IpiCause::Reschedule,
        IpiCause::CallFunction,
    ];
    /// Report key.
    pub fn name(self) -> &'static str {
        match self {
            IpiCause::TlbShootdown => "tlb_shootdown",
            IpiCause::Reschedule => "reschedule",
            IpiCause::CallFunction => "call_function",
        }
    }
    /// The /proc/interrupts line.
    pub fn proc_interrupts(self) -> &'static str {
        match self {
            IpiCause::TlbShootdown => "TLB",
            IpiCause::Reschedule => "RES",
            IpiCause::CallFunction => "CAL",
        }
    }
}

#[derive(Clone, Debug)]
pub struct IpiCosts {
    pub send_cycles: u64,
    pub latency_cycles: u64,
    pub handle_cycles: u64,
}

impl IpiCosts {
    /// Cycles the sender spends sending to `n` targets and waiting for the last
    /// acknowledgement, given each handler also runs `work` cycles.
    pub fn sender_cycles(&self, n: u64, work: u64) -> u64 {
        let (send, wait) = self.sender_parts(n, work);
        send + wait
    }

    /// [`IpiCosts::sender_cycles`] as its two parts: sending, per target,
    /// and waiting for the last acknowledgement.
    pub fn sender_parts(&self, n: u64, work: u64) -> (u64, u64) {
        if n == 0 {
            return (0, 0);
        }
        (
            self.send_cycles * n,
            self.latency_cycles + self.handle_cycles + work,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn mask_ops() {
        let mut m = CpuMask::empty();
        m.set(3);
        m.set(70);
        m.set(255);
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![3, 70, 255]);
        assert!(m.any_but(3));
        m.clear(70);
        m.clear(255);
        assert!(!m.any_but(3));
        assert_eq!(m.count(), 1);
    }
    #[test]
    fn ipi_cost_is_exact() {
        let c = IpiCosts {
            send_cycles: 300,
            latency_cycles: 2300,
            handle_cycles: 1250,
        };
        assert_eq!(c.sender_cycles(0, 96), 0);
        assert_eq!(c.sender_cycles(3, 96), 900 + 2300 + 1250 + 96);
    }
}

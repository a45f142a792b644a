//! Per-node DRAM and socket links as bandwidth calendars; the same calendar,
//! with shorter epochs, is a core's fill path from its L2 or from the LLC
//! (`FillPort`).
//!
//! Time is cut into epochs of `EPOCH` cycles; each epoch can carry a fixed
//! number of bytes. A transfer asked for at time t takes the first epoch at
//! or after t with room left, so streams from many CPUs share the bandwidth
//! and queue when it is exhausted; a lone access sees only the idle latency.
//! Reservations arrive in (nearly) time order because the scheduler always
//! advances the CPU with the lowest clock for a bounded quantum.
//!
//! Invariant: no epoch carries more than its capacity; a reservation never
//! completes before it was asked for.

use serde::Serialize;

use super::divisor::Divisor;

/// Epoch of the DRAM and link calendars.
pub const EPOCH: u64 = 1 << DRAM_EPOCH_SHIFT;
const DRAM_EPOCH_SHIFT: u32 = 10;
const DRAM_RING_BITS: u32 = 15;

/// A core's fill path (L2 to L1, or LLC to L2): 64-cycle epochs, as a few
/// lines' transfer time must not be rounded to a DRAM epoch; 1024 epochs of
/// history cover the scheduler's quantum many times over.
pub type FillPort = Calendar<6, 10>;

#[derive(Clone, Debug, Default, Serialize)]
pub struct ChannelStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Sum over transfers of cycles spent waiting for bandwidth.
    pub queue_cycles: u64,
}

/// A bandwidth-limited resource (a node's memory controller, a socket link,
/// a core's fill path), with epochs of `2^SHIFT` cycles and a ring of
/// `2^RING_BITS` of them.
pub struct Calendar<const SHIFT: u32 = DRAM_EPOCH_SHIFT, const RING_BITS: u32 = DRAM_RING_BITS> {
    /// Bytes one epoch can carry.
    capacity: u64,
    /// `capacity`, to divide by.
    per_epoch: Divisor,
    /// `64 * EPOCH / capacity`.
    line_cycles: u64,
    epoch_id: Vec<u64>,
    used: Vec<u64>,
    /// Epochs in [full_from, full_until) are known full: a saturated stream
    /// skips them in one step instead of walking epoch by epoch.
    full_from: u64,
    full_until: u64,
    pub stats: ChannelStats,
}

impl<const SHIFT: u32, const RING_BITS: u32> Calendar<SHIFT, RING_BITS> {
    const EPOCH: u64 = 1 << SHIFT;
    const RING: usize = 1 << RING_BITS;

    pub fn new(bytes_per_cycle: f64) -> Self {
        let capacity = ((bytes_per_cycle * Self::EPOCH as f64).round() as u64).max(64);
        Calendar {
            capacity,
            per_epoch: Divisor::new(capacity),
            line_cycles: 64 * Self::EPOCH / capacity,
            epoch_id: vec![u64::MAX; Self::RING],
            used: vec![0; Self::RING],
            full_from: 0,
            full_until: 0,
            stats: ChannelStats::default(),
        }
    }

    pub fn capacity_per_epoch(&self) -> u64 {
        self.capacity
    }

    /// Cycles one 64-byte line takes at full bandwidth (rounded down).
    #[inline]
    pub fn line_cycles(&self) -> u64 {
        self.line_cycles
    }

    /// Reserves `bytes` at or after `t`; returns when the transfer is done.
    #[inline]
    pub fn reserve(&mut self, t: u64, bytes: u64, write: bool) -> u64 {
        self.reserve_as(t, bytes, write, true)
    }

    /// Reserves `bytes` at or after `t`; returns when the transfers ahead of
    /// this one are done: for a path whose latency already covers a lone
    /// transfer, which then waits for nothing, whatever its phase in the epoch.
    #[inline]
    pub fn reserve_queued(&mut self, t: u64, bytes: u64) -> u64 {
        self.reserve_as(t, bytes, false, false)
    }

    /// Takes `bytes` at or after `t` for a transfer nothing waits on (a
    /// dirty victim leaving a cache): transfers asked for later queue behind
    /// it; it has no completion time and no wait of its own to count.
    #[inline]
    pub fn occupy(&mut self, t: u64, bytes: u64) {
        self.stats.bytes_written += bytes;
        self.take(t, bytes);
    }

    #[inline(always)]
    fn reserve_as(&mut self, t: u64, bytes: u64, write: bool, own: bool) -> u64 {
        if write {
            self.stats.bytes_written += bytes;
        } else {
            self.stats.bytes_read += bytes;
        }
        let (e, u) = self.take(t, bytes);
        // Position inside the epoch in proportion to the bytes ahead of us.
        if !own {
            let done = ((e << SHIFT) + self.per_epoch.div(u << SHIFT)).max(t);
            self.stats.queue_cycles += done - t;
            return done;
        }
        let done = (e << SHIFT) + self.per_epoch.div((u + bytes) << SHIFT);
        let done = done.max(t);
        // A line's own transfer time is `line_cycles` (the same quotient).
        let own_cycles = if bytes == 64 {
            self.line_cycles
        } else {
            self.per_epoch.div(bytes << SHIFT)
        };
        self.stats.queue_cycles += done.saturating_sub(t + own_cycles);
        done
    }

    /// Puts `bytes` in the first epoch at or after `t` with room for them
    /// (or an empty one, for a transfer larger than an epoch); returns that
    /// epoch and the bytes already in it.
    #[inline(always)]
    fn take(&mut self, t: u64, bytes: u64) -> (u64, u64) {
        let mut e = t >> SHIFT;
        if e >= self.full_from && e < self.full_until {
            e = self.full_until;
        }
        let contiguous = e >= self.full_from && e <= self.full_until;
        loop {
            let slot = (e as usize) & (Self::RING - 1);
            if self.epoch_id[slot] != e {
                // A slot last used for an epoch a whole ring ago is reusable.
                self.epoch_id[slot] = e;
                self.used[slot] = 0;
            }
            let u = self.used[slot];
            if u + bytes <= self.capacity || u == 0 {
                self.used[slot] = u + bytes;
                if u + bytes + 64 > self.capacity {
                    if contiguous {
                        // Every epoch walked over on the way here was full.
                        self.full_until = e + 1;
                    } else {
                        self.full_from = e;
                        self.full_until = e + 1;
                    }
                }
                return (e, u);
            }
            e += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn lone_transfer_is_not_delayed_much() {
        let mut c: Calendar = Calendar::new(16.0);
        let done = c.reserve(10_000, 64, false);
        assert!((10_000..10_000 + EPOCH).contains(&done));
    }
    #[test]
    fn saturation_spreads_transfers_at_the_bandwidth() {
        let mut c: Calendar = Calendar::new(16.0); // 16 B/cycle
        let mut last = 0;
        for _ in 0..100_000 {
            last = c.reserve(0, 64, false);
        }
        // 6.4 MB at 16 B/cycle = 400k cycles.
        let expect = 100_000 * 64 / 16;
        assert!(
            (last as i64 - expect as i64).abs() <= EPOCH as i64,
            "{last} vs {expect}"
        );
        assert_eq!(c.stats.bytes_read, 6_400_000);
    }
    #[test]
    fn a_fill_port_spreads_a_stream_at_its_bandwidth_in_short_epochs() {
        // 25 B/cycle: a line every 2.56 cycles, 25 lines per 64-cycle epoch.
        // Each line waits for the lines ahead of it.
        let mut p = FillPort::new(25.0);
        let done: Vec<u64> = (0..1000).map(|_| p.reserve_queued(640, 64)).collect();
        assert_eq!(done[0], 640);
        assert_eq!(done[1], 640 + 2);
        assert_eq!(done[24], 640 + 24 * 64 / 25);
        assert_eq!(done[25], 704);
        assert_eq!(*done.last().unwrap(), 640 + 999 * 64 / 25);
        assert_eq!(
            p.stats.queue_cycles,
            done.iter().map(|d| d - 640).sum::<u64>()
        );
        // A lone line later on, at any phase of its epoch, waits for nothing.
        for t in [1_000_000, 1_000_065, 1_000_191] {
            assert_eq!(p.reserve_queued(t, 64), t);
        }
    }
    #[test]
    fn a_write_back_takes_its_share_of_the_path_and_waits_for_nothing() {
        // 25 B/cycle: after 10 write-backs at t, a line filled at t waits for
        // them (10 x 64 B at 25 B/cycle), and their own wait is not counted.
        let mut p = FillPort::new(25.0);
        for _ in 0..10 {
            p.occupy(640, 64);
        }
        assert_eq!(p.stats.queue_cycles, 0);
        assert_eq!(p.stats.bytes_written, 640);
        assert_eq!(p.reserve_queued(640, 64), 640 + 10 * 64 / 25);
        assert_eq!(p.stats.queue_cycles, 10 * 64 / 25);
        // A fill, then write-backs: the fill did not wait for them.
        let mut q = FillPort::new(25.0);
        assert_eq!(q.reserve_queued(640, 64), 640);
        q.occupy(640, 64);
        assert_eq!(q.reserve_queued(640, 64), 640 + 2 * 64 / 25);
    }

    #[test]
    fn never_before_request() {
        let mut c: Calendar = Calendar::new(0.5);
        for t in (0..50_000).step_by(7) {
            assert!(c.reserve(t, 64, true) >= t);
        }
    }
}

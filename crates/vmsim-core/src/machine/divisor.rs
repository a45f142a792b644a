//! Division by a divisor fixed at construction, without a hardware divide:
//! a shift for powers of two, otherwise a multiply by a 128-bit reciprocal.
//! The hot path divides by a few run-wide constants (a node's bytes, a
//! calendar epoch's capacity) several times per simulated access, and a
//! 64-bit divide costs tens of host cycles.
//!
//! Invariant: `Divisor::new(d).div(n) == n / d` for every `d >= 1` and every
//! `n` (Lemire, Kaser & Kurz, "Faster Remainder by Direct Computation",
//! Software: Practice and Experience, 2019, Theorem 1: with c = ceil(2^128 /
//! d), floor(c * n / 2^128) = floor(n / d) for all n < 2^64 when c * d -
//! 2^128 <= 2^64, which holds as c * d - 2^128 < d < 2^64).

/// A divisor with its reciprocal.
#[derive(Clone, Copy, Debug)]
pub struct Divisor {
    d: u64,
    /// ceil(2^128 / d); 0 for powers of two.
    magic: u128,
    /// log2(d) for powers of two.
    shift: Option<u32>,
}

impl Divisor {
    /// # Panics
    /// If `d` is 0.
    pub fn new(d: u64) -> Divisor {
        assert!(d > 0, "division by zero");
        if d.is_power_of_two() {
            Divisor {
                d,
                magic: 0,
                shift: Some(d.trailing_zeros()),
            }
        } else {
            Divisor {
                d,
                magic: u128::MAX / d as u128 + 1,
                shift: None,
            }
        }
    }

    /// The divisor.
    pub fn get(&self) -> u64 {
        self.d
    }

    /// `n / d`.
    #[inline(always)]
    pub fn div(&self, n: u64) -> u64 {
        match self.shift {
            Some(s) => n >> s,
            None => {
                // (magic * n) >> 128 without 256-bit arithmetic: magic's
                // high half is below 2^63 (d >= 3), so the sum cannot overflow.
                let n = n as u128;
                let hi = n * (self.magic >> 64);
                let lo = (n * (self.magic as u64 as u128)) >> 64;
                ((hi + lo) >> 64) as u64
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn edges() {
        for d in [
            1u64,
            2,
            3,
            5,
            7,
            64,
            100,
            1 << 32,
            (1 << 32) + 1,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let v = Divisor::new(d);
            for n in [
                0u64,
                1,
                d - 1,
                d,
                d.wrapping_add(1),
                u64::MAX - 1,
                u64::MAX,
                1 << 63,
            ] {
                assert_eq!(v.div(n), n / d, "{n} / {d}");
            }
        }
    }

    proptest! {
        #[test]
        fn matches_division(d in 1u64.., n in any::<u64>()) {
            prop_assert_eq!(Divisor::new(d).div(n), n / d);
        }

        #[test]
        fn matches_division_small(d in 1u64..100_000, n in 0u64..1 << 40) {
            prop_assert_eq!(Divisor::new(d).div(n), n / d);
        }
    }
}

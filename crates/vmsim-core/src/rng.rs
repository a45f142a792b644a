//! splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number
//! generators", OOPSLA 2014), the one generator every seeded choice of the
//! model draws from: replacement victims, access patterns, the boot-time
//! free-list shuffle and the scheduler tick's phase. Same input, same
//! output, on every host.

/// The golden-ratio increment splitmix64 adds to its state per draw.
pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64's output function: a bijective mix of all 64 bits.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One splitmix64 step from `x`: advance by [`GOLDEN`], then mix.
#[inline]
pub fn splitmix64(x: u64) -> u64 {
    mix64(x.wrapping_add(GOLDEN))
}

/// Draws the next value of a splitmix64 generator whose state is `state`.
#[inline]
pub fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GOLDEN);
    mix64(*state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_sequence() {
        // The first outputs of splitmix64 seeded with 1234567 (the reference
        // implementation's test vector).
        let mut s = 1234567u64;
        let got: Vec<u64> = (0..3).map(|_| next(&mut s)).collect();
        assert_eq!(
            got,
            [
                6457827717110365317,
                3203168211198807973,
                9817491932198370423
            ]
        );
        assert_eq!(splitmix64(1234567), got[0]);
    }
}

//! The store primitives the kernel's clear/copy paths bottom out in:
//! `rep stosb`/`rep movsb` (clear_page_erms, copy_page with ERMS), an
//! unrolled 8 x `mov` loop (clear_page_orig), `movnti` non-temporal
//! stores and AMD's `clzero`, with the CPUID test that `clzero` needs
//! ([`has_clzero`]). `clear`, `copy`, `sweep`, `measure` and `micro` all
//! store through these, which is why they live below all of them. Inline
//! asm and volatile accesses keep the compiler from replacing them with
//! its own memset/memcpy.
//!
//! Invariants: within its stated preconditions a routine writes only the
//! bytes it is given (the line-wise ones only whole 64 B lines of them)
//! and fences nothing: after `movnti` or `clzero` the caller issues
//! [`sfence`] where the kernel would. Callers run `clzero` only where
//! [`has_clzero`] says the CPU has it (`clear` refuses such a plan, `sweep`
//! skips the row, `measure` the figure).

use core::arch::asm;
use core::arch::x86_64::{_mm_sfence, _mm_stream_si64};
use std::ptr::{read_volatile, write_volatile};

/// Zeroes `len` bytes with one `rep stosb`.
///
/// # Safety
/// `dst..dst+len` must be writable.
#[inline(always)]
pub unsafe fn rep_stosb(dst: *mut u8, len: usize) {
    asm!("rep stosb", inout("rdi") dst => _, inout("rcx") len => _, in("al") 0u8,
         options(nostack, preserves_flags));
}

/// Copies `len` bytes with one `rep movsb`.
///
/// # Safety
/// Both ranges valid for `len` bytes and not overlapping.
#[inline(always)]
pub unsafe fn rep_movsb(dst: *mut u8, src: *const u8, len: usize) {
    asm!("rep movsb", inout("rdi") dst => _, inout("rsi") src => _, inout("rcx") len => _,
         options(nostack, preserves_flags));
}

/// Zeroes `len` bytes (a multiple of 64) with eight 8-byte stores per line.
///
/// # Safety
/// `dst` 8-byte aligned, `dst..dst+len` writable.
#[inline(always)]
pub unsafe fn mov_clear(dst: *mut u8, len: usize) {
    let p = dst as *mut u64;
    for line in 0..len / 64 {
        let q = p.add(line * 8);
        for k in 0..8 {
            write_volatile(q.add(k), 0);
        }
    }
}

/// Copies `len` bytes (a multiple of 64) with 8-byte loads and stores.
///
/// # Safety
/// Both 8-byte aligned, valid for `len` bytes, not overlapping.
#[inline(always)]
pub unsafe fn mov_copy(dst: *mut u8, src: *const u8, len: usize) {
    let (d, s) = (dst as *mut u64, src as *const u64);
    for line in 0..len / 64 {
        for k in line * 8..line * 8 + 8 {
            write_volatile(d.add(k), read_volatile(s.add(k)));
        }
    }
}

/// Zeroes `len` bytes (a multiple of 64) with `movnti`, eight to a line
/// and one loop iteration a line, as the kernel's `clear_page_nt` and the
/// model's `movnti` loop (`instr::CLEAR_NT_PER_LINE`: eight movnti, add,
/// sub and ja); caller issues `sfence`. Not one `movnti` an iteration:
/// such a loop takes a branch a store, and on a Zen 3 guest it ran at
/// 10-11 GB/s for minutes at a time, front-end bound, where this one wrote
/// 17-20 throughout.
///
/// # Safety
/// `dst` 8-byte aligned, `dst..dst+len` writable.
#[inline(always)]
pub unsafe fn nt_clear(dst: *mut u8, len: usize) {
    if len < 64 {
        return;
    }
    asm!(
        "2:",
        "movnti qword ptr [{p}], {z}",
        "movnti qword ptr [{p} + 8], {z}",
        "movnti qword ptr [{p} + 16], {z}",
        "movnti qword ptr [{p} + 24], {z}",
        "movnti qword ptr [{p} + 32], {z}",
        "movnti qword ptr [{p} + 40], {z}",
        "movnti qword ptr [{p} + 48], {z}",
        "movnti qword ptr [{p} + 56], {z}",
        "add {p}, 64",
        "sub {n}, 64",
        "ja 2b",
        p = inout(reg) dst => _,
        n = inout(reg) len / 64 * 64 => _,
        z = in(reg) 0u64,
        options(nostack),
    );
}

/// Copies `len` bytes (a multiple of 64) with `movnti` stores; caller issues `sfence`.
///
/// # Safety
/// Both 8-byte aligned, valid for `len` bytes, not overlapping.
#[inline(always)]
pub unsafe fn nt_copy(dst: *mut u8, src: *const u8, len: usize) {
    let (d, s) = (dst as *mut i64, src as *const i64);
    for k in 0..len / 8 {
        _mm_stream_si64(d.add(k), read_volatile(s.add(k)));
    }
}

/// Whether the core has `clzero`: CPUID Fn8000_0008 EBX bit 0 (AMD APM
/// vol. 3, "CPUID Fn8000_0008_EBX"); the leaf must exist.
pub fn has_clzero() -> bool {
    use core::arch::x86_64::__cpuid;
    // cpuid exists on every x86-64 CPU; the extended leaf is read only if
    // the maximum extended leaf says it exists.
    if __cpuid(0x8000_0000).eax < 0x8000_0008 {
        return false;
    }
    __cpuid(0x8000_0008).ebx & 1 == 1
}

/// Zeroes `len` bytes (a multiple of 64, `dst` 64-byte aligned) with one
/// `clzero` per line; the caller fences.
///
/// # Safety
/// The CPU has `clzero` ([`has_clzero`]); `dst..dst+len` writable.
#[inline(always)]
pub unsafe fn clzero_clear(dst: *mut u8, len: usize) {
    for off in (0..len).step_by(64) {
        core::arch::asm!("clzero", in("rax") dst.add(off), options(nostack, preserves_flags));
    }
}

/// Orders non-temporal stores before whatever follows (the kernel does the same after movnti).
#[inline(always)]
pub fn sfence() {
    // SAFETY: sfence has no preconditions on x86-64.
    unsafe { _mm_sfence() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nt_clear_zeroes_whole_lines_and_nothing_past_them() {
        for len in [0usize, 64, 128, 4096, 4096 + 64] {
            let mut b = vec![0xA5u8; 8192 + 64];
            // 64-byte aligned start inside the buffer.
            let off = b.as_ptr().align_offset(64);
            // SAFETY: off + len <= 64 + 4160 < b.len(), 8-byte aligned.
            unsafe { nt_clear(b.as_mut_ptr().add(off), len) };
            sfence();
            assert!(b[off..off + len].iter().all(|&x| x == 0), "{len}");
            assert!(b[off + len..].iter().all(|&x| x == 0xA5), "{len}");
            assert!(b[..off].iter().all(|&x| x == 0xA5), "{len}");
        }
    }
}

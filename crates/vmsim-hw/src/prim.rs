//! The store primitives the kernel's clear/copy paths bottom out in:
//! `rep stosb`/`rep movsb` (clear_page_erms, copy_page with ERMS), an
//! unrolled 8 x `mov` loop (clear_page_orig) and `movnti` non-temporal
//! stores. Inline asm and volatile accesses keep the compiler from
//! replacing them with its own memset/memcpy.

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

/// Zeroes `len` bytes (a multiple of 64) with `movnti`; caller issues `sfence`.
///
/// # Safety
/// `dst` 8-byte aligned, `dst..dst+len` writable.
#[inline(always)]
pub unsafe fn nt_clear(dst: *mut u8, len: usize) {
    let p = dst as *mut i64;
    for k in 0..len / 8 {
        _mm_stream_si64(p.add(k), 0);
    }
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

/// Orders non-temporal stores before whatever follows (the kernel does the same after movnti).
#[inline(always)]
pub fn sfence() {
    // SAFETY: sfence has no preconditions on x86-64.
    unsafe { _mm_sfence() }
}

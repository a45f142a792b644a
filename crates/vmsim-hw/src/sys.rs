//! Thin wrappers over the Linux calls the measurements need: anonymous
//! mappings with a chosen page size, CPU pinning, clocks and the TSC, and
//! the UTC time stamp that a calibration's record and preset carry
//! (`utc_now`).
//!
//! Invariant: a [`Mapping`] owns its memory and unmaps it on drop; a THP
//! one's usable range starts on a 2 MiB boundary.

use crate::HwError;
use std::time::{Duration, Instant};

pub const SUBPAGE: usize = 4096;
pub const HPAGE: usize = 2 << 20;

/// Which pages back a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// 2 MiB-aligned, `MADV_HUGEPAGE`.
    Thp,
    /// `MADV_NOHUGEPAGE`, so 4 KiB pages whatever the THP mode.
    Small,
    /// `MAP_HUGETLB` with the given huge page size shift (21 or 30).
    Hugetlb(u32),
}

/// An anonymous mapping, unmapped on drop. Over-allocates for THP so the
/// usable range starts on a 2 MiB boundary.
pub struct Mapping {
    raw: *mut u8,
    raw_len: usize,
    start: *mut u8,
    len: usize,
}

// The mapping is plain memory owned by this value; moving it across threads is sound.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    pub fn anon(len: usize, backing: Backing) -> Result<Mapping, HwError> {
        let len = len.max(1).div_ceil(SUBPAGE) * SUBPAGE;
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        let raw_len = match backing {
            Backing::Thp => len + HPAGE,
            Backing::Small => len,
            Backing::Hugetlb(shift) => {
                flags |= libc::MAP_HUGETLB | ((shift as i32) << libc::MAP_HUGE_SHIFT);
                len.div_ceil(1 << shift) << shift
            }
        };
        // SAFETY: a fresh anonymous mapping, no existing memory is touched.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                raw_len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(HwError::Io(format!(
                "mmap of {} MiB ({backing:?}) failed: {}",
                raw_len >> 20,
                std::io::Error::last_os_error()
            )));
        }
        let raw = raw as *mut u8;
        let start = match backing {
            Backing::Thp => ((raw as usize).div_ceil(HPAGE) * HPAGE) as *mut u8,
            _ => raw,
        };
        let m = Mapping {
            raw,
            raw_len,
            start,
            len,
        };
        let advice = match backing {
            Backing::Thp => Some(libc::MADV_HUGEPAGE),
            Backing::Small => Some(libc::MADV_NOHUGEPAGE),
            Backing::Hugetlb(_) => None,
        };
        if let Some(a) = advice {
            // SAFETY: the range lies inside the mapping just created.
            let rc = unsafe { libc::madvise(m.raw as *mut libc::c_void, m.raw_len, a) };
            if rc != 0 {
                return Err(HwError::Io(format!(
                    "madvise failed: {}",
                    std::io::Error::last_os_error()
                )));
            }
        }
        Ok(m)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.start
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the range is mapped read/write for the lifetime of self.
        unsafe { std::slice::from_raw_parts(self.start, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.start, self.len) }
    }

    /// AnonHugePages (KiB) that /proc/self/smaps reports for mappings overlapping this range.
    pub fn anon_huge_kib(&self) -> Option<u64> {
        anon_huge_kib(self.start as usize, self.len)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what mmap returned.
        unsafe { libc::munmap(self.raw as *mut libc::c_void, self.raw_len) };
    }
}

/// Sums AnonHugePages over the smaps entries that overlap `[start, start+len)`.
pub fn anon_huge_kib(start: usize, len: usize) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let end = start + len;
    let mut inside = false;
    let mut total = 0;
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                inside = a < end && b > start;
                continue;
            }
        }
        if inside {
            if let Some(rest) = line.strip_prefix("AnonHugePages:") {
                total += rest
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0);
            }
        }
    }
    Some(total)
}

/// Pins the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> Result<(), HwError> {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity(0) affects only this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(HwError::Io(format!(
                "sched_setaffinity(cpu {cpu}) failed: {}",
                std::io::Error::last_os_error()
            )));
        }
    }
    Ok(())
}

/// Online CPUs of the machine (not of this thread's affinity mask, which pinning narrows).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

/// Writes one byte per `stride` so every page is faulted in before timing.
pub fn prefault(buf: &mut [u8], stride: usize, value: u8) {
    for i in (0..buf.len()).step_by(stride) {
        // SAFETY: i < len.
        unsafe { std::ptr::write_volatile(buf.as_mut_ptr().add(i), value) };
    }
}

#[inline(always)]
pub fn rdtsc_start() -> u64 {
    use core::arch::x86_64::{_mm_lfence, _rdtsc};
    // SAFETY: rdtsc/lfence are available on every x86-64 CPU.
    unsafe {
        _mm_lfence();
        let t = _rdtsc();
        _mm_lfence();
        t
    }
}

#[inline(always)]
pub fn rdtsc_end() -> u64 {
    use core::arch::x86_64::{__rdtscp, _mm_lfence};
    let mut aux = 0u32;
    // SAFETY: rdtscp is checked for by the caller (host flags); lfence keeps later work out.
    unsafe {
        let t = __rdtscp(&mut aux);
        _mm_lfence();
        t
    }
}

/// TSC ticks per nanosecond, against CLOCK_MONOTONIC over ~50 ms.
pub fn measure_tsc_ghz() -> f64 {
    let t0 = Instant::now();
    let c0 = rdtsc_start();
    while t0.elapsed() < Duration::from_millis(50) {
        std::hint::spin_loop();
    }
    let c1 = rdtsc_end();
    let ns = t0.elapsed().as_nanos() as f64;
    (c1 - c0) as f64 / ns
}

/// UTC "YYYY-MM-DD HH:MM:SS" without a date library (civil-from-days).
pub(crate) fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

pub fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

//! The switchable mechanisms: one enum per policy, with the names a run
//! config uses. Each variant says which kernel behaviour it models.

use serde::Serialize;

/// The order in which a huge page's sub-pages are processed, by
/// `clear_huge_page()` and by `copy_user_huge_page()`. Both go through the one
/// implementation in `kernel::huge_memory::process_huge_page_in_order`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum HugePageOrder {
    /// Sub-pages 0..N-1 ascending: clearing before 4.14, copying before 4.18.
    Sequential,
    /// `process_huge_page()` order, target sub-page last: clearing 4.14 .. 6.19,
    /// copying 4.18 onwards.
    TargetLast,
}

/// How `clear_huge_page()` orders the sub-page clears of a huge page.
pub type ClearHugePage = HugePageOrder;
/// How `copy_user_huge_page()` orders the sub-page copies of a huge page.
pub type CopyHugePage = HugePageOrder;

impl HugePageOrder {
    pub const NAMES: &'static [&'static str] = &["sequential", "target-last"];
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "sequential" => Some(Self::Sequential),
            "target-last" => Some(Self::TargetLast),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Sequential => "sequential",
            Self::TargetLast => "target-last",
        }
    }
}

/// What a write fault on a read-only PMD-mapped anonymous THP does
/// (`do_huge_pmd_wp_page()`), when the huge page is still shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ThpCow {
    /// 4.18 .. 5.7: allocate a new huge page and copy all 512 sub-pages with
    /// `copy_user_huge_page()`, then map it with one PMD.
    Copy,
    /// 5.8 onwards (3917c80280c9 "thp: change CoW semantics for anon-THP"):
    /// split the PMD into PTEs and copy only the faulting 4 KiB page.
    Split,
}

impl ThpCow {
    pub const NAMES: &'static [&'static str] = &["copy", "split"];
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "copy" => Some(Self::Copy),
            "split" => Some(Self::Split),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Copy => "copy",
            Self::Split => "split",
        }
    }
}

/// Transparent huge pages for anonymous memory (`/sys/kernel/mm/transparent_hugepage/enabled`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Thp {
    Always,
    Never,
}

impl Thp {
    pub const NAMES: &'static [&'static str] = &["always", "never"];
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "always" => Some(Self::Always),
            "never" => Some(Self::Never),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Always => "always",
            Self::Never => "never",
        }
    }
}

/// Which x86 `clear_page` variant the alternatives patching selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ClearPage {
    /// `clear_page_erms`: one `rep stosb` of 4096 bytes (X86_FEATURE_ERMS).
    Erms,
    /// `clear_page_orig`: unrolled loop of 8 `movq` per 64 B.
    Orig,
}

impl ClearPage {
    pub const NAMES: &'static [&'static str] = &["erms", "orig"];
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "erms" => Some(Self::Erms),
            "orig" => Some(Self::Orig),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Erms => "erms",
            Self::Orig => "orig",
        }
    }
}

//! The switchable mechanisms: one enum per policy, with the names a run
//! config uses. Each variant says which kernel behaviour it models.

use serde::Serialize;

/// How `clear_huge_page()` / `folio_zero_user()` clears a huge page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClearHugePage {
    /// Kernels before 4.14: sub-pages 0..N-1 ascending, one `clear_page` each.
    Sequential,
    /// `process_huge_page()` order, target sub-page last: 4.14 .. 6.19.
    TargetLast,
    /// Ankur Arora's 2023 x86 override (MECHANISMS.md §3.2, not merged): regions
    /// left, right, then the neighbourhood of the target (±2), each one string
    /// clear; gigantic pages one straight clear.
    #[serde(rename = "multipage-2023")]
    Multipage2023,
    /// Linux 7.0 `folio_zero_user()` (MECHANISMS.md §3.5): right region, left
    /// region, neighbourhood (radius 2), each through `clear_contig_highpages()`.
    #[serde(rename = "contiguous-7.0")]
    Contiguous70,
    /// The 7.0 regions, with the two far regions cleared by non-temporal stores
    /// (`movnti`) and the neighbourhood by `rep stosb`: raised in review, never merged.
    NontemporalFar,
}

impl From<HugePageOrder> for ClearHugePage {
    fn from(o: HugePageOrder) -> Self {
        match o {
            HugePageOrder::Sequential => Self::Sequential,
            HugePageOrder::TargetLast => Self::TargetLast,
        }
    }
}

impl ClearHugePage {
    /// The one-page-at-a-time order of the per-page policies; None for the region policies.
    pub fn per_page_order(self) -> Option<HugePageOrder> {
        match self {
            Self::Sequential => Some(HugePageOrder::Sequential),
            Self::TargetLast => Some(HugePageOrder::TargetLast),
            _ => None,
        }
    }

    pub const NAMES: &'static [&'static str] = &["sequential", "target-last", "multipage-2023", "contiguous-7.0", "nontemporal-far"];
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "sequential" => Some(Self::Sequential),
            "target-last" => Some(Self::TargetLast),
            "multipage-2023" => Some(Self::Multipage2023),
            "contiguous-7.0" => Some(Self::Contiguous70),
            "nontemporal-far" => Some(Self::NontemporalFar),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Sequential => "sequential",
            Self::TargetLast => "target-last",
            Self::Multipage2023 => "multipage-2023",
            Self::Contiguous70 => "contiguous-7.0",
            Self::NontemporalFar => "nontemporal-far",
        }
    }
}

/// The order in which a huge page's sub-pages are processed one at a time.
/// Both orders live in one implementation,
/// `kernel::huge_memory::process_huge_page_in_order`, which the per-page
/// clear and `copy_user_huge_page()` share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HugePageOrder {
    /// Sub-pages 0..N-1 ascending: clearing before 4.14, copying before 4.18.
    Sequential,
    /// `process_huge_page()` order, target sub-page last: clearing 4.14 .. 6.19,
    /// copying 4.18 onwards.
    TargetLast,
}

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
#[serde(rename_all = "kebab-case")]
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
#[serde(rename_all = "kebab-case")]
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
#[serde(rename_all = "kebab-case")]
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

/// The kernel's preemption model (`CONFIG_PREEMPT_*`, or `preempt=` with
/// PREEMPT_DYNAMIC). It decides how `clear_contig_highpages()` chunks a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preempt {
    None,
    Voluntary,
    Full,
    Lazy,
}

impl Preempt {
    pub const NAMES: &'static [&'static str] = &["none", "voluntary", "full", "lazy"];
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Self::None),
            "voluntary" => Some(Self::Voluntary),
            "full" => Some(Self::Full),
            "lazy" => Some(Self::Lazy),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Voluntary => "voluntary",
            Self::Full => "full",
            Self::Lazy => "lazy",
        }
    }
    /// `preempt_model_preemptible()`: full or lazy (RT is not modelled).
    pub fn preemptible(self) -> bool {
        matches!(self, Self::Full | Self::Lazy)
    }
}

/// How reclaim flushes TLBs after unmapping mapped pages (`kernel.tlb_flush_on_unmap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlbFlushOnUnmap {
    /// Before 4.3: `ptep_clear_flush()` → `flush_tlb_page()`, one shootdown
    /// round to the mm's CPUs for every page unmapped.
    PerPage,
    /// 4.3 onwards (72b252aed506, d950c9477d51): the CPUs of every unmapped
    /// page's mm are ORed into `tlbflush_unmap_batch`, and
    /// `try_to_unmap_flush()` sends one IPI per CPU, each flushing its whole TLB.
    Batched,
}

impl TlbFlushOnUnmap {
    pub const NAMES: &'static [&'static str] = &["per-page", "batched"];
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "per-page" => Some(Self::PerPage),
            "batched" => Some(Self::Batched),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::PerPage => "per-page",
            Self::Batched => "batched",
        }
    }
}

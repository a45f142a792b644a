//! The switchable mechanisms: one enum per policy, with the names a run
//! config uses. Each variant says which kernel behaviour it models.

use serde::Serialize;

/// How `clear_huge_page()` orders the sub-page clears of a huge page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClearHugePage {
    /// Kernels before 4.14: sub-pages 0..N-1 ascending, one `clear_page` each.
    Sequential,
    /// 4.14 .. 6.19: `process_huge_page()` order, target sub-page last.
    TargetLast,
}

impl ClearHugePage {
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

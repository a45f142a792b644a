//! The switchable mechanisms' built-in names: one enum per policy, each
//! declared once by `policy_enum!` with one table of variants and the
//! default. For the kernel's hooks (clear and copy plans, THP copy-on-write,
//! the unmap flushes, the NUMA hint order) configuration reads the policy
//! registry (kernel/policy/registry.rs), which also holds a user's own; the
//! enums name its built-ins for code and tests that choose one directly,
//! and a test keeps them registered. The other enums (`thp`, `clear_page`,
//! `preempt`) are read as they are. Each variant says which kernel
//! behaviour it models.

/// What every policy enum offers: its accepted names, its default, and
/// parsing and naming (config/kernel.rs reads any policy key through it).
pub trait Policy: Copy + Sized {
    const NAMES: &'static [&'static str];
    const DEFAULT: Self;
    fn parse(s: &str) -> Option<Self>;
    fn name(self) -> &'static str;
}

/// Declares a policy enum from one table: `Variant = "config-name"`, and its default.
macro_rules! policy_enum {
    ($(#[$m:meta])* pub enum $name:ident (default $def:ident) { $($(#[$vm:meta])* $v:ident = $s:literal,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name { $($(#[$vm])* $v,)* }
        impl $name {
            /// The accepted config names, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($s),*];
            /// The value a config that leaves the key out gets.
            pub const DEFAULT: $name = $name::$def;
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($s => Some(Self::$v),)*
                    _ => None,
                }
            }
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$v => $s,)*
                }
            }
        }
        impl Policy for $name {
            const NAMES: &'static [&'static str] = $name::NAMES;
            const DEFAULT: $name = $name::DEFAULT;
            fn parse(s: &str) -> Option<Self> {
                $name::parse(s)
            }
            fn name(self) -> &'static str {
                $name::name(self)
            }
        }
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }
    };
}

policy_enum! {
    /// How `clear_huge_page()` / `folio_zero_user()` clears a huge page.
    pub enum ClearHugePage (default TargetLast) {
        /// Kernels before 4.14: sub-pages 0..N-1 ascending, one `clear_page` each.
        Sequential = "sequential",
        /// `process_huge_page()` order, target sub-page last: 4.14 .. 6.19.
        TargetLast = "target-last",
        /// Ankur Arora's 2023 x86 override (docs/mechanisms.md#the-2023-multi-page-clearing-proposal, not merged): regions
        /// left, right, then the neighbourhood of the target (±2), each one string
        /// clear; gigantic pages one straight clear.
        Multipage2023 = "multipage-2023",
        /// Linux 7.0 `folio_zero_user()` (docs/mechanisms.md#contiguous-range-clearing): right region, left
        /// region, neighbourhood (radius 2), each through `clear_contig_highpages()`.
        Contiguous70 = "contiguous-7.0",
        /// The 7.0 regions, with the two far regions cleared by non-temporal stores
        /// (`movnti`) and the neighbourhood by `rep stosb`: raised in review, never merged.
        NontemporalFar = "nontemporal-far",
    }
}

impl From<HugePageOrder> for ClearHugePage {
    fn from(o: HugePageOrder) -> Self {
        match o {
            HugePageOrder::Sequential => Self::Sequential,
            HugePageOrder::TargetLast => Self::TargetLast,
        }
    }
}

policy_enum! {
    /// The order in which a huge page's sub-pages are processed one at a time.
    /// Both orders live in one implementation,
    /// `kernel::huge_memory::process_huge_page_in_order`, which the per-page
    /// clear and `copy_user_huge_page()` share.
    pub enum HugePageOrder (default TargetLast) {
        /// Sub-pages 0..N-1 ascending: clearing before 4.14, copying before 4.18.
        Sequential = "sequential",
        /// `process_huge_page()` order, target sub-page last: clearing 4.14 .. 6.19,
        /// copying 4.18 onwards.
        TargetLast = "target-last",
    }
}

/// How `copy_user_huge_page()` orders the sub-page copies of a huge page.
pub type CopyHugePage = HugePageOrder;

policy_enum! {
    /// What a write fault on a read-only PMD-mapped anonymous THP does
    /// (`do_huge_pmd_wp_page()`), when the huge page is still shared.
    pub enum ThpCow (default Split) {
        /// 4.18 .. 5.7: allocate a new huge page and copy all 512 sub-pages with
        /// `copy_user_huge_page()`, then map it with one PMD.
        Copy = "copy",
        /// 5.8 onwards (3917c80280c9 "thp: change CoW semantics for anon-THP"):
        /// split the PMD into PTEs and copy only the faulting 4 KiB page.
        Split = "split",
    }
}

policy_enum! {
    /// Transparent huge pages for anonymous memory (`/sys/kernel/mm/transparent_hugepage/enabled`).
    pub enum Thp (default Always) {
        Always = "always",
        Never = "never",
        /// Only in mappings marked `madvise(MADV_HUGEPAGE)`.
        Madvise = "madvise",
    }
}

policy_enum! {
    /// Which x86 `clear_page` variant the alternatives patching selects. The
    /// default is `erms` on machines with ERMS; the config takes `orig` on others.
    pub enum ClearPage (default Erms) {
        /// `clear_page_erms`: one `rep stosb` of 4096 bytes (X86_FEATURE_ERMS).
        Erms = "erms",
        /// `clear_page_orig`: unrolled loop of 8 `movq` per 64 B.
        Orig = "orig",
    }
}

policy_enum! {
    /// The kernel's preemption model (`CONFIG_PREEMPT_*`, or `preempt=` with
    /// PREEMPT_DYNAMIC). It decides how `clear_contig_highpages()` chunks a region.
    pub enum Preempt (default Voluntary) {
        None = "none",
        Voluntary = "voluntary",
        Full = "full",
        Lazy = "lazy",
    }
}

impl Preempt {
    /// `preempt_model_preemptible()`: full or lazy (RT is not modelled).
    pub fn preemptible(self) -> bool {
        matches!(self, Self::Full | Self::Lazy)
    }
}

policy_enum! {
    /// How reclaim flushes TLBs after unmapping mapped pages (`kernel.tlb_flush_on_unmap`).
    pub enum TlbFlushOnUnmap (default Batched) {
        /// Before 4.3: `ptep_clear_flush()` → `flush_tlb_page()`, one shootdown
        /// round to the mm's CPUs for every page unmapped.
        PerPage = "per-page",
        /// 4.3 onwards (72b252aed506, d950c9477d51): the CPUs of every unmapped
        /// page's mm are ORed into `tlbflush_unmap_batch`, and
        /// `try_to_unmap_flush()` sends one IPI per CPU, each flushing its whole TLB.
        Batched = "batched",
        /// 6.15 onwards on CPUs with INVLPGB (AMD Zen 3+; Rik van Riel's
        /// "x86/mm: broadcast TLB flushing with INVLPGB", 2025): batched as
        /// above, but `arch_tlbbatch_flush()` issues one INVLPGB of all
        /// non-global translations and waits with TLBSYNC; the hardware
        /// invalidates every CPU's TLB and no IPI is sent.
        Broadcast = "broadcast",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn one_table_gives_names_parsing_defaults_and_serialisation() {
        for &n in ClearHugePage::NAMES {
            let p = ClearHugePage::parse(n).unwrap();
            assert_eq!(p.name(), n);
            assert_eq!(serde_json::to_value(p).unwrap(), serde_json::json!(n));
        }
        assert_eq!(
            ClearHugePage::parse("contiguous-7.0"),
            Some(ClearHugePage::Contiguous70)
        );
        assert_eq!(ClearHugePage::parse("Sequential"), None);
        assert_eq!(
            (ThpCow::DEFAULT, Thp::DEFAULT, Preempt::DEFAULT),
            (ThpCow::Split, Thp::Always, Preempt::Voluntary)
        );
        assert_eq!(Preempt::NAMES, &["none", "voluntary", "full", "lazy"]);
    }
}

policy_enum! {
    /// What `do_numa_page()` does with a misplaced page on a NUMA hinting fault.
    pub enum NumaHintFault (default MigrateThenMap) {
        /// Before 5.13: the PTE is made accessible first, then the page is
        /// migrated; the migration's `try_to_unmap` finds an accessible PTE
        /// and shoots down the TLBs of the mm's CPUs.
        MapThenMigrate = "map-then-migrate",
        /// 5.13+ (b99a342d4f11): the page is migrated while its PTE is still
        /// PROT_NONE, so no TLB can hold it and no shootdown is needed; the
        /// PTE is made accessible only if migration is not done.
        MigrateThenMap = "migrate-then-map",
    }
}

policy_enum! {
    /// How `migrate_pages()` flushes the TLBs of the pages it unmaps.
    pub enum MigrateTlbFlush (default Batched) {
        /// Before 6.3: `try_to_unmap(folio, 0)` → `ptep_clear_flush` →
        /// `flush_tlb_page`: one flush of the page per accessible PTE.
        PerPage = "per-page",
        /// 6.3+ ("migrate_pages: batch flushing TLB", 7e12beb8ca2a): the
        /// unmap of a batch of folios uses `TTU_BATCH_FLUSH` and one
        /// `try_to_unmap_flush()` (one full-flush IPI per CPU) before the
        /// copies; a NUMA hinting fault migrates a batch of one folio.
        Batched = "batched",
        /// 6.15 onwards on CPUs with INVLPGB: batched as above, the batch
        /// flushed by one INVLPGB of all non-global translations and a
        /// TLBSYNC (the arch's `arch_tlbbatch_flush()`, as reclaim's).
        Broadcast = "broadcast",
    }
}

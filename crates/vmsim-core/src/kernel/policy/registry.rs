//! The policies a run can name, by hook: the built-ins and whatever a user
//! registers (a Rust type from their own crate, or — through a resolver the
//! Python binding installs — a function in a `.py` file). Configuration
//! reads every policy key through this registry, so the accepted names, the
//! error messages and the docs' lists come from one place.
//!
//! Invariants: a registry's names are unique and listed in registration
//! order (built-ins first, in the order docs/config.md gives them); a
//! `Hook` is the policy a run config resolved, and it serialises as its
//! name, so a config's JSON is the same whichever way the policy came in.

use super::clear::ClearPlan;
use super::cow::{CopyPlan, ThpCowPolicy};
use super::numa::NumaHintPolicy;
use super::tlb::UnmapFlush;
use crate::error::Error;
use std::path::Path;
use std::sync::Arc;

/// A policy a run config chose: its name and its implementation.
pub struct Hook<T: ?Sized> {
    name: Arc<str>,
    imp: Arc<T>,
    builtin: bool,
}

impl<T: ?Sized> Clone for Hook<T> {
    fn clone(&self) -> Self {
        Hook {
            name: self.name.clone(),
            imp: self.imp.clone(),
            builtin: self.builtin,
        }
    }
}

impl<T: ?Sized> Hook<T> {
    /// A built-in policy: its plans are proved by the tests, so a release
    /// build does not re-check them at run time.
    pub fn builtin(name: &str, imp: Arc<T>) -> Self {
        Hook {
            name: name.into(),
            imp,
            builtin: true,
        }
    }

    /// A user's policy: what it returns is checked every time it decides.
    pub fn user(name: &str, imp: Arc<T>) -> Self {
        Hook {
            name: name.into(),
            imp,
            builtin: false,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The implementation, shared.
    pub fn shared(&self) -> Arc<T> {
        self.imp.clone()
    }

    /// Whether the policy is one of vmsim's own.
    pub fn is_builtin(&self) -> bool {
        self.builtin
    }

    /// What the kernel makes of a plan the policy returned (`planned`):
    /// a user's is checked with `check` every time; a built-in's is proved
    /// by the unit tests, so only a debug build checks it again.
    pub fn checked(
        &self,
        planned: Result<(), String>,
        check: impl FnOnce() -> Result<(), String>,
    ) -> Result<(), String> {
        match planned {
            Ok(()) if self.builtin && !cfg!(debug_assertions) => Ok(()),
            Ok(()) => check(),
            Err(e) => Err(e),
        }
    }
}

impl<T: ?Sized> std::ops::Deref for Hook<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.imp
    }
}

impl<T: ?Sized> std::fmt::Debug for Hook<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.name)
    }
}

impl<T: ?Sized> PartialEq for Hook<T> {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl<T: ?Sized> serde::Serialize for Hook<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name)
    }
}

/// The policies registered for one hook, in registration order.
pub struct Registry<T: ?Sized> {
    entries: Vec<Hook<T>>,
    default: &'static str,
}

impl<T: ?Sized> Clone for Registry<T> {
    fn clone(&self) -> Self {
        Registry {
            entries: self.entries.clone(),
            default: self.default,
        }
    }
}

impl<T: ?Sized> Registry<T> {
    fn new(default: &'static str) -> Self {
        Registry {
            entries: Vec::new(),
            default,
        }
    }

    fn builtin(mut self, name: &str, imp: Arc<T>) -> Self {
        self.entries.push(Hook::builtin(name, imp));
        self
    }

    fn add(&mut self, what: &str, name: &str, imp: Arc<T>) -> Result<(), Error> {
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(Error::Config {
                key: what.into(),
                message: format!(
                    "{name:?} is not a policy name: it must be non-empty, without spaces"
                ),
            });
        }
        if self.get(name).is_some() {
            return Err(Error::Config {
                key: what.into(),
                message: format!("a policy named {name:?} is registered already"),
            });
        }
        self.entries.push(Hook::user(name, imp));
        Ok(())
    }

    /// The registered policy of this name.
    pub fn get(&self, name: &str) -> Option<Hook<T>> {
        self.entries.iter().find(|h| &*h.name == name).cloned()
    }

    /// The policy a config that leaves the key out gets.
    pub fn default_hook(&self) -> Hook<T> {
        self.get(self.default).expect("the default is registered")
    }

    /// The registered policies, in registration order.
    pub fn hooks(&self) -> &[Hook<T>] {
        &self.entries
    }

    /// The names a config may give, in registration order.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|h| &*h.name).collect()
    }
}

/// Finds policies that are not registered by name, e.g. the Python
/// binding's `"file.py:function"`. Each method returns None for a name it
/// does not handle, and an error message for one it handles but cannot load.
pub trait Resolver: Send + Sync {
    /// A form of name the resolver handles, for error messages
    /// (`a Python policy "file.py:function"`).
    fn describe(&self) -> &str;
    fn clear(
        &self,
        name: &str,
        base_dir: Option<&Path>,
    ) -> Option<Result<Arc<dyn ClearPlan>, String>>;
    fn copy(
        &self,
        name: &str,
        base_dir: Option<&Path>,
    ) -> Option<Result<Arc<dyn CopyPlan>, String>>;
    fn thp_cow(
        &self,
        name: &str,
        base_dir: Option<&Path>,
    ) -> Option<Result<Arc<dyn ThpCowPolicy>, String>>;
    fn unmap_flush(
        &self,
        name: &str,
        base_dir: Option<&Path>,
    ) -> Option<Result<Arc<dyn UnmapFlush>, String>>;
    fn numa_hint(
        &self,
        name: &str,
        base_dir: Option<&Path>,
    ) -> Option<Result<Arc<dyn NumaHintPolicy>, String>>;
}

/// Every hook's policies, and the resolver for names not registered.
#[derive(Clone)]
pub struct Policies {
    /// `kernel.clear_huge_page`.
    pub clear: Registry<dyn ClearPlan>,
    /// `kernel.copy_huge_page`.
    pub copy: Registry<dyn CopyPlan>,
    /// `kernel.thp_cow`.
    pub thp_cow: Registry<dyn ThpCowPolicy>,
    /// `kernel.tlb_flush_on_unmap` (reclaim's).
    pub reclaim_flush: Registry<dyn UnmapFlush>,
    /// `kernel.migrate_tlb_flush`.
    pub migrate_flush: Registry<dyn UnmapFlush>,
    /// `kernel.numa_hint_fault`.
    pub numa_hint: Registry<dyn NumaHintPolicy>,
    resolver: Option<Arc<dyn Resolver>>,
}

impl std::fmt::Debug for Policies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policies")
            .field("clear", &self.clear.names())
            .field("copy", &self.copy.names())
            .field("thp_cow", &self.thp_cow.names())
            .field("reclaim_flush", &self.reclaim_flush.names())
            .field("migrate_flush", &self.migrate_flush.names())
            .field("numa_hint", &self.numa_hint.names())
            .field(
                "resolver",
                &self.resolver.as_ref().map(|r| r.describe().to_string()),
            )
            .finish()
    }
}

impl Policies {
    /// vmsim's own policies: the kernel generations and proposals the
    /// built-in experiments compare.
    pub fn builtin() -> Policies {
        use super::clear::{Contiguous70, Multipage2023, NontemporalFar, Sequential, TargetLast};
        use super::cow::{BuiltinCow, PerPageCopy};
        use super::numa::{Fixed, HintOrder};
        use super::tlb::{Batched, Broadcast, PerPage};
        use crate::policy::{HugePageOrder, ThpCow};
        // One line per built-in, in the order docs/config.md lists them; the
        // first argument of `new` is the default.
        let clear = Registry::<dyn ClearPlan>::new("target-last")
            .builtin("sequential", Arc::new(Sequential))
            .builtin("target-last", Arc::new(TargetLast))
            .builtin("multipage-2023", Arc::new(Multipage2023))
            .builtin("contiguous-7.0", Arc::new(Contiguous70))
            .builtin("nontemporal-far", Arc::new(NontemporalFar));
        let copy = Registry::<dyn CopyPlan>::new("target-last")
            .builtin(
                "sequential",
                Arc::new(PerPageCopy(HugePageOrder::Sequential)),
            )
            .builtin(
                "target-last",
                Arc::new(PerPageCopy(HugePageOrder::TargetLast)),
            );
        let thp_cow = Registry::<dyn ThpCowPolicy>::new("split")
            .builtin("copy", Arc::new(BuiltinCow(ThpCow::Copy)))
            .builtin("split", Arc::new(BuiltinCow(ThpCow::Split)));
        let reclaim_flush = Registry::<dyn UnmapFlush>::new("batched")
            .builtin("per-page", Arc::new(PerPage))
            .builtin("batched", Arc::new(Batched))
            .builtin("broadcast", Arc::new(Broadcast));
        let migrate_flush = Registry::<dyn UnmapFlush>::new("batched")
            .builtin("per-page", Arc::new(PerPage))
            .builtin("batched", Arc::new(Batched))
            .builtin("broadcast", Arc::new(Broadcast));
        let numa_hint = Registry::<dyn NumaHintPolicy>::new("migrate-then-map")
            .builtin(
                "map-then-migrate",
                Arc::new(Fixed(HintOrder::MapThenMigrate)),
            )
            .builtin(
                "migrate-then-map",
                Arc::new(Fixed(HintOrder::MigrateThenMap)),
            );
        Policies {
            clear,
            copy,
            thp_cow,
            reclaim_flush,
            migrate_flush,
            numa_hint,
            resolver: None,
        }
    }

    /// Adds a huge-page clear plan a config names `name` (`kernel.clear_huge_page`).
    pub fn register_clear(
        mut self,
        name: &str,
        plan: impl ClearPlan + 'static,
    ) -> Result<Self, Error> {
        self.clear
            .add("kernel.clear_huge_page", name, Arc::new(plan))?;
        Ok(self)
    }

    /// Adds a huge-page copy plan (`kernel.copy_huge_page`).
    pub fn register_copy(
        mut self,
        name: &str,
        plan: impl CopyPlan + 'static,
    ) -> Result<Self, Error> {
        self.copy
            .add("kernel.copy_huge_page", name, Arc::new(plan))?;
        Ok(self)
    }

    /// Adds a THP copy-on-write decision (`kernel.thp_cow`).
    pub fn register_thp_cow(
        mut self,
        name: &str,
        p: impl ThpCowPolicy + 'static,
    ) -> Result<Self, Error> {
        self.thp_cow.add("kernel.thp_cow", name, Arc::new(p))?;
        Ok(self)
    }

    /// Adds an unmap TLB-flush rule, for reclaim (`kernel.tlb_flush_on_unmap`)
    /// and migration (`kernel.migrate_tlb_flush`) alike.
    pub fn register_unmap_flush(
        mut self,
        name: &str,
        p: impl UnmapFlush + 'static,
    ) -> Result<Self, Error> {
        let p: Arc<dyn UnmapFlush> = Arc::new(p);
        self.reclaim_flush
            .add("kernel.tlb_flush_on_unmap", name, p.clone())?;
        self.migrate_flush
            .add("kernel.migrate_tlb_flush", name, p)?;
        Ok(self)
    }

    /// Adds a NUMA hinting-fault order (`kernel.numa_hint_fault`).
    pub fn register_numa_hint(
        mut self,
        name: &str,
        p: impl NumaHintPolicy + 'static,
    ) -> Result<Self, Error> {
        self.numa_hint
            .add("kernel.numa_hint_fault", name, Arc::new(p))?;
        Ok(self)
    }

    /// Installs the resolver of names that are not registered.
    pub fn with_resolver(mut self, r: Arc<dyn Resolver>) -> Self {
        self.resolver = Some(r);
        self
    }

    pub fn resolver(&self) -> Option<&dyn Resolver> {
        self.resolver.as_deref()
    }
}

/// The built-in registry, made once.
pub fn builtin() -> &'static Policies {
    static B: std::sync::OnceLock<Policies> = std::sync::OnceLock::new();
    B.get_or_init(Policies::builtin)
}

/// The built-in policy an enum of policy.rs names, as a run config would
/// resolve it (for code and tests that choose a built-in directly).
macro_rules! builtin_hook {
    ($from:ty, $to:ty, $reg:ident) => {
        impl From<$from> for Hook<$to> {
            fn from(p: $from) -> Self {
                builtin()
                    .$reg
                    .get(p.name())
                    .expect("every built-in name is registered")
            }
        }
    };
}
builtin_hook!(crate::policy::ClearHugePage, dyn ClearPlan, clear);
builtin_hook!(crate::policy::HugePageOrder, dyn CopyPlan, copy);
builtin_hook!(crate::policy::ThpCow, dyn ThpCowPolicy, thp_cow);
builtin_hook!(
    crate::policy::TlbFlushOnUnmap,
    dyn UnmapFlush,
    reclaim_flush
);
builtin_hook!(
    crate::policy::MigrateTlbFlush,
    dyn UnmapFlush,
    migrate_flush
);
builtin_hook!(crate::policy::NumaHintFault, dyn NumaHintPolicy, numa_hint);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::policy::clear::{ClearCtx, ClearStep};

    struct Backwards;
    impl ClearPlan for Backwards {
        fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
            out.extend((0..ctx.nr_pages).rev().map(ClearStep::Subpage));
            Ok(())
        }
    }

    #[test]
    fn the_policy_enums_name_registered_builtins_and_agree_on_defaults() {
        use crate::policy::*;
        let p = Policies::builtin();
        for n in ClearHugePage::NAMES {
            assert!(p.clear.get(n).is_some_and(|h| h.is_builtin()), "{n}");
        }
        for n in CopyHugePage::NAMES {
            assert!(p.copy.get(n).is_some(), "{n}");
        }
        for n in ThpCow::NAMES {
            assert!(p.thp_cow.get(n).is_some(), "{n}");
        }
        for n in TlbFlushOnUnmap::NAMES {
            assert!(p.reclaim_flush.get(n).is_some(), "{n}");
        }
        for n in MigrateTlbFlush::NAMES {
            assert!(p.migrate_flush.get(n).is_some(), "{n}");
        }
        for n in NumaHintFault::NAMES {
            assert!(p.numa_hint.get(n).is_some(), "{n}");
        }
        assert_eq!(p.clear.default_hook().name(), ClearHugePage::DEFAULT.name());
        assert_eq!(p.copy.default_hook().name(), CopyHugePage::DEFAULT.name());
        assert_eq!(p.thp_cow.default_hook().name(), ThpCow::DEFAULT.name());
        assert_eq!(
            p.reclaim_flush.default_hook().name(),
            TlbFlushOnUnmap::DEFAULT.name()
        );
        assert_eq!(
            p.migrate_flush.default_hook().name(),
            MigrateTlbFlush::DEFAULT.name()
        );
        assert_eq!(
            p.numa_hint.default_hook().name(),
            NumaHintFault::DEFAULT.name()
        );
    }

    #[test]
    fn builtins_are_listed_in_order_and_a_user_policy_joins_them() {
        let p = Policies::builtin();
        assert_eq!(
            p.clear.names(),
            [
                "sequential",
                "target-last",
                "multipage-2023",
                "contiguous-7.0",
                "nontemporal-far"
            ]
        );
        assert_eq!(p.clear.default_hook().name(), "target-last");
        assert_eq!(
            p.reclaim_flush.names(),
            ["per-page", "batched", "broadcast"]
        );
        assert_eq!(
            p.migrate_flush.names(),
            ["per-page", "batched", "broadcast"]
        );
        let p = p.register_clear("backwards", Backwards).unwrap();
        let h = p.clear.get("backwards").unwrap();
        assert!(!h.is_builtin() && p.clear.get("sequential").unwrap().is_builtin());
        assert_eq!(
            serde_json::to_value(&h).unwrap(),
            serde_json::json!("backwards")
        );
        let e = p.register_clear("target-last", Backwards).err().unwrap();
        assert!(e.to_string().contains("registered already"), "{e}");
    }
}

//! Python policies at the core's hooks: a `Resolver` for names the Python
//! side can load (`"FILE.py:NAME"`, callables registered by the API), and
//! one wrapper per hook that calls the policy's adapter
//! (`vmsim._policies`) with the GIL held.
//!
//! Each wrapper remembers its answer per context (a policy decides from its
//! context alone), so a policy is called once per distinct context: the
//! cost of Python is paid per distinct fault shape, not per fault. The
//! answers are looked up, never iterated, so the memo cannot make a run
//! depend on hashing.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use vmsim_core::kernel::policy::clear::{ClearCtx, ClearPlan, ClearStep};
use vmsim_core::kernel::policy::cow::{CopyCtx, CopyPlan, CowAction, CowCtx, ThpCowPolicy};
use vmsim_core::kernel::policy::numa::{HintCtx, HintOrder, NumaHintPolicy};
use vmsim_core::kernel::policy::tlb::{kernel_full_flush, BatchFlush, FlushCtx, UnmapFlush};
use vmsim_core::kernel::policy::{Policies, Resolver};
use vmsim_core::kernel::StoreHow;

/// The built-in policies and the Python resolver.
pub fn policies() -> Policies {
    Policies::builtin().with_resolver(Arc::new(PyResolver))
}

struct PyResolver;

/// The adapter `vmsim._policies.resolve(kind, name, base_dir)` gives, None
/// if `name` is not a Python policy name.
fn adapter(kind: &str, name: &str, base_dir: Option<&Path>) -> Option<Result<Py<PyAny>, String>> {
    crate::progress::on_main(|| {
        Python::attach(|py| {
            let r = (|| -> PyResult<Option<Py<PyAny>>> {
                let m = py.import("vmsim._policies")?;
                let a = m.call_method1(
                    "resolve",
                    (
                        kind,
                        name,
                        base_dir.map(|p| p.to_string_lossy().into_owned()),
                    ),
                )?;
                Ok(if a.is_none() { None } else { Some(a.unbind()) })
            })();
            match r {
                Ok(None) => None,
                Ok(Some(a)) => Some(Ok(a)),
                // Ctrl-C while the policy's file loads stops the run (the
                // binding raises it), never an empty config error.
                Err(e) if crate::progress::take_signal(py, &e) => Some(Err("interrupted".into())),
                Err(e) => Some(Err(e.value(py).to_string())),
            }
        })
    })
    .unwrap_or_else(|| Some(Err("the run ended before the policy was loaded".into())))
}

/// Calls `f` with the GIL on the thread where signals reach Python code
/// (progress.rs, `on_main`).
fn py_call<T: Send>(
    f: impl for<'py> FnOnce(Python<'py>) -> Result<T, String> + Send,
) -> Result<T, String> {
    crate::progress::on_main(|| Python::attach(f))
        .unwrap_or_else(|| Err("the run ended before the policy could be called".into()))
}

/// Calls `adapter.decide(args)`; the adapter returns `("ok", value)` or
/// `("error", traceback)`.
fn decide<'py, A, T>(
    py: Python<'py>,
    adapter: &Py<PyAny>,
    args: A,
    read: impl FnOnce(&Bound<'py, PyAny>) -> PyResult<T>,
) -> Result<T, String>
where
    A: IntoPyObject<'py>,
{
    let r = (|| -> PyResult<Result<T, String>> {
        let out = adapter.bind(py).call_method1("decide", (args,))?;
        let t = out.cast::<PyTuple>()?;
        let tag: String = t.get_item(0)?.extract()?;
        let v = t.get_item(1)?;
        Ok(if tag == "ok" {
            Ok(read(&v)?)
        } else {
            Err(v.extract::<String>()?.trim_end().to_string())
        })
    })();
    r.unwrap_or_else(|e| {
        if crate::progress::take_signal(py, &e) {
            return Err("interrupted".into());
        }
        Err(format!(
            "the policy's answer could not be read: {}",
            e.value(py)
        ))
    })
}

/// A memo of answers by context.
struct Memo<K, V>(Mutex<BTreeMap<K, Result<V, String>>>);

impl<K: Ord + Copy, V: Clone> Memo<K, V> {
    fn new() -> Self {
        Memo(Mutex::new(BTreeMap::new()))
    }
    fn get(&self, k: K, f: impl FnOnce() -> Result<V, String>) -> Result<V, String> {
        if let Some(v) = self.0.lock().unwrap_or_else(|e| e.into_inner()).get(&k) {
            return v.clone();
        }
        let v = f();
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(k, v.clone());
        v
    }
}

struct PyClear {
    adapter: Py<PyAny>,
    memo: Memo<ClearCtx, Vec<ClearStep>>,
}

fn store_code(h: StoreHow) -> u8 {
    match h {
        StoreHow::String => 0,
        StoreHow::MovLoop => 1,
        StoreHow::NonTemporal => 2,
        StoreHow::Clzero => 3,
    }
}

impl ClearPlan for PyClear {
    fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
        let steps = self.memo.get(*ctx, || {
            py_call(|py| {
                let args = (
                    ctx.nr_pages,
                    ctx.target,
                    ctx.preemptible,
                    store_code(ctx.string),
                );
                decide(py, &self.adapter, args, |v| {
                    let raw: Vec<(u8, u64, u64, u8)> = v.extract()?;
                    Ok(raw
                        .into_iter()
                        .map(|(k, a, b, how)| match k {
                            0 => ClearStep::Subpage(a),
                            1 => ClearStep::Region {
                                start: a,
                                len: b,
                                how: match how {
                                    0 => StoreHow::String,
                                    1 => StoreHow::MovLoop,
                                    3 => StoreHow::Clzero,
                                    _ => StoreHow::NonTemporal,
                                },
                            },
                            _ => ClearStep::Fence,
                        })
                        .collect())
                })
            })
        })?;
        out.extend_from_slice(&steps);
        Ok(())
    }
}

struct PyCopy {
    adapter: Py<PyAny>,
    memo: Memo<CopyCtx, Vec<u64>>,
}

impl CopyPlan for PyCopy {
    fn plan(&self, ctx: &CopyCtx, out: &mut Vec<u64>) -> Result<(), String> {
        let order = self.memo.get(*ctx, || {
            py_call(|py| {
                decide(py, &self.adapter, (ctx.nr_pages, ctx.target), |v| {
                    // A negative index is out of the folio as much as a large one.
                    let raw: Vec<i64> = v.extract()?;
                    Ok(raw.into_iter().map(|i| i as u64).collect())
                })
            })
        })?;
        out.extend_from_slice(&order);
        Ok(())
    }
}

struct PyCow {
    adapter: Py<PyAny>,
    memo: Memo<CowCtx, CowAction>,
}

impl ThpCowPolicy for PyCow {
    fn decide(&self, ctx: &CowCtx) -> Result<CowAction, String> {
        self.memo.get(*ctx, || {
            py_call(|py| {
                decide(py, &self.adapter, (ctx.nr_pages, ctx.exclusive), |v| {
                    Ok(match v.extract::<String>()?.as_str() {
                        "reuse" => CowAction::Reuse,
                        "copy" => CowAction::Copy,
                        _ => CowAction::Split,
                    })
                })
            })
        })
    }
}

struct PyFlush {
    adapter: Py<PyAny>,
    batch: BatchFlush,
    /// The policy has `full_flush`; without it the kernel's rule decides.
    full_flush: bool,
    /// Answers by (method: 0 `should_defer`, 1 `full_flush`; context).
    memo: Memo<(u8, FlushCtx), bool>,
}

impl PyFlush {
    fn ask(&self, method: u8, ctx: &FlushCtx) -> Result<bool, String> {
        self.memo.get((method, *ctx), || {
            py_call(|py| {
                let args = (
                    method,
                    ctx.others,
                    ctx.nr_cpus,
                    ctx.pending,
                    ctx.nr_pages,
                    ctx.kind as u8,
                    ctx.sampled as u8,
                    ctx.ceiling,
                );
                decide(py, &self.adapter, args, |v| v.extract::<bool>())
            })
        })
    }
}

impl UnmapFlush for PyFlush {
    fn should_defer(&self, ctx: &FlushCtx) -> Result<bool, String> {
        self.ask(0, ctx)
    }
    fn full_flush(&self, ctx: &FlushCtx) -> Result<bool, String> {
        if !self.full_flush {
            return Ok(kernel_full_flush(ctx));
        }
        self.ask(1, ctx)
    }
    fn batch_flush(&self) -> BatchFlush {
        self.batch
    }
}

struct PyHint {
    adapter: Py<PyAny>,
    memo: Memo<HintCtx, HintOrder>,
}

impl NumaHintPolicy for PyHint {
    fn decide(&self, ctx: &HintCtx) -> Result<HintOrder, String> {
        self.memo.get(*ctx, || {
            py_call(|py| {
                decide(py, &self.adapter, (ctx.page_node, ctx.cpu_node), |v| {
                    Ok(match v.extract::<String>()?.as_str() {
                        "map-then-migrate" => HintOrder::MapThenMigrate,
                        _ => HintOrder::MigrateThenMap,
                    })
                })
            })
        })
    }
}

impl Resolver for PyResolver {
    fn describe(&self) -> &str {
        "a Python policy \"FILE.py:NAME\""
    }
    fn clear(
        &self,
        name: &str,
        base_dir: Option<&Path>,
    ) -> Option<Result<Arc<dyn ClearPlan>, String>> {
        Some(adapter("clear", name, base_dir)?.map(|adapter| {
            Arc::new(PyClear {
                adapter,
                memo: Memo::new(),
            }) as Arc<dyn ClearPlan>
        }))
    }
    fn copy(
        &self,
        name: &str,
        base_dir: Option<&Path>,
    ) -> Option<Result<Arc<dyn CopyPlan>, String>> {
        Some(adapter("copy", name, base_dir)?.map(|adapter| {
            Arc::new(PyCopy {
                adapter,
                memo: Memo::new(),
            }) as Arc<dyn CopyPlan>
        }))
    }
    fn thp_cow(
        &self,
        name: &str,
        base_dir: Option<&Path>,
    ) -> Option<Result<Arc<dyn ThpCowPolicy>, String>> {
        Some(adapter("thp_cow", name, base_dir)?.map(|adapter| {
            Arc::new(PyCow {
                adapter,
                memo: Memo::new(),
            }) as Arc<dyn ThpCowPolicy>
        }))
    }
    fn unmap_flush(
        &self,
        name: &str,
        base_dir: Option<&Path>,
    ) -> Option<Result<Arc<dyn UnmapFlush>, String>> {
        Some(adapter("unmap_flush", name, base_dir)?.and_then(|adapter| {
            let (batch, full_flush) = py_call(|py| {
                let a = adapter.bind(py);
                (|| -> PyResult<(String, bool)> {
                    let batch = a.getattr("batch_flush")?.extract::<String>()?;
                    Ok((batch, a.getattr("has_full_flush")?.extract::<bool>()?))
                })()
                .map_err(|e| e.value(py).to_string())
            })?;
            Ok(Arc::new(PyFlush {
                adapter,
                batch: if batch == "broadcast" {
                    BatchFlush::Broadcast
                } else {
                    BatchFlush::Ipis
                },
                full_flush,
                memo: Memo::new(),
            }) as Arc<dyn UnmapFlush>)
        }))
    }
    fn numa_hint(
        &self,
        name: &str,
        base_dir: Option<&Path>,
    ) -> Option<Result<Arc<dyn NumaHintPolicy>, String>> {
        Some(adapter("numa_hint", name, base_dir)?.map(|adapter| {
            Arc::new(PyHint {
                adapter,
                memo: Memo::new(),
            }) as Arc<dyn NumaHintPolicy>
        }))
    }
}

//! Runs a core call with the GIL released, reporting progress to an optional
//! Python callable and checking for signals (Ctrl-C) now and then.

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::Sender;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// Least host time between two calls into Python.
const INTERVAL: Duration = Duration::from_millis(250);

/// Unwind payload used to leave the core when Python raised (Ctrl-C, or an
/// exception in the progress callback). `resume_unwind` skips the panic hook,
/// so nothing is printed.
struct Abort;

struct Reporter {
    callback: Option<Py<PyAny>>,
    last_call: Option<Instant>,
    last_label: String,
    last_fraction: f64,
    error: Option<PyErr>,
}

impl Reporter {
    fn report(&mut self, label: &str, fraction: f64) {
        let now = Instant::now();
        let due = match self.last_call {
            None => true,
            Some(t) => {
                now.duration_since(t) >= INTERVAL
                    || label != self.last_label
                    || (fraction >= 1.0 && self.last_fraction < 1.0)
            }
        };
        if !due {
            return;
        }
        self.last_call = Some(now);
        if label != self.last_label {
            self.last_label = label.to_string();
        }
        self.last_fraction = fraction;
        let callback = &self.callback;
        let result = Python::attach(|py| -> PyResult<()> {
            py.check_signals()?;
            if let Some(cb) = callback {
                cb.call1(py, (label, fraction))?;
            }
            Ok(())
        });
        if let Err(err) = result {
            self.error = Some(err);
            panic::resume_unwind(Box::new(Abort));
        }
    }
}

/// How often the calling (main) thread looks for signals while the core runs.
const POLL: Duration = Duration::from_millis(50);

/// Python code the core's threads hand to the calling thread.
type Job = Box<dyn FnOnce() + Send + 'static>;

enum Msg {
    /// The core has returned.
    Done,
    Call(Job),
}

/// While a run started on Python's main thread is under way: where its
/// threads send the Python code they call (policies), so that it runs on
/// the main thread, where a signal interrupts it (a policy that sleeps or
/// spins then stops on Ctrl-C as any Python code does).
static MAIN: Mutex<Option<Sender<Msg>>> = Mutex::new(None);

/// A signal's exception raised inside Python code the core called: the
/// run stops, and this is what it raises.
static SIGNAL: Mutex<Option<PyErr>> = Mutex::new(None);

/// Runs `f` (Python code; it takes the GIL itself) on the main thread when
/// a run started there is under way, else here. None if the run ended
/// before the call could be made.
pub fn on_main<T: Send>(f: impl FnOnce() -> T + Send) -> Option<T> {
    let tx = MAIN.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let Some(tx) = tx else {
        return Some(f());
    };
    let (rtx, rrx) = std::sync::mpsc::channel::<T>();
    let job: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
        let _ = rtx.send(f());
    });
    // SAFETY: the job borrows from this frame, which waits below until the
    // job has run or has been dropped unrun (its result sender with it),
    // so nothing it borrows is used after this frame ends.
    let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
    if let Err(std::sync::mpsc::SendError(Msg::Call(job))) = tx.send(Msg::Call(job)) {
        job();
    }
    rrx.recv().ok()
}

/// Whether `e` is a signal's exception (Ctrl-C's KeyboardInterrupt, or
/// what a SIGTERM handler raises); if so the run is asked to stop and
/// re-raises it.
pub fn take_signal(py: Python<'_>, e: &PyErr) -> bool {
    let signal = e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py)
        || e.is_instance_of::<pyo3::exceptions::PySystemExit>(py);
    if signal {
        SIGNAL
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(|| e.clone_ref(py));
        vmsim_core::interrupt::request();
    }
    signal
}

fn is_main_thread(py: Python<'_>) -> bool {
    (|| -> PyResult<bool> {
        let t = py.import("threading")?;
        Ok(t.call_method0("current_thread")?
            .is(&t.call_method0("main_thread")?))
    })()
    .unwrap_or(false)
}

/// Calls `f` on a host thread of its own with the GIL released. `f`
/// receives the progress hook to hand to the core. Meanwhile the calling
/// thread, the one Python delivers signals to, runs the Python code the
/// core calls (`on_main`) and looks for signals every `POLL`: a signal's
/// exception (KeyboardInterrupt from Ctrl-C, or what the program's SIGTERM
/// handler raises), here or inside that code, asks the core to stop
/// (`vmsim_core::interrupt`), waits for it, and is re-raised. A Python
/// exception raised while reporting (one raised by `callback`) stops the
/// run and is re-raised too.
pub fn run_detached<E, F>(
    py: Python<'_>,
    callback: Option<Py<PyAny>>,
    f: F,
) -> PyResult<Result<String, E>>
where
    E: Send,
    F: FnOnce(&mut dyn FnMut(&str, f64)) -> Result<String, E> + Send,
{
    let mut reporter = Reporter {
        callback,
        last_call: None,
        last_label: String::new(),
        last_fraction: 0.0,
        error: None,
    };
    let mut signal: Option<PyErr> = None;
    let (tx, rx) = std::sync::mpsc::channel::<Msg>();
    let main = is_main_thread(py);
    if main {
        *MAIN.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx.clone());
    }
    let rep = &mut reporter;
    let sig = &mut signal;
    let outcome = py.detach(move || {
        std::thread::scope(|s| {
            let worker = s.spawn(move || {
                let mut hook = |label: &str, fraction: f64| rep.report(label, fraction);
                let r = panic::catch_unwind(AssertUnwindSafe(|| f(&mut hook)));
                let _ = tx.send(Msg::Done);
                r
            });
            loop {
                match rx.recv_timeout(POLL) {
                    Ok(Msg::Done) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                    Ok(Msg::Call(job)) => job(),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                }
                if sig.is_none() {
                    if let Err(e) = Python::attach(|py| py.check_signals()) {
                        *sig = Some(e);
                        vmsim_core::interrupt::request();
                    }
                }
            }
            if main {
                *MAIN.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
            // Calls sent as the run ended run here (none is left unanswered).
            while let Ok(m) = rx.try_recv() {
                if let Msg::Call(job) = m {
                    job();
                }
            }
            worker.join().unwrap_or_else(Err)
        })
    });
    let raised = SIGNAL.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(e) = signal.or(raised) {
        vmsim_core::interrupt::clear();
        return Err(e);
    }
    match outcome {
        Ok(result) => {
            // A signal that arrived after the last report still interrupts.
            py.check_signals()?;
            Ok(result)
        }
        Err(payload) if payload.is::<Abort>() => Err(reporter
            .error
            .take()
            .expect("progress reporter aborted without an error")),
        // A panic in the core is a bug, but it must reach Python as a typed
        // error that `except Exception` catches, never as a PanicException.
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(crate::error::VmsimError::new_err(format!(
                "internal error (please report): {what}"
            )))
        }
    }
}

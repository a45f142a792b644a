//! Runs a core call with the GIL released on a thread of its own, while
//! the calling thread reports its progress to an optional Python callable,
//! runs the Python code the core calls, and looks for signals (Ctrl-C).

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::Sender;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// Least host time between two calls of the progress callback (it is also
/// called this often while the core reports nothing).
const INTERVAL: Duration = Duration::from_millis(250);

/// The core's side of progress: which reports are worth a callback (the
/// first, a new label, the end, else one per `INTERVAL`), sent to the
/// calling thread.
struct Reporter {
    tx: Sender<Msg>,
    last_sent: Option<Instant>,
    last_label: String,
    last_fraction: f64,
}

impl Reporter {
    fn report(&mut self, label: &str, fraction: f64) {
        let now = Instant::now();
        let due = match self.last_sent {
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
        self.last_sent = Some(now);
        if label != self.last_label {
            self.last_label = label.to_string();
        }
        self.last_fraction = fraction;
        let _ = self.tx.send(Msg::Progress(label.to_string(), fraction));
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
    /// A report for the progress callback: label and fraction done.
    Progress(String, f64),
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

/// Whether the run is told to stop (a signal, its callback raised, or a
/// stop of every run): then no more Python code of it runs, since a policy
/// asked again would sleep or spin again.
fn stopping(sig: &Option<PyErr>, cb_err: &Option<PyErr>) -> bool {
    sig.is_some() || cb_err.is_some() || vmsim_core::interrupt::requested()
}

/// Calls `f` on a host thread of its own with the GIL released. `f`
/// receives the progress hook to hand to the core. Meanwhile the calling
/// thread, the one Python delivers signals to, runs the Python code the
/// core calls (`on_main`), calls `callback` with the core's reports (and
/// with the last one again every `INTERVAL` while the core reports
/// nothing), and looks for signals every `POLL`: a signal's exception
/// (KeyboardInterrupt from Ctrl-C, or what the program's SIGTERM handler
/// raises), here or inside that code, asks every run to stop
/// (`vmsim_core::interrupt`), waits for this one, and is re-raised. An
/// exception `callback` raises stops this run alone and is re-raised.
pub fn run_detached<E, F>(
    py: Python<'_>,
    callback: Option<Py<PyAny>>,
    f: F,
) -> PyResult<Result<String, E>>
where
    E: Send,
    F: FnOnce(&mut dyn FnMut(&str, f64)) -> Result<String, E> + Send,
{
    let mut signal: Option<PyErr> = None;
    let mut raised_by_callback: Option<PyErr> = None;
    let (tx, rx) = std::sync::mpsc::channel::<Msg>();
    let main = is_main_thread(py);
    if main {
        *MAIN.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx.clone());
    }
    // This run's own stop: its callback raised.
    let stop = vmsim_core::interrupt::RunStop::new();
    let mut reporter = Reporter {
        tx: tx.clone(),
        last_sent: None,
        last_label: String::new(),
        last_fraction: 0.0,
    };
    let sig = &mut signal;
    let cb_err = &mut raised_by_callback;
    let run = Some(stop.flag());
    let outcome = py.detach(move || {
        // The last report, and when the callback last ran.
        let mut last: Option<(String, f64)> = None;
        let mut called = Instant::now();
        let call = |label: &str, fraction: f64, cb_err: &mut Option<PyErr>| {
            let Some(cb) = &callback else { return };
            if cb_err.is_some() {
                return;
            }
            if let Err(e) = Python::attach(|py| {
                cb.call1(py, (label, fraction)).map(drop).inspect_err(|e| {
                    if !take_signal(py, e) {
                        stop.stop();
                    }
                })
            }) {
                *cb_err = Some(e);
            }
        };
        std::thread::scope(|s| {
            let worker = s.spawn(move || {
                let mut hook = |label: &str, fraction: f64| reporter.report(label, fraction);
                let r = panic::catch_unwind(AssertUnwindSafe(|| {
                    vmsim_core::interrupt::scope(run, || f(&mut hook))
                }));
                let _ = tx.send(Msg::Done);
                r
            });
            loop {
                match rx.recv_timeout(POLL) {
                    Ok(Msg::Done) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                    Ok(Msg::Call(job)) => {
                        if !stopping(sig, cb_err) {
                            job()
                        }
                    }
                    Ok(Msg::Progress(label, fraction)) => {
                        call(&label, fraction, cb_err);
                        called = Instant::now();
                        last = Some((label, fraction));
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                }
                if called.elapsed() >= INTERVAL {
                    if let Some((label, fraction)) = &last {
                        call(label, *fraction, cb_err);
                    }
                    called = Instant::now();
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
            // Calls and reports sent as the run ended are answered here.
            while let Ok(m) = rx.try_recv() {
                match m {
                    Msg::Call(job) => {
                        if !stopping(sig, cb_err) {
                            job()
                        }
                    }
                    Msg::Progress(label, fraction) => call(&label, fraction, cb_err),
                    Msg::Done => {}
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
    if let Some(e) = raised_by_callback {
        return Err(e);
    }
    match outcome {
        Ok(result) => {
            // A signal that arrived after the last report still interrupts.
            py.check_signals()?;
            Ok(result)
        }
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

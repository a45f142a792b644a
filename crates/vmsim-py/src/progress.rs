//! Runs a core call with the GIL released, reporting progress to an optional
//! Python callable and checking for signals (Ctrl-C) now and then.

use std::panic::{self, AssertUnwindSafe};
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

/// Calls `f` on a host thread of its own with the GIL released. `f`
/// receives the progress hook to hand to the core. Meanwhile the calling
/// thread, the one Python delivers signals to, looks for them every
/// `POLL`: a signal's exception (KeyboardInterrupt from Ctrl-C, or what
/// the program's SIGTERM handler raises) asks the core to stop
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
    let outcome = py.detach(|| {
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let rep = &mut reporter;
        std::thread::scope(|s| {
            let worker = s.spawn(move || {
                let mut hook = |label: &str, fraction: f64| rep.report(label, fraction);
                let r = panic::catch_unwind(AssertUnwindSafe(|| f(&mut hook)));
                let _ = done.send(());
                r
            });
            while finished.recv_timeout(POLL).is_err() {
                if signal.is_none() {
                    if let Err(e) = Python::attach(|py| py.check_signals()) {
                        signal = Some(e);
                        vmsim_core::interrupt::request();
                    }
                }
            }
            let r = worker.join().unwrap_or_else(Err);
            if signal.is_some() {
                vmsim_core::interrupt::clear();
            }
            r
        })
    });
    if let Some(e) = signal {
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

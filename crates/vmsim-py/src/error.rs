//! Maps the Rust crates' errors to a typed Python exception hierarchy:
//!
//! ```text
//! Exception
//!  └── VmsimError
//!       ├── ConfigError (also a ValueError; attributes `key`, `message`)
//!       ├── DataVerificationError
//!       ├── PolicyError (attributes `key`, `policy`, `message`)
//!       └── HwError
//!            └── HwUnsupportedError
//! ```

use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use vmsim_core::api::Error as CoreError;
use vmsim_hw::HwError as HostError;

pyo3::create_exception!(
    vmsim._core,
    VmsimError,
    PyException,
    "Base class of all errors raised by vmsim."
);
pyo3::create_exception!(
    vmsim._core,
    DataVerificationError,
    VmsimError,
    "A workload's final content check failed: the simulated kernel lost or corrupted data."
);
pyo3::create_exception!(
    vmsim._core,
    PolicyError,
    VmsimError,
    "A policy the run uses failed: it raised an exception (the message holds its traceback) \
or decided what the kernel cannot do (a clear plan that leaves a sub-page uncleared). \
Attributes: key (the config key that chose it), policy (its name), message."
);
pyo3::create_exception!(
    vmsim._core,
    HwError,
    VmsimError,
    "A host measurement (`vmsim hw`) failed."
);
pyo3::create_exception!(
    vmsim._core,
    HwUnsupportedError,
    HwError,
    "The host measurement is not supported on this machine or operating system."
);

const CONFIG_ERROR_DOC: &str = "Bad configuration or option.\n\n\
Attributes:\n    key: dotted path of the offending field (e.g. \"workload.nr_task\").\n    \
message: what is wrong and which values are accepted.";

static CONFIG_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// `ConfigError(VmsimError, ValueError)`. `create_exception!` allows a single
/// base class only, so this type is made with `type(name, bases, dict)`.
pub fn config_error_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    let ty = CONFIG_ERROR.get_or_try_init(py, || -> PyResult<Py<PyType>> {
        let bases = PyTuple::new(
            py,
            [py.get_type::<VmsimError>(), py.get_type::<PyValueError>()],
        )?;
        let dict = PyDict::new(py);
        dict.set_item("__module__", "vmsim._core")?;
        dict.set_item("__doc__", CONFIG_ERROR_DOC)?;
        let ty = py
            .get_type::<PyType>()
            .call1(("ConfigError", bases, dict))?
            .cast_into::<PyType>()?;
        Ok(ty.unbind())
    })?;
    Ok(ty.bind(py))
}

/// Builds a `ConfigError` whose `str()` is "key: message" (or the message
/// alone when there is no key) and which carries `key` and `message`.
pub fn config_error(py: Python<'_>, key: &str, message: &str) -> PyErr {
    let text = if key.is_empty() {
        message.to_string()
    } else {
        format!("{key}: {message}")
    };
    let build = || -> PyResult<PyErr> {
        let value = config_error_type(py)?.call1((text.as_str(),))?;
        value.setattr("key", key)?;
        value.setattr("message", message)?;
        Ok(PyErr::from_value(value))
    };
    build().unwrap_or_else(|e| e)
}

/// A `PolicyError` whose `str()` is the core's text, carrying its parts.
fn policy_error(py: Python<'_>, key: &str, policy: &str, message: &str) -> PyErr {
    let text = CoreError::Policy {
        key: key.into(),
        policy: policy.into(),
        message: message.into(),
    }
    .to_string();
    let err = PolicyError::new_err(text);
    let value = err.value(py);
    let _ = value.setattr("key", key);
    let _ = value.setattr("policy", policy);
    let _ = value.setattr("message", message);
    err
}

/// A core error on its way to Python.
pub struct PyVmsimErr(pub CoreError);

impl From<CoreError> for PyVmsimErr {
    fn from(err: CoreError) -> Self {
        PyVmsimErr(err)
    }
}

impl From<PyVmsimErr> for PyErr {
    fn from(err: PyVmsimErr) -> PyErr {
        Python::attach(|py| match err.0 {
            CoreError::Config { key, message } => config_error(py, &key, &message),
            CoreError::DataVerification(msg) => DataVerificationError::new_err(msg),
            CoreError::Policy {
                key,
                policy,
                message,
            } => policy_error(py, &key, &policy, &message),
            CoreError::Io(msg) => VmsimError::new_err(msg),
            CoreError::Internal(msg) => VmsimError::new_err(format!("internal error: {msg}")),
            // Another run of the process was interrupted (interrupt.rs).
            CoreError::Interrupted => pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"),
        })
    }
}

/// A host-measurement error on its way to Python.
pub struct PyHwErr(pub HostError);

impl From<HostError> for PyHwErr {
    fn from(err: HostError) -> Self {
        PyHwErr(err)
    }
}

impl From<PyHwErr> for PyErr {
    fn from(err: PyHwErr) -> PyErr {
        Python::attach(|py| match err.0 {
            HostError::Config { key, message } => config_error(py, &key, &message),
            HostError::Unsupported(msg) => HwUnsupportedError::new_err(msg),
            HostError::Io(msg) => HwError::new_err(msg),
            HostError::Interrupted(sig) => {
                let name = if sig == SIGTERM { "SIGTERM" } else { "SIGINT" };
                pyo3::exceptions::PyKeyboardInterrupt::new_err(name)
            }
        })
    }
}

/// SIGTERM's number on Linux (all architectures vmsim-hw builds for).
const SIGTERM: i32 = 15;

/// Adds the exception types to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("VmsimError", py.get_type::<VmsimError>())?;
    m.add("ConfigError", config_error_type(py)?)?;
    m.add(
        "DataVerificationError",
        py.get_type::<DataVerificationError>(),
    )?;
    m.add("PolicyError", py.get_type::<PolicyError>())?;
    m.add("HwError", py.get_type::<HwError>())?;
    m.add("HwUnsupportedError", py.get_type::<HwUnsupportedError>())?;
    Ok(())
}

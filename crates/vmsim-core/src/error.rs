//! The crate's error type. Every layer reports through it; the API and the
//! Python binding map its variants to typed exceptions.

#[derive(Debug, Clone)]
pub enum Error {
    /// Bad configuration: `key` is the dotted path of the offending field.
    Config {
        key: String,
        message: String,
    },
    /// A workload's final content-tag check failed.
    DataVerification(String),
    /// A policy failed while the run used it: it raised an error, or what it
    /// decided breaks the kernel's rules (a plan that leaves a sub-page
    /// uncleared). `key` is the config key that chose it, `policy` its name.
    Policy {
        key: String,
        policy: String,
        message: String,
    },
    Io(String),
    Internal(String),
    /// The caller asked the run to stop (crate::interrupt): Ctrl-C or SIGTERM.
    Interrupted,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Config { key, message } => write!(f, "{key}: {message}"),
            Error::DataVerification(m) => write!(f, "data verification failed: {m}"),
            Error::Policy {
                key,
                policy,
                message,
            } => write!(f, "policy {policy:?} ({key}): {message}"),
            Error::Io(m) => write!(f, "{m}"),
            Error::Internal(m) => write!(f, "simulation error: {m}"),
            Error::Interrupted => write!(f, "interrupted"),
        }
    }
}

impl std::error::Error for Error {}

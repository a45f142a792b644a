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
    Io(String),
    Internal(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Config { key, message } => write!(f, "{key}: {message}"),
            Error::DataVerification(m) => write!(f, "data verification failed: {m}"),
            Error::Io(m) => write!(f, "{m}"),
            Error::Internal(m) => write!(f, "simulation error: {m}"),
        }
    }
}

impl std::error::Error for Error {}

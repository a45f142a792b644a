//! Host-side routines (filled in separately).

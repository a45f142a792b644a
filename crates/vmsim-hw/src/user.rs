//! The plans a user registered for this process (`vmsim hw clear` / `copy`
//! with a policy a config can name), by index, so that strategies stay
//! `Copy`. Names are leaked once each (a handful per process) so a strategy
//! names itself with `&'static str` as the built-ins do.

use std::sync::{Arc, RwLock};

pub struct UserPlans<T: ?Sized>(RwLock<Vec<(&'static str, Arc<T>)>>);

impl<T: ?Sized> UserPlans<T> {
    pub const fn new() -> Self {
        UserPlans(RwLock::new(Vec::new()))
    }

    /// Registers `plan` under `name` (replacing one of the same name); its index.
    pub fn register(&self, name: &str, plan: Arc<T>) -> u16 {
        let mut u = self.0.write().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = u.iter().position(|(n, _)| *n == name) {
            u[i].1 = plan;
            return i as u16;
        }
        u.push((Box::leak(name.to_string().into_boxed_str()), plan));
        (u.len() - 1) as u16
    }

    pub fn name(&self, i: u16) -> &'static str {
        self.0.read().unwrap_or_else(|e| e.into_inner())[i as usize].0
    }

    pub fn get(&self, i: u16) -> Arc<T> {
        self.0.read().unwrap_or_else(|e| e.into_inner())[i as usize]
            .1
            .clone()
    }

    /// The index of the plan registered as `name`.
    pub fn find(&self, name: &str) -> Option<u16> {
        let u = self.0.read().unwrap_or_else(|e| e.into_inner());
        u.iter().position(|(n, _)| *n == name).map(|i| i as u16)
    }

    pub fn names(&self) -> Vec<&'static str> {
        let u = self.0.read().unwrap_or_else(|e| e.into_inner());
        u.iter().map(|(n, _)| *n).collect()
    }
}

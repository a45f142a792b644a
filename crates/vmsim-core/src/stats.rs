//! Typed counters: every component keeps its event counts in a struct of
//! `u64` fields that serialises (the report is built from the
//! serialisation, so a counter added to a struct is reported without
//! further code) and adds and subtracts field by field (so a region of
//! interest is the counters at its end minus those at its start).
//!
//! `counters!` declares such a struct and its `Add`/`Sub` from one field
//! list; `Counters` (a snapshot of every component's counters as JSON
//! numbers) adds and subtracts any serialisable stats struct, including the
//! hardware model's, leaf by leaf.

use serde_json::{Map, Value};

/// Declares a counters struct with `Clone, Debug, Default, PartialEq, Eq,
/// Serialize` and field-wise `Add`, `Sub`, `AddAssign`, `SubAssign`.
#[macro_export]
macro_rules! counters {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident: u64,)* }) => {
        $(#[$m])*
        #[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
        pub struct $name { $($(#[$fm])* pub $f: u64,)* }
        impl std::ops::AddAssign<&$name> for $name {
            fn add_assign(&mut self, o: &$name) { $(self.$f += o.$f;)* }
        }
        impl std::ops::SubAssign<&$name> for $name {
            fn sub_assign(&mut self, o: &$name) { $(self.$f -= o.$f;)* }
        }
        impl std::ops::Add<&$name> for $name {
            type Output = $name;
            fn add(mut self, o: &$name) -> $name { self += o; self }
        }
        impl std::ops::Sub<&$name> for $name {
            type Output = $name;
            fn sub(mut self, o: &$name) -> $name { self -= o; self }
        }
        impl $name {
            /// Field names in declaration order.
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($f)),*];
        }
    };
}

/// A snapshot of counters: a JSON object whose leaves are unsigned counts
/// (nested objects and arrays of counts allowed).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters(pub Value);

impl Counters {
    /// The counters of a serialisable stats struct.
    pub fn of<T: serde::Serialize>(s: &T) -> Counters {
        Counters(serde_json::to_value(s).expect("stats serialise"))
    }

    /// Leaf-wise sum (missing leaves count as zero).
    pub fn add(&mut self, o: &Counters) {
        combine(&mut self.0, &o.0, 1);
    }

    /// Leaf-wise difference `self - o` (counters only grow, so every leaf stays >= 0).
    pub fn sub(&self, o: &Counters) -> Counters {
        let mut r = self.0.clone();
        combine(&mut r, &o.0, -1);
        Counters(r)
    }
}

fn combine(a: &mut Value, b: &Value, sign: i8) {
    if a.is_null() {
        *a = zero_like(b);
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in y {
                let e = x.entry(k.clone()).or_insert_with(|| zero_like(v));
                combine(e, v, sign);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, v) in y.iter().enumerate() {
                if i == x.len() {
                    x.push(zero_like(v));
                }
                combine(&mut x[i], v, sign);
            }
        }
        (a @ Value::Number(_), Value::Number(n)) => {
            let (p, q) = (a.as_u64().unwrap_or(0), n.as_u64().unwrap_or(0));
            *a = Value::from(if sign > 0 { p + q } else { p.saturating_sub(q) });
        }
        _ => {}
    }
}

fn zero_like(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), zero_like(v)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(zero_like).collect()),
        _ => Value::from(0u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    counters! {
        /// Test counters.
        pub struct T {
            pub a: u64,
            pub b: u64,
        }
    }

    #[test]
    fn typed_and_snapshot_arithmetic() {
        let x = T { a: 5, b: 7 };
        let y = T { a: 2, b: 3 };
        assert_eq!(x.clone() - &y, T { a: 3, b: 4 });
        assert_eq!(y.clone() + &y, T { a: 4, b: 6 });
        assert_eq!(T::FIELDS, &["a", "b"]);
        let mut sum = Counters::default();
        sum.add(&Counters::of(&x));
        assert_eq!(sum, Counters::of(&x), "an empty snapshot adds as zero");
        let mut s = Counters::of(&x);
        s.add(&Counters(
            serde_json::json!({"a": 1, "c": [1, 2], "d": {"e": 4}}),
        ));
        assert_eq!(
            s.0,
            serde_json::json!({"a": 6, "b": 7, "c": [1, 2], "d": {"e": 4}})
        );
        assert_eq!(
            s.sub(&Counters::of(&y)).0,
            serde_json::json!({"a": 4, "b": 4, "c": [1, 2], "d": {"e": 4}})
        );
    }
}

//! A small JSON writer: a value tree with ordered keys, written compactly on one line.
//!
//! It only writes; the tool never reads JSON. Strings are escaped as RFC 8259 requires:
//! `"` and `\` with a backslash, every control character below U+0020 as `\u00XX`.

use std::fmt::Write as _;

/// A JSON value. Object keys keep the order they were given in.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A floating-point number, always written with a fraction; `null` when it is not
    /// finite, which JSON cannot write.
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    Array(Vec<Value>),
    /// An object, keys in writing order.
    Object(Vec<(&'static str, Value)>),
}

impl Value {
    /// A string value.
    pub fn str(s: impl Into<String>) -> Value {
        Value::Str(s.into())
    }

    /// A string value, or `null` for `None`.
    pub fn opt_str(s: Option<impl Into<String>>) -> Value {
        s.map_or(Value::Null, Value::str)
    }

    /// The value as compact JSON text.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Int(n) => {
                let _ = write!(out, "{n}");
            }
            Value::UInt(n) => {
                let _ = write!(out, "{n}");
            }
            // `Display` of a float never uses an exponent, so its text is a JSON number; a
            // whole one gets `.0`, so that readers see a float whatever its value.
            Value::Float(x) if x.is_finite() => {
                let start = out.len();
                let _ = write!(out, "{x}");
                if !out[start..].contains('.') {
                    out.push_str(".0");
                }
            }
            Value::Float(_) => out.push_str("null"),
            Value::Str(s) => write_string(out, s),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Value::Object(members) => {
                out.push('{');
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_string(out, key);
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// Appends `s` to `out` as a quoted, escaped JSON string.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(s: &str) -> String {
        Value::str(s).to_json()
    }

    #[test]
    fn escapes_quotes_backslashes_and_control_characters() {
        assert_eq!(string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(
            string("line\nbreak\ttab\r\u{0}\u{1f}"),
            r#""line\u000abreak\u0009tab\u000d\u0000\u001f""#
        );
    }

    #[test]
    fn leaves_other_characters_alone() {
        assert_eq!(string("/mnt/é €/\u{7f}/'"), "\"/mnt/é €/\u{7f}/'\"");
        assert_eq!(string(""), "\"\"");
    }

    #[test]
    fn every_control_character_round_trips_through_a_json_parser() {
        let all: String = (0u32..0x80).filter_map(char::from_u32).collect();
        let text = string(&all);
        assert!(!text.chars().any(|c| u32::from(c) < 0x20), "{text:?}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, serde_json::Value::String(all));
    }

    #[test]
    fn floats_are_json_numbers_or_null() {
        for (x, text) in [
            (0.0, "0.0"),
            (4.0, "4.0"),
            (1.5, "1.5"),
            (-2.25, "-2.25"),
            (1e-7, "0.0000001"),
            (f64::NAN, "null"),
            (f64::INFINITY, "null"),
        ] {
            assert_eq!(Value::Float(x).to_json(), text, "{x}");
        }
        let big = Value::Float(1e300).to_json();
        let back: serde_json::Value = serde_json::from_str(&big).unwrap();
        assert_eq!(back.as_f64(), Some(1e300));
    }

    #[test]
    fn writes_nested_values_in_key_order() {
        let v = Value::Object(vec![
            ("z", Value::Null),
            (
                "a",
                Value::Array(vec![
                    Value::Bool(true),
                    Value::Int(-1),
                    Value::UInt(u64::MAX),
                ]),
            ),
            ("m", Value::Object(vec![])),
            ("s", Value::opt_str(Some("x"))),
            ("n", Value::opt_str(None::<String>)),
        ]);
        assert_eq!(
            v.to_json(),
            r#"{"z":null,"a":[true,-1,18446744073709551615],"m":{},"s":"x","n":null}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&v.to_json()).unwrap();
        assert_eq!(parsed["a"][2], serde_json::json!(u64::MAX));
    }
}

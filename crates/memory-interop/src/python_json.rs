//! JSON text byte-identical to Python's `json.dumps`.
//!
//! The Python peers store `json.dumps(obj)` with its default arguments: separators `", "` and
//! `": "`, `ensure_ascii=True` (every character outside ASCII written as `\uXXXX`, characters
//! outside the Basic Multilingual Plane as a UTF-16 surrogate pair, lower-case hex), keys in
//! insertion order, and floats written by `float.__repr__` (`1.0`, `1e-05`, `1.5e+300`). A store
//! that shares data with them must produce the same bytes, or a peer that compares or
//! deduplicates by text sees a different message.
//!
//! Key order is the order of the [`serde_json::Map`], which this workspace builds with
//! serde_json's `preserve_order` feature, so a parsed document keeps the order it was written in.
//!
//! ```
//! use memory_interop::python_json::dumps;
//! use serde_json::json;
//!
//! let value = json!({"text": "héllo 🎉", "n": 1.0, "tiny": 0.00001, "ok": true});
//! assert_eq!(
//!     dumps(&value),
//!     r#"{"text": "h\u00e9llo \ud83c\udf89", "n": 1.0, "tiny": 1e-05, "ok": true}"#
//! );
//! ```
//!
//! Limits, none of which the peers' data reaches: integers beyond the 64-bit range and the
//! literal `-0` are parsed by serde_json as floats (Python keeps exact integers), and a
//! [`serde_json::Value`] cannot hold `NaN` or infinities (Python writes `NaN` and `Infinity`).

use std::io;

use serde_json::Value;
use serde_json::ser::{CharEscape, Formatter};

/// The arguments of `json.dumps` that change its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DumpOptions {
    /// `ensure_ascii`: write every non-ASCII character (and DEL) as `\uXXXX`. Python's default
    /// is `true`.
    pub ensure_ascii: bool,
    /// `sort_keys`: write the keys of every object sorted by code point (Python's string order)
    /// instead of in insertion order. Python's default is `false`.
    pub sort_keys: bool,
}

impl Default for DumpOptions {
    /// Python's defaults: `ensure_ascii=True`, `sort_keys=False`.
    fn default() -> Self {
        Self {
            ensure_ascii: true,
            sort_keys: false,
        }
    }
}

impl DumpOptions {
    /// `sort_keys=True, ensure_ascii=False`: the form Agent Framework uses for message identity.
    pub fn sorted_unicode() -> Self {
        Self {
            ensure_ascii: false,
            sort_keys: true,
        }
    }
}

/// `json.dumps(value)` with Python's default arguments.
pub fn dumps(value: &Value) -> String {
    dumps_with(value, DumpOptions::default())
}

/// `json.dumps(value, ensure_ascii=…, sort_keys=…)`.
///
/// ```
/// use memory_interop::python_json::{DumpOptions, dumps_with};
/// use serde_json::json;
///
/// let value = json!({"b": "é", "a": [1, 2]});
/// assert_eq!(dumps_with(&value, DumpOptions::sorted_unicode()), r#"{"a": [1, 2], "b": "é"}"#);
/// ```
pub fn dumps_with(value: &Value, options: DumpOptions) -> String {
    let mut out = String::new();
    write_value(&mut out, value, options);
    out
}

fn write_value(out: &mut String, value: &Value, options: DumpOptions) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else if let Some(u) = n.as_u64() {
                out.push_str(&u.to_string());
            } else if let Some(f) = n.as_f64() {
                out.push_str(&float_repr(f));
            } else {
                // Only reachable with serde_json's arbitrary_precision: the literal as parsed.
                out.push_str(&n.to_string());
            }
        }
        Value::String(s) => write_str(out, s, options.ensure_ascii),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item, options);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            if options.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(out, key, options.ensure_ascii);
                out.push_str(": ");
                write_value(out, item, options);
            }
            out.push('}');
        }
    }
}

/// Writes `s` as a quoted JSON string the way Python's encoder does.
fn write_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    write_str_body(out, s, ensure_ascii);
    out.push('"');
}

/// The escaped content of a string, without quotes.
///
/// Python escapes `"` and `\`, writes `\b \f \n \r \t` for those five controls and `\u00XX` for
/// the other characters below U+0020; with `ensure_ascii` it also writes every character from
/// U+007F up as `\uXXXX` (astral characters as a surrogate pair), always in lower-case hex.
fn write_str_body(out: &mut String, s: &str, ensure_ascii: bool) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => push_u_escape(out, c as u32),
            c if ensure_ascii && (c as u32) >= 0x7f => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    push_u_escape(out, u32::from(*unit));
                }
            }
            c => out.push(c),
        }
    }
}

fn push_u_escape(out: &mut String, unit: u32) {
    out.push_str(&format!("\\u{unit:04x}"));
}

/// `float.__repr__`: the shortest digits that read back as the same double, in fixed notation
/// when the decimal exponent is in `-4 ..= 15` (with `.0` added to whole numbers) and in
/// exponent notation (`1e-05`, `1.5e+300`, at least two exponent digits) otherwise.
///
/// ```
/// use memory_interop::python_json::float_repr;
///
/// assert_eq!(float_repr(1.0), "1.0");
/// assert_eq!(float_repr(0.1), "0.1");
/// assert_eq!(float_repr(1e16), "1e+16");
/// assert_eq!(float_repr(123456789012345.6), "123456789012345.6");
/// assert_eq!(float_repr(-0.0), "-0.0");
/// ```
pub fn float_repr(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    let sign = if value.is_sign_negative() { "-" } else { "" };
    // Rust's `{:e}` gives the shortest round-trip digits, as Python's repr does: `d.ddde±x`.
    let sci = format!("{:e}", value.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    // Python's `decpt`: the value is 0.DIGITS × 10^decpt.
    let decpt = exponent.saturating_add(1);
    let ndigits = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    let mut out = String::from(sign);
    if decpt <= -4 || decpt > 16 {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let exp = decpt.saturating_sub(1);
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.unsigned_abs()));
    } else if decpt <= 0 {
        out.push_str("0.");
        for _ in 0..decpt.saturating_neg() {
            out.push('0');
        }
        out.push_str(&digits);
    } else if decpt < ndigits {
        let point = usize::try_from(decpt).unwrap_or(digits.len());
        out.push_str(&digits[..point]);
        out.push('.');
        out.push_str(&digits[point..]);
    } else {
        out.push_str(&digits);
        for _ in 0..decpt.saturating_sub(ndigits) {
            out.push('0');
        }
        out.push_str(".0");
    }
    out
}

/// A [`serde_json`] formatter that writes what Python's `json.dumps` writes, for serializing any
/// `Serialize` type straight to a writer (`sort_keys` is not available here: keys are written in
/// the order the type serializes them; use [`dumps_with`] to sort a [`Value`]).
///
/// ```
/// use memory_interop::python_json::PythonFormatter;
/// use serde::Serialize;
///
/// let mut out = Vec::new();
/// let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonFormatter::new());
/// serde_json::json!({"a": [1, 2.5, "é"]}).serialize(&mut ser)?;
/// assert_eq!(out, br#"{"a": [1, 2.5, "\u00e9"]}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// serde_json writes a non-finite float as `null` before the formatter sees it, where Python
/// would write `NaN` or `Infinity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PythonFormatter {
    ensure_ascii: bool,
}

impl PythonFormatter {
    /// Python's defaults (`ensure_ascii=True`).
    pub fn new() -> Self {
        Self { ensure_ascii: true }
    }

    /// With `ensure_ascii` set as given.
    pub fn with_ensure_ascii(ensure_ascii: bool) -> Self {
        Self { ensure_ascii }
    }
}

impl Default for PythonFormatter {
    fn default() -> Self {
        Self::new()
    }
}

impl Formatter for PythonFormatter {
    fn write_f32<W>(&mut self, writer: &mut W, value: f32) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        writer.write_all(float_repr(f64::from(value)).as_bytes())
    }

    fn write_f64<W>(&mut self, writer: &mut W, value: f64) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        writer.write_all(float_repr(value).as_bytes())
    }

    fn write_string_fragment<W>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        // serde_json hands over the escapes it knows separately; DEL and non-ASCII arrive here.
        if !self.ensure_ascii || fragment.is_ascii() && !fragment.contains('\u{7f}') {
            return writer.write_all(fragment.as_bytes());
        }
        let mut out = String::with_capacity(fragment.len().saturating_add(16));
        write_str_body(&mut out, fragment, true);
        writer.write_all(out.as_bytes())
    }

    fn write_char_escape<W>(&mut self, writer: &mut W, char_escape: CharEscape) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        let text = match char_escape {
            CharEscape::Quote => "\\\"".to_owned(),
            CharEscape::ReverseSolidus => "\\\\".to_owned(),
            CharEscape::Solidus => "/".to_owned(),
            CharEscape::Backspace => "\\b".to_owned(),
            CharEscape::FormFeed => "\\f".to_owned(),
            CharEscape::LineFeed => "\\n".to_owned(),
            CharEscape::CarriageReturn => "\\r".to_owned(),
            CharEscape::Tab => "\\t".to_owned(),
            CharEscape::AsciiControl(byte) => format!("\\u{byte:04x}"),
        };
        writer.write_all(text.as_bytes())
    }

    fn begin_array_value<W>(&mut self, writer: &mut W, first: bool) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_key<W>(&mut self, writer: &mut W, first: bool) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        // Python separates keys as it separates array values: `, `.
        self.begin_array_value(writer, first)
    }

    fn begin_object_value<W>(&mut self, writer: &mut W) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        writer.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use serde_json::json;

    fn via_formatter(value: &Value, ensure_ascii: bool) -> String {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(
            &mut out,
            PythonFormatter::with_ensure_ascii(ensure_ascii),
        );
        value.serialize(&mut ser).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn check(value: &Value, expected: &str) {
        assert_eq!(dumps(value), expected);
        assert_eq!(via_formatter(value, true), expected);
    }

    #[test]
    fn separators_and_nesting() {
        check(&json!({}), "{}");
        check(&json!([]), "[]");
        check(
            &json!({"a": [1, {"b": null}], "c": false}),
            r#"{"a": [1, {"b": null}], "c": false}"#,
        );
    }

    #[test]
    fn key_order_is_kept() {
        let value: Value =
            serde_json::from_str(r#"{"z": 1, "a": 2, "m": {"y": 1, "b": 2}}"#).unwrap();
        check(&value, r#"{"z": 1, "a": 2, "m": {"y": 1, "b": 2}}"#);
        assert_eq!(
            dumps_with(&value, DumpOptions::sorted_unicode()),
            r#"{"a": 2, "m": {"b": 2, "y": 1}, "z": 1}"#
        );
    }

    #[test]
    fn sort_keys_uses_code_point_order() {
        // Python sorts str keys by code point: "B" < "a" < "é" < "😀".
        let value = json!({"😀": 1, "é": 2, "a": 3, "B": 4});
        assert_eq!(
            dumps_with(
                &value,
                DumpOptions {
                    ensure_ascii: true,
                    sort_keys: true
                }
            ),
            r#"{"B": 4, "a": 3, "\u00e9": 2, "\ud83d\ude00": 1}"#
        );
    }

    #[test]
    fn control_characters_and_quotes() {
        // json.dumps("\x00\x01\x08\x09\x0a\x0b\x0c\x0d\x1f \"\\/\x7f")
        let value = json!("\u{0}\u{1}\u{8}\t\n\u{b}\u{c}\r\u{1f} \"\\/\u{7f}");
        check(
            &value,
            r#""\u0000\u0001\b\t\n\u000b\f\r\u001f \"\\/\u007f""#,
        );
        // ensure_ascii=False leaves DEL alone but still escapes the controls.
        assert_eq!(
            dumps_with(&value, DumpOptions::sorted_unicode()),
            "\"\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f \\\"\\\\/\u{7f}\""
        );
        assert_eq!(
            via_formatter(&value, false),
            dumps_with(&value, DumpOptions::sorted_unicode())
        );
    }

    #[test]
    fn non_ascii_and_astral() {
        // json.dumps("é€\u2028\u2029😀𝄞\uffff")
        let value = json!("é€\u{2028}\u{2029}😀𝄞\u{ffff}");
        check(
            &value,
            r#""\u00e9\u20ac\u2028\u2029\ud83d\ude00\ud834\udd1e\uffff""#,
        );
        assert_eq!(
            dumps_with(&value, DumpOptions::sorted_unicode()),
            "\"é€\u{2028}\u{2029}😀𝄞\u{ffff}\""
        );
        // Keys are escaped the same way.
        check(
            &json!({"ключ": "значение"}),
            r#"{"\u043a\u043b\u044e\u0447": "\u0437\u043d\u0430\u0447\u0435\u043d\u0438\u0435"}"#,
        );
    }

    #[test]
    fn floats_match_python_repr() {
        // Each pair is (value, repr(value)) as CPython prints it.
        let cases: &[(f64, &str)] = &[
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (0.3, "0.3"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.0 / 3.0, "0.3333333333333333"),
            (100.0, "100.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (0.000123, "0.000123"),
            (0.0000123, "1.23e-05"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (9007199254740993.0, "9007199254740992.0"),
            (1.5e300, "1.5e+300"),
            (1e-300, "1e-300"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (1e22, "1e+22"),
            (1e21, "1e+21"),
            (12345.678, "12345.678"),
            (2.0f64.powi(60), "1.152921504606847e+18"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (value, expected) in cases {
            assert_eq!(float_repr(*value), *expected, "{value:e}");
        }
    }

    #[test]
    fn numbers_in_values() {
        let value: Value = serde_json::from_str(
            "[1, -7, 1.0, 1e5, 2.50, 18446744073709551615, -9223372036854775808, 1e-7]",
        )
        .unwrap();
        check(
            &value,
            "[1, -7, 1.0, 100000.0, 2.5, 18446744073709551615, -9223372036854775808, 1e-07]",
        );
    }
}

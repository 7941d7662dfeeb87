//! A message's `created_at` in JSON: RFC 3339 in UTC, written and read without going through
//! `fmt` or chrono's general parser for the common shape (`2024-05-16T18:30:01.250Z`).
//!
//! The text is exactly what chrono's own `Serialize` writes (seconds, then milliseconds,
//! microseconds or nanoseconds when not zero, then `Z`); any other time (a year outside
//! 0 to 9999, a leap second) and any other text is handed to chrono, so what is written and
//! what is accepted are unchanged.

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, Timelike, Utc};
use serde::de::{self, Deserializer, Visitor};
use serde::{Serialize, Serializer};

/// Writes `time` as chrono does.
pub(super) fn serialize<S: Serializer>(
    time: &DateTime<Utc>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut buf = [0u8; 30];
    match write(time, &mut buf) {
        Some(text) => serializer.serialize_str(text),
        None => time.serialize(serializer),
    }
}

/// `time` in `buf`, or `None` for a time the short form does not cover.
fn write<'b>(time: &DateTime<Utc>, buf: &'b mut [u8; 30]) -> Option<&'b str> {
    let year = u32::try_from(time.year()).ok().filter(|y| *y <= 9999)?;
    let nanos = time.nanosecond();
    if nanos >= 1_000_000_000 {
        return None; // a leap second
    }
    let mut out = Writer { buf, len: 0 };
    out.digits(year, 4);
    out.byte(b'-');
    out.digits(time.month(), 2);
    out.byte(b'-');
    out.digits(time.day(), 2);
    out.byte(b'T');
    out.digits(time.hour(), 2);
    out.byte(b':');
    out.digits(time.minute(), 2);
    out.byte(b':');
    out.digits(time.second(), 2);
    if nanos != 0 {
        out.byte(b'.');
        if nanos.is_multiple_of(1_000_000) {
            out.digits(nanos / 1_000_000, 3);
        } else if nanos.is_multiple_of(1_000) {
            out.digits(nanos / 1_000, 6);
        } else {
            out.digits(nanos, 9);
        }
    }
    out.byte(b'Z');
    let len = out.len;
    std::str::from_utf8(buf.get(..len)?).ok()
}

/// Bytes written into a fixed buffer (long enough for every time [`write`] covers).
struct Writer<'b> {
    buf: &'b mut [u8; 30],
    len: usize,
}

impl Writer<'_> {
    fn byte(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len = self.len.saturating_add(1);
        }
    }

    /// `value` in exactly `width` decimal digits (zero-padded).
    fn digits(&mut self, value: u32, width: u32) {
        let mut divisor = 10u32.saturating_pow(width.saturating_sub(1));
        while divisor > 0 {
            let digit = value.checked_div(divisor).unwrap_or(0) % 10;
            // A decimal digit is below 10: the cast cannot truncate.
            self.byte(b'0'.saturating_add(u8::try_from(digit).unwrap_or(0)));
            divisor /= 10;
        }
    }
}

/// Reads a time as chrono does.
pub(super) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<DateTime<Utc>, D::Error> {
    struct TimeVisitor;
    impl Visitor<'_> for TimeVisitor {
        type Value = DateTime<Utc>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an RFC 3339 formatted date and time string")
        }
        fn visit_str<E: de::Error>(self, text: &str) -> Result<DateTime<Utc>, E> {
            match parse(text) {
                Some(time) => Ok(time),
                None => text.parse().map_err(E::custom),
            }
        }
    }
    deserializer.deserialize_str(TimeVisitor)
}

/// Reads `YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z`, or `None` for anything else (also for a valid
/// shape with an impossible date or time, which chrono then refuses in its own words).
fn parse(text: &str) -> Option<DateTime<Utc>> {
    let b = text.as_bytes();
    if b.len() < 20
        || b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || b.get(10) != Some(&b'T')
        || b.get(13) != Some(&b':')
        || b.get(16) != Some(&b':')
        || b.last() != Some(&b'Z')
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<u32> {
        b.get(from..to)?.iter().try_fold(0u32, |acc, &c| {
            c.is_ascii_digit().then(|| {
                acc.saturating_mul(10)
                    .saturating_add(u32::from(c.saturating_sub(b'0')))
            })
        })
    };
    let year = i32::try_from(num(0, 4)?).ok()?;
    let date = NaiveDate::from_ymd_opt(year, num(5, 7)?, num(8, 10)?)?;
    let second = num(17, 19)?;
    if second >= 60 {
        return None; // a leap second: chrono's rules
    }
    let rest = b.get(19..b.len().saturating_sub(1))?;
    let nanos = match rest {
        [] => 0,
        [b'.', fraction @ ..] if (1..=9).contains(&fraction.len()) => {
            let value = num(20, 20usize.saturating_add(fraction.len()))?;
            let scale = 9u32.saturating_sub(u32::try_from(fraction.len()).ok()?);
            value.saturating_mul(10u32.saturating_pow(scale))
        }
        _ => return None,
    };
    let time = NaiveTime::from_hms_nano_opt(num(11, 13)?, num(14, 16)?, second, nanos)?;
    Some(date.and_time(time).and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn chrono_text(time: &DateTime<Utc>) -> String {
        serde_json::to_string(time).unwrap()
    }

    fn ours_text(time: &DateTime<Utc>) -> String {
        let mut out = Vec::new();
        serialize(time, &mut serde_json::Serializer::new(&mut out)).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn ours_read(json: &str) -> Result<DateTime<Utc>, serde_json::Error> {
        deserialize(&mut serde_json::Deserializer::from_str(json))
    }

    fn times() -> Vec<DateTime<Utc>> {
        let mut out = vec![
            Utc::now(),
            Utc.with_ymd_and_hms(2024, 5, 16, 18, 30, 1).unwrap(),
            Utc.with_ymd_and_hms(0, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap(),
            Utc.with_ymd_and_hms(10_000, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(-1, 1, 1, 0, 0, 0).unwrap(),
            DateTime::<Utc>::MIN_UTC,
            DateTime::<Utc>::MAX_UTC,
        ];
        let base = Utc.with_ymd_and_hms(2024, 2, 29, 23, 59, 59).unwrap();
        for nanos in [
            1,
            10,
            999,
            1_000,
            250_000_000,
            123_456_000,
            123_456_789,
            999_999_999,
            1_000_000_000,
            1_500_000_000,
        ] {
            let naive = base.naive_utc();
            if let Some(t) = naive.with_nanosecond(nanos) {
                out.push(t.and_utc());
            }
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let secs = i64::try_from(seed % 400_000_000_000).unwrap() - 100_000_000_000;
            let nanos = u32::try_from((seed >> 20) % 1_000_000_000).unwrap();
            let nanos = match seed % 4 {
                0 => 0,
                1 => nanos - nanos % 1_000_000,
                2 => nanos - nanos % 1_000,
                _ => nanos,
            };
            out.push(DateTime::from_timestamp(secs, nanos).unwrap());
        }
        out
    }

    #[test]
    fn writes_and_reads_what_chrono_does() {
        for time in times() {
            let expected = chrono_text(&time);
            assert_eq!(ours_text(&time), expected, "{time:?}");
            let back: DateTime<Utc> = serde_json::from_str(&expected).unwrap();
            assert_eq!(ours_read(&expected).unwrap(), back, "{expected}");
        }
    }

    #[test]
    fn other_texts_are_read_or_refused_as_chrono_does() {
        for text in [
            "2024-05-16T18:30:01Z",
            "2024-05-16T18:30:01.2Z",
            "2024-05-16T18:30:01.1234567891Z",
            "2024-05-16t18:30:01Z",
            "2024-05-16 18:30:01Z",
            "2024-05-16T18:30:01+02:00",
            "2024-05-16T18:30:01.5-00:30",
            "2024-05-16T18:30:60Z",
            "2024-05-16T23:59:60.5Z",
            "2024-13-16T18:30:01Z",
            "2024-02-30T18:30:01Z",
            "2024-05-16T24:00:00Z",
            "2024-05-16T18:30:01.Z",
            "2024-05-16T18:30:01.abcZ",
            "+2024-05-16T18:30:01Z",
            "2024-05-16T18:30:01",
            "２024-05-16T18:30:01Z",
            "",
            "Z",
        ] {
            let json = serde_json::to_string(text).unwrap();
            let chrono = serde_json::from_str::<DateTime<Utc>>(&json);
            let ours = ours_read(&json);
            match (ours, chrono) {
                (Ok(ours), Ok(chrono)) => assert_eq!(ours, chrono, "{text}"),
                (Err(_), Err(_)) => {}
                (ours, chrono) => panic!("{text}: ours {ours:?}, chrono {chrono:?}"),
            }
        }
    }
}

//! Input generation: byte mutations of seeds, structural mutations of seeds parsed as JSON,
//! and freshly generated JSON built from the corpus's own keys and strings.

use fastrand::Rng;
use serde_json::{Map, Number, Value};

/// Strings that break parsers: escapes, surrogates, control and multi-byte characters,
/// separators of keys and URLs, numbers in text.
const STRINGS: &[&str] = &[
    "",
    " ",
    "\u{0}",
    "\n",
    "é",
    "日本",
    "🦀",
    "\u{feff}",
    "\u{202e}",
    "a:b",
    "a/b",
    "@",
    ":@",
    "%",
    "%zz",
    "%F0%9F",
    "?",
    "#",
    "//",
    "[::1]",
    "http://",
    "https://u:p@h/x?password=s#f",
    "redis://:🦀@h",
    "postgres://a:b@c,d/e?token=t&x=y",
    "user:pass@host",
    "0",
    "-1",
    "1e999",
    "NaN",
    "null",
    "true",
    "v1",
    "user",
    "assistant",
    "system",
    "tool",
    "developer",
    "text",
    "image",
    "function_call",
    "function_result",
    "data:image/png;base64,AAAA",
    "data:;base64,@@",
    "Thu, 01 Jan 1970 00:00:00 GMT",
    "Fri, 31 Dec 9999 23:59:59 +0000",
    "Mon, 01 Jan 0001 00:00:00 -2359",
    "2024-05-16T18:30:00Z",
    "+275760-09-13T00:00:00Z",
    "9999999999999999999999",
    "18446744073709551616",
    "0.000001",
    "agent-memory/session",
    "agent-memory/agent-chat",
    "agent-memory/memory-blocks",
    "t.default/s.x/src.y",
];

/// Numbers at the edges of every integer and float type.
fn interesting_number(rng: &mut Rng) -> Value {
    match rng.u8(0..12) {
        0 => Value::from(0),
        1 => Value::from(-1),
        2 => Value::from(u64::MAX),
        3 => Value::from(i64::MIN),
        4 => Value::from(u32::MAX as u64 + 1),
        5 => Value::from(usize::MAX),
        6 => Number::from_f64(f64::MAX).map_or(Value::Null, Value::Number),
        7 => Number::from_f64(-0.0).map_or(Value::Null, Value::Number),
        8 => Number::from_f64(1e-310).map_or(Value::Null, Value::Number),
        9 => Number::from_f64(0.5).map_or(Value::Null, Value::Number),
        10 => Value::from(rng.u64(..)),
        _ => Value::from(rng.i64(-1000..1000)),
    }
}

/// Byte strings spliced into inputs as they are.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"null",
    b"true",
    b"-0",
    b"1e999",
    b"-1e400",
    b"18446744073709551616",
    b"\\u0000",
    b"\\ud800",
    b"\\udfff\\ud800",
    b"\\",
    b"\xff",
    b"\xf0\x9f\xa6",
    b"\xc3\xa9",
    b"@",
    b"://",
    b"%",
    b"[]",
    b"{}",
    b"\"\":\"\"",
];

/// What the mutators draw from: the seeds as bytes, the seeds parsed as JSON, and the keys and
/// strings found in them.
#[derive(Debug, Clone)]
pub struct Corpus {
    seeds: Vec<Vec<u8>>,
    values: Vec<Value>,
    /// The indexes in `seeds` of the seeds the target accepts.
    focus: Vec<usize>,
    /// The indexes in `values` of the seeds the target accepts.
    value_focus: Vec<usize>,
    keys: Vec<String>,
    strings: Vec<String>,
}

impl Corpus {
    /// A corpus of `seeds` (at least one: an empty input is added when there are none).
    pub fn new(mut seeds: Vec<Vec<u8>>) -> Self {
        if seeds.is_empty() {
            seeds.push(Vec::new());
        }
        let mut values = Vec::new();
        let mut keys = Vec::new();
        let mut strings: Vec<String> = STRINGS.iter().map(|s| (*s).to_owned()).collect();
        for seed in &seeds {
            if let Ok(value) = serde_json::from_slice::<Value>(seed) {
                collect(&value, &mut keys, &mut strings);
                values.push(value);
            }
        }
        keys.sort();
        keys.dedup();
        strings.sort();
        strings.dedup();
        if keys.is_empty() {
            keys.push("id".to_owned());
        }
        Self {
            seeds,
            values,
            focus: Vec::new(),
            value_focus: Vec::new(),
            keys,
            strings,
        }
    }

    /// The same corpus, mutating mostly the seeds `valid` accepts (all seeds stay available
    /// to splice and graft from).
    pub fn focused(mut self, valid: fn(&[u8]) -> bool) -> Self {
        self.focus = (0..self.seeds.len())
            .filter(|&i| valid(&self.seeds[i]))
            .collect();
        self.value_focus = (0..self.values.len())
            .filter(|&i| serde_json::to_vec(&self.values[i]).is_ok_and(|bytes| valid(&bytes)))
            .collect();
        self
    }

    fn pick_seed(&self, rng: &mut Rng) -> &[u8] {
        if !self.focus.is_empty() && rng.u8(0..5) != 0 {
            &self.seeds[self.focus[rng.usize(..self.focus.len())]]
        } else {
            &self.seeds[rng.usize(..self.seeds.len())]
        }
    }

    fn pick_value(&self, rng: &mut Rng) -> &Value {
        if !self.value_focus.is_empty() && rng.u8(0..5) != 0 {
            &self.values[self.value_focus[rng.usize(..self.value_focus.len())]]
        } else {
            &self.values[rng.usize(..self.values.len())]
        }
    }

    /// The seeds, as given.
    pub fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    /// One new input.
    pub fn generate(&self, rng: &mut Rng) -> Vec<u8> {
        let pick = rng.u8(0..10);
        if pick < 4 || self.values.is_empty() {
            let mut bytes = self.pick_seed(rng).to_vec();
            let rounds = 1 + rng.usize(..4) * rng.usize(..3);
            for _ in 0..rounds {
                self.mutate_bytes(rng, &mut bytes);
            }
            bytes
        } else if pick < 9 {
            let mut value = self.pick_value(rng).clone();
            let rounds = 1 + rng.usize(..3) * rng.usize(..2);
            for _ in 0..rounds {
                self.mutate_value(rng, &mut value, 0);
            }
            let mut bytes = if rng.bool() {
                serde_json::to_vec(&value)
            } else {
                serde_json::to_vec_pretty(&value)
            }
            .unwrap_or_default();
            if rng.u8(0..8) == 0 {
                self.mutate_bytes(rng, &mut bytes);
            }
            bytes
        } else {
            serde_json::to_vec(&self.random_value(rng, 0)).unwrap_or_default()
        }
    }

    fn mutate_bytes(&self, rng: &mut Rng, bytes: &mut Vec<u8>) {
        let len = bytes.len();
        match rng.u8(0..9) {
            0 if len > 0 => {
                let i = rng.usize(..len);
                bytes[i] ^= 1 << rng.u8(0..8);
            }
            1 if len > 0 => {
                let i = rng.usize(..len);
                bytes[i] = *[0u8, 0x7f, 0x80, 0xff, b'"', b'\\', b'0', b'9', b' ']
                    .get(rng.usize(..9))
                    .unwrap_or(&0);
            }
            2 if len > 0 => {
                let start = rng.usize(..len);
                let end = (start + 1 + rng.usize(..16)).min(len);
                bytes.drain(start..end);
            }
            3 if len > 0 => {
                let start = rng.usize(..len);
                let end = (start + 1 + rng.usize(..32)).min(len);
                let chunk = bytes[start..end].to_vec();
                let at = rng.usize(..=len);
                bytes.splice(at..at, chunk);
            }
            4 => {
                let token = TOKENS[rng.usize(..TOKENS.len())];
                let at = rng.usize(..=len);
                bytes.splice(at..at, token.iter().copied());
            }
            5 => {
                let text = &self.strings[rng.usize(..self.strings.len())];
                let at = rng.usize(..=len);
                bytes.splice(at..at, text.bytes());
            }
            6 => {
                // Splice: the start of this input, the end of another seed.
                let other = &self.seeds[rng.usize(..self.seeds.len())];
                let cut = rng.usize(..=len);
                let from = rng.usize(..=other.len());
                bytes.truncate(cut);
                bytes.extend_from_slice(&other[from..]);
            }
            7 if len > 0 => {
                bytes.truncate(rng.usize(..len));
            }
            _ => {
                let at = rng.usize(..=len);
                bytes.insert(at, rng.u8(..));
            }
        }
    }

    /// Changes one node somewhere in `value`.
    fn mutate_value(&self, rng: &mut Rng, value: &mut Value, depth: usize) {
        let descend = depth < 12 && rng.u8(0..4) != 0;
        match value {
            Value::Object(map) if descend && !map.is_empty() => {
                let i = rng.usize(..map.len());
                if let Some((_, child)) = map.iter_mut().nth(i) {
                    self.mutate_value(rng, child, depth + 1);
                }
                return;
            }
            Value::Array(items) if descend && !items.is_empty() => {
                let i = rng.usize(..items.len());
                self.mutate_value(rng, &mut items[i], depth + 1);
                return;
            }
            _ => {}
        }
        match (rng.u8(0..8), &mut *value) {
            (0, Value::Object(map)) if !map.is_empty() => {
                let i = rng.usize(..map.len());
                if let Some(key) = map.keys().nth(i).cloned() {
                    map.remove(&key);
                }
            }
            (1, Value::Object(map)) => {
                let key = self.key(rng);
                map.insert(key, self.random_value(rng, depth + 1));
            }
            (2, Value::Array(items)) if !items.is_empty() => {
                let i = rng.usize(..items.len());
                if rng.bool() {
                    items.remove(i);
                } else {
                    let copy = items[i].clone();
                    items.insert(rng.usize(..=items.len()), copy);
                }
            }
            (3, Value::String(text)) => self.mutate_string(rng, text),
            (4, _) => *value = interesting_number(rng),
            (5, _) if rng.u8(0..8) == 0 => {
                // Deep nesting, around serde_json's recursion limit (128).
                let mut inner = std::mem::take(value);
                for _ in 0..100 + rng.usize(..60) {
                    inner = Value::Array(vec![inner]);
                }
                *value = inner;
            }
            (5, _) => {
                let inner = std::mem::take(value);
                *value = if rng.bool() {
                    Value::Array(vec![inner])
                } else {
                    let mut map = Map::new();
                    map.insert(self.key(rng), inner);
                    Value::Object(map)
                };
            }
            (6, _) if !self.values.is_empty() => {
                // Graft a node of another seed.
                let mut other = &self.values[rng.usize(..self.values.len())];
                for _ in 0..rng.usize(..6) {
                    other = match other {
                        Value::Object(map) if !map.is_empty() => {
                            map.values().nth(rng.usize(..map.len())).unwrap_or(other)
                        }
                        Value::Array(items) if !items.is_empty() => {
                            &items[rng.usize(..items.len())]
                        }
                        _ => break,
                    };
                }
                *value = other.clone();
            }
            _ => *value = self.random_value(rng, depth + 1),
        }
    }

    fn mutate_string(&self, rng: &mut Rng, text: &mut String) {
        match rng.u8(0..5) {
            0 => *text = self.strings[rng.usize(..self.strings.len())].clone(),
            1 => text.push_str(&self.strings[rng.usize(..self.strings.len())]),
            2 => {
                let at = text.char_indices().map(|(i, _)| i).collect::<Vec<_>>();
                if !at.is_empty() {
                    let i = at[rng.usize(..at.len())];
                    text.insert_str(i, &self.strings[rng.usize(..self.strings.len())]);
                }
            }
            3 => {
                let keep = text.chars().count() / 2;
                *text = text.chars().take(keep).collect();
            }
            _ => {
                let repeat = 1 + rng.usize(..64);
                *text = text.repeat(repeat.min(4096 / (text.len() + 1) + 1));
            }
        }
    }

    fn key(&self, rng: &mut Rng) -> String {
        if rng.u8(0..8) == 0 {
            self.strings[rng.usize(..self.strings.len())].clone()
        } else {
            self.keys[rng.usize(..self.keys.len())].clone()
        }
    }

    fn random_value(&self, rng: &mut Rng, depth: usize) -> Value {
        let leaf = depth >= 6;
        match rng.u8(0..if leaf { 5 } else { 8 }) {
            0 => Value::Null,
            1 => Value::Bool(rng.bool()),
            2 => interesting_number(rng),
            3 | 4 => Value::String(self.strings[rng.usize(..self.strings.len())].clone()),
            5 => Value::Array(
                (0..rng.usize(..4))
                    .map(|_| self.random_value(rng, depth + 1))
                    .collect(),
            ),
            _ => Value::Object(
                (0..rng.usize(..5))
                    .map(|_| (self.key(rng), self.random_value(rng, depth + 1)))
                    .collect(),
            ),
        }
    }
}

/// Gathers the object keys and short strings of `value`; strings that are JSON themselves
/// (Python frameworks nest JSON in JSON) are walked too.
fn collect(value: &Value, keys: &mut Vec<String>, strings: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                keys.push(key.clone());
                collect(child, keys, strings);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect(item, keys, strings)),
        Value::String(text) => {
            if text.len() <= 64 {
                strings.push(text.clone());
            }
            if (text.starts_with('{') || text.starts_with('['))
                && let Ok(inner) = serde_json::from_str::<Value>(text)
            {
                collect(&inner, keys, strings);
            }
        }
        _ => {}
    }
}

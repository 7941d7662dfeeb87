//! Compact byte-pair-encoding tables for counting tokens of the tiktoken encodings.
//!
//! tiktoken's `CoreBPE` keeps each encoding's tokens three times over in hash maps and vectors of
//! small heap allocations (about 45 MiB resident for `o200k_base`, 23 MiB for `cl100k_base`).
//! Counting needs only "is this byte string a token, and of which rank": here the tokens stay
//! in the static table compiled into the binary (`tables/*.bin`: for each rank from 0, one
//! length byte and the token's bytes, made from tiktoken-rs's own `.tiktoken` files), with a
//! start offset per rank and an open-addressing index of ranks (about 3 MiB on the heap for
//! `o200k_base`). The split into pieces (tiktoken's regular expression) and the merge loop are
//! tiktoken's, so every count is tiktoken's `encode_ordinary(text).len()`; a test checks every
//! token against tiktoken-rs and the counts of a corpus.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::LazyLock;

use fancy_regex::Regex;

/// The `o200k_base` tokens: for each rank, a length byte and the bytes.
static O200K_TABLE: &[u8] = include_bytes!("../tables/o200k_base.bin");
/// The `cl100k_base` tokens, in the same form.
static CL100K_TABLE: &[u8] = include_bytes!("../tables/cl100k_base.bin");

/// tiktoken's piece pattern of `o200k_base` (tiktoken-rs's `O200K_BASE_PAT_STR`).
const O200K_PATTERN: &str = tiktoken_rs::O200K_BASE_PAT_STR;
/// tiktoken's piece pattern of `cl100k_base`.
const CL100K_PATTERN: &str = "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s";

/// The `o200k_base` counter, built on first use.
pub(crate) static O200K: LazyLock<Option<Bpe>> =
    LazyLock::new(|| Bpe::new(O200K_TABLE, O200K_PATTERN));
/// The `cl100k_base` counter, built on first use.
pub(crate) static CL100K: LazyLock<Option<Bpe>> =
    LazyLock::new(|| Bpe::new(CL100K_TABLE, CL100K_PATTERN));

/// Pieces of this many bytes or more are merged with a heap (tiktoken-rs's
/// `_byte_pair_merge_large`), shorter ones by scanning (tiktoken's `_byte_pair_merge`): both
/// make the same merges, the heap in O(n log n) rather than O(n²).
const LARGE_PIECE: usize = 100;

/// The rank of an empty index slot.
const EMPTY: u32 = u32::MAX;

/// One encoding: its tokens, their index and its piece pattern.
#[derive(Debug)]
pub(crate) struct Bpe {
    table: &'static [u8],
    /// Where each rank's bytes start in `table` (after its length byte); one more entry, the
    /// table's end, closes the last token.
    starts: Vec<u32>,
    /// Ranks by hash of their bytes, linear probing; `EMPTY` where free. Its length is a power
    /// of two at least twice the number of tokens.
    index: Vec<u32>,
    regex: Regex,
}

/// FNV-1a of `bytes`.
fn hash(bytes: &[u8]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // Only the low bits select a slot.
    h as usize
}

impl Bpe {
    /// The encoding of `table` split by `pattern`; `None` when the table is malformed or the
    /// pattern does not compile (neither happens with the tables and patterns above: the tests
    /// build both).
    fn new(table: &'static [u8], pattern: &str) -> Option<Self> {
        let mut starts = Vec::new();
        let mut at = 0usize;
        while let Some(&len) = table.get(at) {
            let start = at.checked_add(1)?;
            starts.push(u32::try_from(start).ok()?);
            at = start.checked_add(usize::from(len))?;
        }
        if at != table.len() {
            return None;
        }
        starts.push(u32::try_from(at.checked_add(1)?).ok()?);
        let tokens = starts.len().checked_sub(1)?;
        let size = tokens.checked_mul(2)?.checked_next_power_of_two()?;
        let mask = size.checked_sub(1)?;
        let mut bpe = Self {
            table,
            starts,
            index: vec![EMPTY; size],
            regex: Regex::new(pattern).ok()?,
        };
        for rank in 0..tokens {
            let bytes = bpe.token(rank)?;
            let mut slot = hash(bytes) & mask;
            while bpe.index.get(slot).copied()? != EMPTY {
                slot = slot.wrapping_add(1) & mask;
            }
            *bpe.index.get_mut(slot)? = u32::try_from(rank).ok()?;
        }
        Some(bpe)
    }

    /// The bytes of the token of `rank`.
    fn token(&self, rank: usize) -> Option<&'static [u8]> {
        let start = usize::try_from(*self.starts.get(rank)?).ok()?;
        let next = usize::try_from(*self.starts.get(rank.checked_add(1)?)?).ok()?;
        // The next token's start is one past its length byte, which ends this token.
        self.table.get(start..next.checked_sub(1)?)
    }

    /// The rank of the token whose bytes are `piece`, if it is one.
    fn rank(&self, piece: &[u8]) -> Option<u32> {
        let mask = self.index.len().wrapping_sub(1);
        let mut slot = hash(piece) & mask;
        loop {
            let rank = *self.index.get(slot)?;
            if rank == EMPTY {
                return None;
            }
            if self.token(usize::try_from(rank).ok()?) == Some(piece) {
                return Some(rank);
            }
            slot = slot.wrapping_add(1) & mask;
        }
    }

    /// The tokens of `text` without special tokens: tiktoken's
    /// `encode_ordinary(text).len()`. Should the pattern's matcher give up on a text (its
    /// backtracking limit), the rest of the text counts a token per byte, the most BPE can make
    /// of it, where tiktoken would panic.
    pub(crate) fn count(&self, text: &str) -> usize {
        let mut count = 0usize;
        let mut counted_to = 0usize;
        for found in self.regex.find_iter(text) {
            let Ok(found) = found else {
                return count.saturating_add(text.len().saturating_sub(counted_to));
            };
            counted_to = found.end();
            let piece = found.as_str().as_bytes();
            let tokens = if piece.len() <= 1 || self.rank(piece).is_some() {
                usize::from(!piece.is_empty())
            } else if piece.len() < LARGE_PIECE {
                self.merged_len(piece)
            } else {
                self.merged_len_large(piece)
            };
            count = count.saturating_add(tokens);
        }
        count
    }

    /// The number of tokens tiktoken's byte-pair merge makes of `piece` (two bytes or more):
    /// start from single bytes, and merge the adjacent pair of lowest rank while one is a token.
    fn merged_len(&self, piece: &[u8]) -> usize {
        let rank_of = |from: usize, to: usize| {
            piece
                .get(from..to)
                .and_then(|bytes| self.rank(bytes))
                .unwrap_or(EMPTY)
        };
        // (start, rank of the pair that starts here): tiktoken's `parts`.
        let mut parts: Vec<(usize, u32)> = (0..piece.len())
            .map(|i| (i, rank_of(i, i.saturating_add(2))))
            .collect();
        if let Some(last) = parts.last_mut() {
            last.1 = EMPTY;
        }
        parts.push((piece.len(), EMPTY));
        // The rank of the pair that would start at part `i` once part `i + 1` is gone.
        let pair_rank = |parts: &[(usize, u32)], i: usize| match (
            parts.get(i),
            i.checked_add(3).and_then(|j| parts.get(j)),
        ) {
            (Some(&(from, _)), Some(&(to, _))) => rank_of(from, to),
            _ => EMPTY,
        };
        loop {
            let mut lowest: Option<(u32, usize)> = None;
            for (i, &(_, rank)) in parts.iter().enumerate() {
                if rank != EMPTY && lowest.is_none_or(|(best, _)| rank < best) {
                    lowest = Some((rank, i));
                }
            }
            let Some((_, i)) = lowest else {
                break;
            };
            if let Some(before) = i.checked_sub(1) {
                let rank = pair_rank(&parts, before);
                if let Some(part) = parts.get_mut(before) {
                    part.1 = rank;
                }
            }
            let rank = pair_rank(&parts, i);
            if let Some(part) = parts.get_mut(i) {
                part.1 = rank;
            }
            let next = i.saturating_add(1);
            if next < parts.len() {
                parts.remove(next);
            }
        }
        parts.len().saturating_sub(1)
    }

    /// [`merged_len`](Self::merged_len) for long pieces, with tiktoken-rs's heap of candidate
    /// merges (lowest rank first, then leftmost) over a linked list of the current tokens.
    /// Each merge makes one token fewer, so the count is the piece's length less the merges.
    fn merged_len_large(&self, piece: &[u8]) -> usize {
        let rank_of = |from: usize, to: usize| {
            piece
                .get(from..to)
                .and_then(|bytes| self.rank(bytes))
                .unwrap_or(EMPTY)
        };
        // The token starting at byte `i` (when it still starts one) ends at `end`; the one after
        // it ends at `next_end`; `next_rank` is the rank of those two merged; `prev` is where
        // the token before it starts.
        let mut state: Vec<MergeState> = (0..piece.len())
            .map(|i| MergeState {
                prev: i.checked_sub(1),
                end: i.saturating_add(1),
                next_end: i.saturating_add(2),
                next_rank: rank_of(i, i.saturating_add(2)),
            })
            .collect();
        let mut heap: BinaryHeap<Reverse<Merge>> = state
            .iter()
            .enumerate()
            .filter(|(_, s)| s.next_rank != EMPTY)
            .map(|(start, s)| {
                Reverse(Merge {
                    rank: s.next_rank,
                    start,
                })
            })
            .collect();
        // Points the token at `start` to the one ending at `next_end`, and offers their merge.
        let offer = |state: &mut [MergeState],
                     heap: &mut BinaryHeap<Reverse<Merge>>,
                     start: usize,
                     next_end: usize| {
            let rank = if next_end <= piece.len() {
                rank_of(start, next_end)
            } else {
                EMPTY
            };
            if let Some(s) = state.get_mut(start) {
                s.next_end = next_end;
                s.next_rank = rank;
            }
            if rank != EMPTY {
                heap.push(Reverse(Merge { rank, start }));
            }
        };
        let mut merges = 0usize;
        while let Some(Reverse(left)) = heap.pop() {
            let Some(&MergeState {
                prev,
                end: right_start,
                next_end: right_end,
                next_rank,
            }) = state.get(left.start)
            else {
                break;
            };
            if next_rank != left.rank {
                // Stale: that pair changed since it was offered.
                continue;
            }
            let Some(right_next_end) = state.get(right_start).map(|s| s.next_end) else {
                break;
            };
            merges = merges.saturating_add(1);
            if let Some(s) = state.get_mut(left.start) {
                s.end = right_end;
            }
            offer(&mut state, &mut heap, left.start, right_next_end);
            if let Some(s) = state.get_mut(right_end) {
                s.prev = Some(left.start);
            }
            if let Some(prev) = prev {
                offer(&mut state, &mut heap, prev, right_end);
            }
            if let Some(s) = state.get_mut(right_start) {
                s.next_rank = EMPTY;
            }
        }
        piece.len().saturating_sub(merges)
    }
}

/// A token of [`Bpe::merged_len_large`]'s linked list.
#[derive(Debug, Clone, Copy)]
struct MergeState {
    prev: Option<usize>,
    end: usize,
    next_end: usize,
    next_rank: u32,
}

/// A candidate merge: the token starting at `start` with the next, making a token of `rank`.
/// Ordered by rank, then by start, so the heap (of `Reverse`) pops the lowest rank, leftmost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Merge {
    rank: u32,
    start: usize,
}

impl Ord for Merge {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank
            .cmp(&other.rank)
            .then_with(|| self.start.cmp(&other.start))
    }
}

impl PartialOrd for Merge {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Vec<String> {
        let mut texts: Vec<String> = [
            "",
            "a",
            "hello world",
            "   lots   of  spaces \n\n\t tabs  \r\n",
            "日本語のテキストと émojis 🎉🎉 ok",
            "don't I'LL you've WE'RE it's",
            "1234567890123 3.14159 -42",
            "<|endoftext|> special tokens are ordinary text",
            "fn main() { println!(\"{}\", x.get(0..2)?); }",
            "ÀÉÎÕÜ ñ ç ß ø å æ œ",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        texts.push("x".repeat(5_000));
        texts.push("aé".repeat(700));
        texts.push("ab1 ".repeat(300));
        texts.push((0u8..=127).map(char::from).collect());
        texts
    }

    #[test]
    fn every_token_is_tiktokens() {
        for (bpe, tiktoken, tokens) in [
            (&*O200K, tiktoken_rs::o200k_base_singleton(), 199_998usize),
            (&*CL100K, tiktoken_rs::cl100k_base_singleton(), 100_256),
        ] {
            let bpe = bpe.as_ref().unwrap();
            assert_eq!(bpe.starts.len(), tokens + 1);
            for rank in 0..tokens {
                let bytes = bpe.token(rank).unwrap();
                let rank = u32::try_from(rank).unwrap();
                assert_eq!(tiktoken.decode_bytes(&[rank]).unwrap(), bytes);
                assert_eq!(bpe.rank(bytes), Some(rank));
            }
            assert_eq!(bpe.rank(b"not a single token at all, surely"), None);
        }
    }

    #[test]
    fn counts_are_tiktokens() {
        for (bpe, tiktoken) in [
            (&*O200K, tiktoken_rs::o200k_base_singleton()),
            (&*CL100K, tiktoken_rs::cl100k_base_singleton()),
        ] {
            let bpe = bpe.as_ref().unwrap();
            for text in corpus() {
                assert_eq!(
                    bpe.count(&text),
                    tiktoken.encode_ordinary(&text).len(),
                    "{text:?}"
                );
            }
        }
    }

    /// The chat data set of the benchmarks, where it is (`../shared/bench` beside the
    /// workspace, or `$AGENT_MEMORY_BENCH_DATA`): all 10,000 texts count as tiktoken counts
    /// them. Without the file there is nothing to compare, and the test says so.
    #[test]
    fn the_benchmark_data_set_counts_as_tiktoken() {
        let path = std::env::var_os("AGENT_MEMORY_BENCH_DATA")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| {
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../../shared/bench/chat-10000.jsonl")
            });
        let Ok(data) = std::fs::read_to_string(&path) else {
            eprintln!("no data set at {}: nothing compared", path.display());
            return;
        };
        let texts: Vec<String> = data
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                let value: serde_json::Value = serde_json::from_str(line).unwrap();
                value["text"].as_str().unwrap().to_owned()
            })
            .collect();
        assert!(texts.len() >= 1_000);
        for (bpe, tiktoken) in [
            (&*O200K, tiktoken_rs::o200k_base_singleton()),
            (&*CL100K, tiktoken_rs::cl100k_base_singleton()),
        ] {
            let bpe = bpe.as_ref().unwrap();
            for text in &texts {
                assert_eq!(
                    bpe.count(text),
                    tiktoken.encode_ordinary(text).len(),
                    "{text:?}"
                );
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_counts_as_tiktoken(
            text in "(\\PC|[ \t\r\n]|'s|'LL|[0-9]{1,5}|[a-zA-Z]{1,12}){0,80}",
            long in proptest::collection::vec(proptest::sample::select(vec!["a", "é", "1", " ", "ab", "🎉", "\n", "x"]), 0..400),
        ) {
            let long = long.concat();
            for (bpe, tiktoken) in [
                (&*O200K, tiktoken_rs::o200k_base_singleton()),
                (&*CL100K, tiktoken_rs::cl100k_base_singleton()),
            ] {
                let bpe = bpe.as_ref().unwrap();
                proptest::prop_assert_eq!(bpe.count(&text), tiktoken.encode_ordinary(&text).len());
                proptest::prop_assert_eq!(bpe.count(&long), tiktoken.encode_ordinary(&long).len());
            }
        }
    }

    #[test]
    fn a_malformed_table_builds_nothing() {
        static CUT: &[u8] = &[3, b'a', b'b'];
        assert!(Bpe::new(CUT, "a").is_none());
        static GOOD: &[u8] = &[1, b'a', 2, b'a', b'b'];
        assert!(Bpe::new(GOOD, "(").is_none());
        let bpe = Bpe::new(GOOD, "[a-z]+").unwrap();
        assert_eq!(bpe.rank(b"ab"), Some(1));
        assert_eq!(bpe.count("ab a"), 2);
    }
}

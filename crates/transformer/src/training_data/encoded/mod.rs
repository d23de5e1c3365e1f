//! A training corpus as token ids, flat: every pair's source then target ids in one array
//! (16-bit where both vocabularies fit, else 32-bit) and the offsets between them. It lives
//! in memory or is memory-mapped from the cache (`cache.rs`), so that millions of
//! pairs cost their ids and nothing per pair; batches are cut from it one step at a time.

use std::io::Write;

use super::pair::EncodedPair;

/// How wide each stored id is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum IdWidth {
    U16,
    U32,
}

impl IdWidth {
    /// The narrowest width that holds every id of vocabularies this large.
    pub fn for_vocab(largest: usize) -> Self {
        if largest <= 1 << 16 {
            Self::U16
        } else {
            Self::U32
        }
    }

    pub fn bytes(self) -> usize {
        match self {
            Self::U16 => 2,
            Self::U32 => 4,
        }
    }

    /// Appends `ids` in this width, little-endian.
    pub fn put(self, ids: &[u32], out: &mut Vec<u8>) {
        match self {
            Self::U16 => ids
                .iter()
                .for_each(|&id| out.extend_from_slice(&(id as u16).to_le_bytes())),
            Self::U32 => ids
                .iter()
                .for_each(|&id| out.extend_from_slice(&id.to_le_bytes())),
        }
    }
}

/// Bytes that are either owned or a read-only memory map of a cache file.
pub enum Bytes {
    Owned(Vec<u8>),
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Owned(bytes) => bytes,
            Self::Mapped(map) => map,
        }
    }
}

/// The encoded training pairs.
pub struct EncodedCorpus {
    /// Every pair's source ids, then its target ids, pair after pair.
    ids: Bytes,
    width: IdWidth,
    /// `2 * pairs + 1` little-endian u64 id positions: pair `i`'s source is
    /// `offsets[2i]..offsets[2i+1]`, its target `offsets[2i+1]..offsets[2i+2]`.
    offsets: Bytes,
    pairs: usize,
    /// FNV-1a over every id (see [`Fnv1a`]), computed as the corpus was built.
    id_hash: u64,
}

impl EncodedCorpus {
    /// Over stored ids and offsets, checked to agree (a cache file cut short is refused).
    pub fn new(ids: Bytes, width: IdWidth, offsets: Bytes, id_hash: u64) -> anyhow::Result<Self> {
        anyhow::ensure!(
            offsets.len().is_multiple_of(8) && offsets.len() >= 8 && (offsets.len() / 8) % 2 == 1,
            "the offsets are {} bytes, not 2 * pairs + 1 u64s",
            offsets.len()
        );
        let pairs = (offsets.len() / 8 - 1) / 2;
        let corpus = Self {
            ids,
            width,
            offsets,
            pairs,
            id_hash,
        };
        // Offsets that went backwards would make a span whose length wraps round: a read of
        // terabytes, not an error.
        if let Some(at) = (0..2 * pairs).find(|&i| corpus.offset(i + 1) < corpus.offset(i)) {
            anyhow::bail!("the offsets go backwards at pair {}", at / 2);
        }
        // Counted in ids, not bytes: an offset near 2^63 times the width would wrap round to
        // the file's length.
        let last = corpus.offset(2 * pairs);
        anyhow::ensure!(
            corpus.ids.len().is_multiple_of(width.bytes())
                && corpus.ids.len() / width.bytes() == last
                && corpus.offset(0) == 0,
            "the ids are {} bytes but the offsets end at id {last}",
            corpus.ids.len()
        );
        Ok(corpus)
    }

    /// Pairs already encoded, in memory (validation-sized data, tests, the benchmark).
    pub fn from_pairs(pairs: &[EncodedPair], width: IdWidth) -> Self {
        let mut builder = CorpusBuilder::new(Vec::new(), width);
        for pair in pairs {
            builder.push(&pair.src, &pair.tgt);
        }
        let id_hash = builder.id_hash();
        let (ids, offsets) = builder.finish();
        Self::new(Bytes::Owned(ids), width, Bytes::Owned(offsets), id_hash)
            .expect("a builder's own offsets agree with its ids")
    }

    pub fn len(&self) -> usize {
        self.pairs
    }

    pub fn is_empty(&self) -> bool {
        self.pairs == 0
    }

    pub fn width(&self) -> IdWidth {
        self.width
    }

    /// FNV-1a (64-bit) over every pair's source ids, `u32::MAX`, target ids, `u32::MAX`, in
    /// order: what identifies the training data in a checkpoint.
    pub fn id_hash(&self) -> u64 {
        self.id_hash
    }

    fn offset(&self, index: usize) -> usize {
        let at = index * 8;
        u64::from_le_bytes(self.offsets[at..at + 8].try_into().expect("8 bytes")) as usize
    }

    fn span(&self, index: usize) -> (usize, usize) {
        (self.offset(index), self.offset(index + 1))
    }

    /// Pair `i`'s source length and target length, in ids.
    pub fn lens(&self, i: usize) -> (usize, usize) {
        let (a, b, c) = (
            self.offset(2 * i),
            self.offset(2 * i + 1),
            self.offset(2 * i + 2),
        );
        (b - a, c - b)
    }

    /// Appends the ids of pair `i`'s source (`target` false) or target to `out`.
    pub fn extend(&self, i: usize, target: bool, out: &mut Vec<u32>) {
        let (start, end) = self.span(2 * i + usize::from(target));
        match self.width {
            IdWidth::U16 => out.extend(
                self.ids[start * 2..end * 2]
                    .chunks_exact(2)
                    .map(|b| u32::from(u16::from_le_bytes([b[0], b[1]]))),
            ),
            IdWidth::U32 => out.extend(
                self.ids[start * 4..end * 4]
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            ),
        }
    }

    /// Checks that every source id is below `source_vocab` and every target id below
    /// `target_vocab`: the model's tables have no row for a larger one.
    pub fn check_ids(&self, source_vocab: usize, target_vocab: usize) -> anyhow::Result<()> {
        let mut ids = Vec::new();
        for i in 0..self.pairs {
            for (target, vocab) in [(false, source_vocab), (true, target_vocab)] {
                ids.clear();
                self.extend(i, target, &mut ids);
                if let Some(&id) = ids.iter().find(|&&id| id as usize >= vocab) {
                    anyhow::bail!(
                        "pair {i}'s {} holds id {id}, past its vocabulary of {vocab}",
                        if target { "target" } else { "source" }
                    );
                }
            }
        }
        Ok(())
    }

    /// Pair `i` as owned ids.
    pub fn pair(&self, i: usize) -> EncodedPair {
        let (mut src, mut tgt) = (Vec::new(), Vec::new());
        self.extend(i, false, &mut src);
        self.extend(i, true, &mut tgt);
        EncodedPair { src, tgt }
    }

    /// Every id, in order (sources and targets), for counting.
    pub fn all_ids(&self) -> impl Iterator<Item = u32> + '_ {
        let width = self.width.bytes();
        self.ids.chunks_exact(width).map(move |b| match width {
            2 => u32::from(u16::from_le_bytes([b[0], b[1]])),
            _ => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        })
    }
}

/// Writes pairs' ids and offsets as they come, to a file (the cache) or memory.
pub struct CorpusBuilder<W: Write> {
    ids: W,
    width: IdWidth,
    offsets: Vec<u8>,
    position: u64,
    buffer: Vec<u8>,
    hash: Fnv1a,
}

impl<W: Write> CorpusBuilder<W> {
    pub fn new(ids: W, width: IdWidth) -> Self {
        Self {
            ids,
            width,
            offsets: 0u64.to_le_bytes().to_vec(),
            position: 0,
            buffer: Vec::new(),
            hash: Fnv1a::new(),
        }
    }

    /// Adds one pair (for in-memory building).
    pub fn push(&mut self, src: &[u32], tgt: &[u32]) {
        self.buffer.clear();
        self.width.put(src, &mut self.buffer);
        self.width.put(tgt, &mut self.buffer);
        let buffer = std::mem::take(&mut self.buffer);
        self.push_encoded(&buffer, &[(src.len() as u32, tgt.len() as u32)])
            .expect("writing to memory cannot fail");
        self.buffer = buffer;
    }

    /// Adds pairs already in this width: their ids back to back and each pair's lengths.
    pub fn push_encoded(&mut self, ids: &[u8], lens: &[(u32, u32)]) -> std::io::Result<()> {
        self.ids.write_all(ids)?;
        let mut values = ids.chunks_exact(self.width.bytes()).map(|b| match b.len() {
            2 => u32::from(u16::from_le_bytes([b[0], b[1]])),
            _ => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        });
        for &(src, tgt) in lens {
            for side in [src, tgt] {
                for _ in 0..side {
                    self.hash.feed(values.next().unwrap_or(u32::MAX));
                }
                self.hash.feed(u32::MAX);
            }
        }
        for &(src, tgt) in lens {
            self.position += u64::from(src);
            self.offsets.extend_from_slice(&self.position.to_le_bytes());
            self.position += u64::from(tgt);
            self.offsets.extend_from_slice(&self.position.to_le_bytes());
        }
        Ok(())
    }

    /// The data fingerprint of the pairs so far (see [`EncodedCorpus::id_hash`]).
    pub fn id_hash(&self) -> u64 {
        self.hash.finish()
    }

    /// The ids' writer and the offsets.
    pub fn finish(self) -> (W, Vec<u8>) {
        (self.ids, self.offsets)
    }
}

/// FNV-1a (64-bit) over 32-bit words, little-endian: the data fingerprint's hash, and the
/// weight checksum the ranks of a distributed run compare.
pub struct Fnv1a(u64);

impl Fnv1a {
    pub fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    pub fn feed(&mut self, word: u32) {
        for byte in word.to_le_bytes() {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    pub fn finish(&self) -> u64 {
        self.0
    }
}

impl Default for Fnv1a {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests;

//! Stdin read line by line for the commands that take one input per line (`translate`,
//! `generate`): in batches of the lines already waiting, so that a line typed at a terminal is
//! answered at once, and a line that is not UTF-8, or longer than [`MOST_LINE_BYTES`], ends
//! the stream after the ones before it.

use std::io::{BufRead, BufReader, Read, Stdin};

use anyhow::Context;

/// The longest line read: 16 MiB, a book's worth of text; past it the input is not lines
/// (`/dev/zero`, a binary file), and reading on would only run out of memory.
pub const MOST_LINE_BYTES: u64 = 16 << 20;

/// Stdin as UTF-8 lines (a leading byte-order mark dropped).
pub struct StdinLines {
    reader: BufReader<Stdin>,
    read: usize,
    /// What was done to the lines before a bad one ("translated"), for its error.
    done: &'static str,
}

/// Lines read together, numbered from `first_line`, and what stopped the batch.
pub struct Batch {
    pub first_line: usize,
    pub lines: Vec<String>,
    pub end: BatchEnd,
}

pub enum BatchEnd {
    /// The batch is full, or no more input has arrived yet.
    More,
    /// Stdin is at its end.
    Input,
    /// The next line cannot be read (not UTF-8, or a read error).
    Error(anyhow::Error),
}

impl StdinLines {
    pub fn new(done: &'static str) -> Self {
        Self {
            // Large reads take a whole redirected file's lines at once; from a terminal or a
            // slow pipe a read returns what has arrived, often one line.
            reader: BufReader::with_capacity(1 << 16, std::io::stdin()),
            read: 0,
            done,
        }
    }

    /// Up to `size` lines: those already buffered after the first, so that the batch never
    /// waits for input that has not been typed yet.
    pub fn next_batch(&mut self, size: usize) -> anyhow::Result<Batch> {
        let first_line = self.read + 1;
        let mut lines = Vec::with_capacity(size);
        let end = loop {
            match self.next_line() {
                Ok(Some(line)) => lines.push(line),
                Ok(None) => break BatchEnd::Input,
                Err(e) => break BatchEnd::Error(e),
            }
            if lines.len() == size || self.reader.buffer().is_empty() {
                break BatchEnd::More;
            }
        };
        Ok(Batch {
            first_line,
            lines,
            end,
        })
    }

    fn next_line(&mut self) -> anyhow::Result<Option<String>> {
        let mut bytes = Vec::new();
        if (&mut self.reader)
            .take(MOST_LINE_BYTES + 1)
            .read_until(b'\n', &mut bytes)
            .context("cannot read stdin")?
            == 0
        {
            return Ok(None);
        }
        self.read += 1;
        // What became of the lines before a bad one, for its error.
        let before = match self.read {
            1 => format!("no line was {}", self.done),
            _ => format!("the lines before it were {}", self.done),
        };
        if bytes.len() as u64 > MOST_LINE_BYTES && !bytes.ends_with(b"\n") {
            anyhow::bail!(
                "stdin line {} is longer than {MOST_LINE_BYTES} bytes, the most read as one \
                 line; {before}; break the input into lines",
                self.read,
            );
        }
        let text = String::from_utf8(bytes).map_err(|_| {
            anyhow::anyhow!(
                "stdin line {} is not valid UTF-8; {before}; convert the input to UTF-8 \
                 (iconv -t UTF-8)",
                self.read,
            )
        })?;
        let text = text.trim_end_matches(['\n', '\r']);
        let text = if self.read == 1 {
            text.trim_start_matches('\u{feff}')
        } else {
            text
        };
        Ok(Some(text.to_string()))
    }
}

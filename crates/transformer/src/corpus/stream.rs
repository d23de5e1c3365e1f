//! Reading a corpus as a stream of blocks of lines, cleaned on every core: one thread per file
//! reads (and decompresses) blocks of lines while the others clean them, and the caller's
//! work on each block (counting words, encoding) runs in the same parallel pass. Memory stays
//! a few blocks whatever the corpus's size; errors name the file and line, found on the one
//! read.

use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;

use anyhow::bail;
use rayon::prelude::*;

use super::files::{open, read_error, ReadCounter};
use super::sentence::{is_placeholder, normalize_sentence, CleaningReport, SentencePair};
use crate::config::{BuiltinCorpus, CorpusSource};

/// Lines a block holds: large enough that a block is worth a task, small enough that a few in
/// flight stay a few megabytes.
const BLOCK_LINES: usize = 16_384;

/// Blocks cleaned together: several per core, so that a slow block does not idle the rest.
fn blocks_per_round() -> usize {
    4 * rayon::current_num_threads().max(1)
}

/// The byte-order mark some editors put at the start of a UTF-8 file.
const BYTE_ORDER_MARK: char = '\u{feff}';

/// The tutorial's toy pairs, built in for the built-in config (`CorpusSource::Builtin`).
const TOY_PAIRS: &str = include_str!("../../../../data/toy.tsv");

/// Whole lines of one file: their bytes (each line with its `\n`, the last maybe without)
/// and the 1-based number of the first.
struct Block {
    bytes: Vec<u8>,
    first_line: usize,
    lines: usize,
}

/// A thread that reads `path` in blocks of [`BLOCK_LINES`] lines; it stops when the receiver
/// is dropped (the caller found an error) or at the end of the file.
fn spawn_reader(
    path: &Path,
    counter: &Arc<ReadCounter>,
) -> anyhow::Result<Receiver<anyhow::Result<Block>>> {
    let mut reader = open(path, counter)?;
    let name = path.to_path_buf();
    let (send, receive) = sync_channel(4);
    std::thread::spawn(move || {
        let mut first_line = 1;
        loop {
            let mut block = Block {
                bytes: Vec::with_capacity(BLOCK_LINES * 160),
                first_line,
                lines: 0,
            };
            let mut failed = None;
            while block.lines < BLOCK_LINES {
                match reader.read_until(b'\n', &mut block.bytes) {
                    Ok(0) => break,
                    Ok(_) => block.lines += 1,
                    Err(e) => {
                        failed = Some(read_error(&name, e));
                        break;
                    }
                }
            }
            first_line += block.lines;
            let done = block.lines < BLOCK_LINES || failed.is_some();
            let sent = match failed {
                Some(e) => send.send(Err(e)),
                None if block.lines > 0 => send.send(Ok(block)),
                None => Ok(()),
            };
            if done || sent.is_err() {
                return;
            }
        }
    });
    Ok(receive)
}

/// The lines of a block as text, without their `\n` / `\r\n` endings (and the first line of
/// a file without a byte-order mark); a line that is not UTF-8 is named.
fn block_lines<'a>(block: &'a Block, path: &str) -> anyhow::Result<Vec<&'a str>> {
    let bytes = block
        .bytes
        .strip_suffix(b"\n")
        .unwrap_or(block.bytes.as_slice());
    let mut lines = Vec::with_capacity(block.lines);
    for (index, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Ok(mut text) = std::str::from_utf8(line) else {
            bail!(
                "{path} line {} is not valid UTF-8; convert the file to UTF-8",
                block.first_line + index
            );
        };
        if block.first_line + index == 1 {
            text = text.strip_prefix(BYTE_ORDER_MARK).unwrap_or(text);
        }
        lines.push(text);
    }
    Ok(lines)
}

/// `source<TAB>target` lines -> raw pairs; blank lines are skipped, a line without exactly one
/// tab is an error naming it (a third column would otherwise be glued into the target).
fn tsv_pairs<'a>(
    lines: &[&'a str],
    first_line: usize,
    name: &str,
) -> anyhow::Result<Vec<(&'a str, &'a str)>> {
    let mut pairs = Vec::with_capacity(lines.len());
    for (index, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut columns = line.split('\t');
        let (Some(src), Some(tgt), None) = (columns.next(), columns.next(), columns.next()) else {
            let count = line.split('\t').count();
            let (found, fix) = match count {
                1 => (
                    "no tab".to_string(),
                    "separate the two sentences with one tab",
                ),
                n => (
                    format!("{n} columns"),
                    "keep the first two columns (cut -f1,2) or remove tabs inside sentences",
                ),
            };
            bail!(
                "{name} line {}: expected `source<TAB>target`, found {found}; {fix}",
                first_line + index
            );
        };
        pairs.push((src, tgt));
    }
    Ok(pairs)
}

/// Raw pairs -> cleaned pairs and what cleaning did.
fn clean(raw: Vec<(&str, &str)>, has_source: bool) -> (Vec<SentencePair>, CleaningReport) {
    let mut report = CleaningReport {
        read: raw.len(),
        ..CleaningReport::default()
    };
    let mut pairs = Vec::with_capacity(raw.len());
    for (src, tgt) in raw {
        let (src, tgt) = (normalize_sentence(src), normalize_sentence(tgt));
        if (has_source && src.is_empty()) || tgt.is_empty() {
            report.empty += 1;
        } else if (has_source && is_placeholder(&src)) || is_placeholder(&tgt) {
            report.placeholder += 1;
        } else {
            pairs.push(SentencePair { src, tgt });
        }
    }
    report.kept = pairs.len();
    (pairs, report)
}

/// One unit of work: a block of each file the corpus is read from.
enum Work {
    Tsv(Block),
    Parallel(Block, Block),
    Text(Block),
}

/// Reads `source` once, in blocks: each block's lines are cleaned and handed to `map` on the
/// worker threads, and `map`'s results reach `sink` in corpus order. Returns what cleaning
/// did over the whole corpus. Stops at the first error, naming its file and line.
pub fn stream_corpus<T: Send>(
    source: &CorpusSource,
    counter: &Arc<ReadCounter>,
    map: impl Fn(Vec<SentencePair>) -> anyhow::Result<T> + Sync,
    mut sink: impl FnMut(T) -> anyhow::Result<()>,
) -> anyhow::Result<CleaningReport> {
    let has_source = !source.is_target_only();
    let name = source.to_string();
    let process = |work: Work| -> anyhow::Result<(T, CleaningReport)> {
        let (pairs, report) = match &work {
            Work::Tsv(block) => {
                let lines = block_lines(block, &name)?;
                clean(tsv_pairs(&lines, block.first_line, &name)?, true)
            }
            Work::Parallel(src, tgt) => {
                let (src_name, tgt_name) = match source {
                    CorpusSource::Parallel { src, tgt } => {
                        (src.display().to_string(), tgt.display().to_string())
                    }
                    _ => unreachable!("parallel work comes from a parallel corpus"),
                };
                let src_lines = block_lines(src, &src_name)?;
                let tgt_lines = block_lines(tgt, &tgt_name)?;
                clean(src_lines.into_iter().zip(tgt_lines).collect(), true)
            }
            Work::Text(block) => {
                let lines = block_lines(block, &name)?;
                clean(
                    lines.into_iter().map(|line| ("", line)).collect(),
                    has_source,
                )
            }
        };
        Ok((map(pairs)?, report))
    };
    let mut report = CleaningReport::default();
    let mut run_round = |round: Vec<Work>| -> anyhow::Result<()> {
        let results: Vec<anyhow::Result<(T, CleaningReport)>> =
            round.into_par_iter().map(process).collect();
        // In corpus order, so that the error named is the first in the file.
        for result in results {
            let (out, part) = result?;
            report.add(&part);
            sink(out)?;
        }
        Ok(())
    };
    match source {
        CorpusSource::Builtin {
            builtin: BuiltinCorpus::Toy,
        } => {
            let bytes = TOY_PAIRS.as_bytes().to_vec();
            let lines = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
            run_round(vec![Work::Tsv(Block {
                bytes,
                first_line: 1,
                lines,
            })])?;
        }
        CorpusSource::Tsv(path) | CorpusSource::Text { text: path } => {
            let blocks = spawn_reader(path, counter)?;
            let text = matches!(source, CorpusSource::Text { .. });
            let mut round = Vec::new();
            for block in blocks {
                let block = block?;
                round.push(if text {
                    Work::Text(block)
                } else {
                    Work::Tsv(block)
                });
                if round.len() == blocks_per_round() {
                    run_round(std::mem::take(&mut round))?;
                }
            }
            run_round(round)?;
        }
        CorpusSource::Parallel { src, tgt } => {
            let (src_blocks, tgt_blocks) =
                (spawn_reader(src, counter)?, spawn_reader(tgt, counter)?);
            let (mut src_lines, mut tgt_lines) = (0, 0);
            let mut round = Vec::new();
            let mut src_blocks = src_blocks.into_iter();
            let mut tgt_blocks = tgt_blocks.into_iter();
            loop {
                let (a, b) = (
                    src_blocks.next().transpose()?,
                    tgt_blocks.next().transpose()?,
                );
                let (a, b) = match (a, b) {
                    (None, None) => break,
                    (a, b) => (a, b),
                };
                src_lines += a.as_ref().map_or(0, |b| b.lines);
                tgt_lines += b.as_ref().map_or(0, |b| b.lines);
                match (a, b) {
                    (Some(a), Some(b)) if a.lines == b.lines => round.push(Work::Parallel(a, b)),
                    _ => {
                        // Misaligned: count the rest of both (one read), then name both.
                        for block in src_blocks.by_ref() {
                            src_lines += block?.lines;
                        }
                        for block in tgt_blocks.by_ref() {
                            tgt_lines += block?.lines;
                        }
                        bail!(
                            "{} has {src_lines} lines but {} has {tgt_lines}; parallel files \
                             must be aligned line by line",
                            src.display(),
                            tgt.display()
                        );
                    }
                }
                if round.len() == blocks_per_round() {
                    run_round(std::mem::take(&mut round))?;
                }
            }
            run_round(round)?;
        }
    }
    if report.kept == 0 {
        bail!(
            "{source} holds no usable sentence pairs ({report}); point the config at a corpus \
             with `source<TAB>target` lines or aligned src/tgt files"
        );
    }
    Ok(report)
}

/// Reads and cleans a whole corpus into memory (validation and test sets, anything small;
/// training streams through [`stream_corpus`]); fails on misaligned files, malformed TSV
/// lines or invalid UTF-8, naming the file and line, or when nothing is left.
pub fn read_corpus(source: &CorpusSource) -> anyhow::Result<(Vec<SentencePair>, CleaningReport)> {
    let mut pairs = Vec::new();
    let report = stream_corpus(
        source,
        &Arc::new(ReadCounter::default()),
        Ok,
        |mut chunk| {
            pairs.append(&mut chunk);
            Ok(())
        },
    )?;
    Ok((pairs, report))
}

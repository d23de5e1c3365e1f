//! `transformer translate`: a text from the command line, stdin line by line, or a file
//! (.txt, .html, .docx). Texts are cut into sentences (unless --no-sentence-split) and the
//! translations put back between the text's own whitespace. Lines already waiting on stdin
//! are decoded together; a line typed at a terminal is translated as soon as it is complete.
//!
//! Its arguments: the text, stdin or a file, its format, sentence splitting, decoding.

use std::path::Path;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::atomic_file::write_atomic;
use crate::document::{DocumentFormat, DocxLimits, Prepared};
use crate::errors::UsageError;
use crate::flags::{DecodeArgs, DeviceArgs};
use crate::infer::translator::{Batching, ConfiguredTranslator, Translation};
use crate::infer::OnePairLanguages;
use crate::input_text::{read_at_most, read_path, MOST_INPUT_BYTES};
use crate::progress::{SentenceProgress, Verbosity};
use crate::sentences::{SentenceBatch, SentenceSplitter};
use crate::stdin_lines::{BatchEnd, StdinLines};
use crate::stdout::{warn, Results};

#[derive(Debug, Args)]
pub struct TranslateArgs {
    /// Sentence to translate; without it (or with -), stdin is translated line by line
    #[arg(value_name = "TEXT")]
    pub text: Option<String>,
    /// Checkpoint or run directory (a run's best/, else last/); default: the translation run
    /// under runs/ written most recently
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// Print one JSON object per input line, with tokens, ids and log-probabilities (a line of
    /// several sentences: their tokens one after another)
    #[arg(long, conflicts_with_all = ["file", "format"])]
    pub json: bool,
    /// Translate this file into --out: .txt, .html/.htm or .docx (--format names the format
    /// of a file with another extension)
    #[arg(long, value_name = "FILE", requires = "out", conflicts_with = "text")]
    pub file: Option<PathBuf>,
    /// Where the translation is written instead of stdout (atomically, when the command is
    /// done; - is stdout); --file needs it
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// What TEXT, stdin or --file holds: text (line by line), html (one page or fragment:
    /// the text translated, the markup kept) or docx; default: text, or --file's extension
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<FormatArg>,
    #[command(flatten)]
    pub split: SplitArgs,
    #[command(flatten)]
    pub decode: DecodeArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// The formats `translate` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    Text,
    Html,
    Docx,
}

#[derive(Debug, Args)]
pub struct SplitArgs {
    /// Translate each line as one sentence, instead of cutting it into sentences first
    #[arg(long)]
    pub no_sentence_split: bool,
}

pub fn run(args: TranslateArgs) -> anyhow::Result<()> {
    // Usage errors first: loading a model takes seconds.
    let file_format = match &args.file {
        Some(file) => Some(file_format(file, args.format)?),
        None => None,
    };
    if let Some(out) = &args.out {
        let reads_stdin = args.file.is_none() && args.text.as_deref().is_none_or(|t| t == "-");
        let mut inputs = match &args.file {
            Some(file) => vec![("--file", file.as_path())],
            None if reads_stdin => vec![("stdin", Path::new("/dev/stdin"))],
            None => Vec::new(),
        };
        inputs.extend(
            args.decode
                .settings
                .vocab_map
                .as_deref()
                .map(|map| ("--vocab-map", map)),
        );
        crate::output_guard::refuse_output_onto_input(out, &inputs)?;
    }
    if args.format == Some(FormatArg::Docx) && args.file.is_none() {
        return Err(UsageError(
            "--format docx reads a file: give --file IN.docx --out OUT.docx".into(),
        )
        .into());
    }
    let device = crate::device_choice::device_from(&args.device, Verbosity::Normal)?;
    let opened = crate::open_checkpoint::open_translator(
        args.checkpoint.as_deref(),
        &device,
        args.decode.settings.load_options(OnePairLanguages::Refuse),
    )?;
    opened.require_language_pair()?;
    let options = crate::open_checkpoint::decode_settings(&args.decode.settings, &opened, None)?;
    let translator = opened.with(options);
    let loaded = opened.checkpoint();
    if let Some(out) = &args.out {
        crate::output_guard::refuse_output_into_checkpoint(
            out,
            args.checkpoint.as_deref(),
            &loaded.dir,
        )?;
    }
    let splitter = SentenceSplitter::new(
        loaded.config.data.source_lang.as_deref(),
        !args.split.no_sentence_split,
    );
    let output = Output {
        tokenizers: &loaded.tokenizers,
        warned_of_language: std::cell::Cell::new(false),
        json: args.json,
        source_limit: opened.source_limit(),
        unknown_words_listed: std::cell::Cell::new(0),
    };
    let batching = args.decode.batching();
    if let (Some(file), Some(out), Some(format)) = (&args.file, &args.out, file_format) {
        return translate_file(&translator, &splitter, batching, &output, file, out, format);
    }
    let out = args.out.as_deref().unwrap_or(Path::new("-"));
    crate::stdout::into_file(out, |results| match (args.format, args.text.as_deref()) {
        (Some(FormatArg::Html), text) => {
            // Read as --file reads an .html file: in the encoding it declares, else UTF-8
            // where it is, else windows-1252 (as browsers guess), and written back in it.
            let source = match text {
                Some(text) if text != "-" => text.as_bytes().to_vec(),
                _ => read_stdin()?,
            };
            let job = DocumentFormat::Html.parse(source, "stdin", DocxLimits::default())?;
            let prepared = Prepared::new(job, &splitter);
            let translations =
                translate_sentences(&translator, prepared.sentences(), batching, &output, false)?;
            let mut html = prepared.finish(&translations)?;
            while html.last() == Some(&b'\n') {
                html.pop();
            }
            html.push(b'\n');
            results.bytes(&html)
        }
        (_, Some(text)) if text != "-" => translate_lines(
            &translator,
            &splitter,
            &[text.to_string()],
            batching,
            &output,
            results,
        ),
        _ => translate_stdin(&translator, &splitter, batching, &output, results),
    })
}

/// `--file`'s format: `--format`, else its extension.
fn file_format(file: &Path, format: Option<FormatArg>) -> anyhow::Result<DocumentFormat> {
    match format {
        Some(FormatArg::Text) => Ok(DocumentFormat::Text),
        Some(FormatArg::Html) => Ok(DocumentFormat::Html),
        Some(FormatArg::Docx) => Ok(DocumentFormat::Docx),
        None => DocumentFormat::from_path(file).ok_or_else(|| {
            UsageError(format!(
                "--file {}: cannot tell its format from its extension; name it {} or give \
                 --format text, html or docx",
                file.display(),
                DocumentFormat::all_extensions()
            ))
            .into()
        }),
    }
}

/// Translates a whole file into `out`, written atomically, with a progress bar on a
/// terminal.
fn translate_file(
    translator: &ConfiguredTranslator,
    splitter: &SentenceSplitter,
    batching: Batching,
    output: &Output,
    file: &Path,
    out: &Path,
    format: DocumentFormat,
) -> anyhow::Result<()> {
    let name = file.display().to_string();
    let bytes = read_path(file, MOST_INPUT_BYTES)
        .map_err(|e| anyhow::anyhow!("cannot read --file {name}: {e}{}", too_large_advice(&e)))?;
    let job = format.parse(bytes, &name, DocxLimits::default())?;
    let prepared = Prepared::new(job, splitter);
    let translations =
        translate_sentences(translator, prepared.sentences(), batching, output, true)
            .with_context(|| format!("translating {name}"))?;
    let count = prepared.document_sentences();
    let translated = prepared.finish(&translations)?;
    if out.as_os_str() == "-" {
        std::io::Write::write_all(&mut std::io::stdout().lock(), &translated)
            .context("cannot write to stdout")?;
    } else {
        write_atomic(out, &translated)?;
    }
    if count == 0 {
        warn(format_args!(
            "{name} holds no text to translate{}; it was written to {} as it came",
            if format == DocumentFormat::Docx {
                " (a Word file's text is in WordprocessingML's <w:t> elements, and it has none)"
            } else {
                ""
            },
            out.display()
        ));
    }
    let plural = if count == 1 { "" } else { "s" };
    eprintln!(
        "translated {count} sentence{plural} of {name} into {}",
        out.display()
    );
    Ok(())
}

/// Translates `sentences` in batches, warning about each as [`Output::warn`] does, with a
/// progress bar when `progress` is asked for (and stderr is a terminal).
fn translate_sentences(
    translator: &ConfiguredTranslator,
    sentences: &[String],
    batching: Batching,
    output: &Output,
    progress: bool,
) -> anyhow::Result<Vec<String>> {
    let bar = SentenceProgress::new(
        sentences.len(),
        if progress {
            Verbosity::Normal
        } else {
            Verbosity::Quiet
        },
    );
    let translations =
        translator.translate_all_observed(sentences, batching, &mut |n| bar.advance(n))?;
    drop(bar);
    translations
        .into_iter()
        .map(|t| {
            output.warn(&t);
            Ok(t.translation)
        })
        .collect()
}

/// Translates texts whose lines and sentences are cut, and prints each text's translation
/// (or, with --json, each sentence's).
fn translate_lines(
    translator: &ConfiguredTranslator,
    splitter: &SentenceSplitter,
    texts: &[String],
    batching: Batching,
    output: &Output,
    results: &Results,
) -> anyhow::Result<()> {
    let (batch, translations) = translate_texts(translator, splitter, texts, batching)?;
    print_texts(texts, &batch, translations, output, results)
}

/// `texts` cut into sentences, and the sentences' translations.
fn translate_texts(
    translator: &ConfiguredTranslator,
    splitter: &SentenceSplitter,
    texts: &[String],
    batching: Batching,
) -> anyhow::Result<(SentenceBatch, Vec<Translation>)> {
    let batch = SentenceBatch::new(splitter, texts);
    let translations = translator.translate_all(batch.sentences(), batching)?;
    Ok((batch, translations))
}

/// Warns about each sentence and writes each text's translation, or with --json its object:
/// one per text, a text of several sentences with their tokens one after another.
fn print_texts(
    texts: &[String],
    batch: &SentenceBatch,
    translations: Vec<Translation>,
    output: &Output,
    results: &Results,
) -> anyhow::Result<()> {
    for translation in &translations {
        output.warn(translation);
    }
    let mut first = 0;
    for ((i, text), count) in texts.iter().enumerate().zip(batch.sentences_per_text()) {
        let joined = batch.join_with(i, |n| translations[n].translation.as_str());
        if output.json {
            let own = translations[first..first + count].to_vec();
            let translation = Translation::concatenate(text, joined, own);
            results.line(&serde_json::to_string(&translation)?)?;
        } else {
            results.line(&joined)?;
        }
        first += count;
    }
    Ok(())
}

/// Translates stdin in batches of the lines already there, one output line per input line;
/// a line that is not UTF-8 ends the stream after the lines before it are translated.
fn translate_stdin(
    translator: &ConfiguredTranslator,
    splitter: &SentenceSplitter,
    batching: Batching,
    output: &Output,
    results: &Results,
) -> anyhow::Result<()> {
    let mut lines = StdinLines::new("translated");
    loop {
        let batch = lines.next_batch(batching.sentences)?;
        if !batch.lines.is_empty() {
            let last = batch.first_line + batch.lines.len() - 1;
            let (sentences, translations) =
                translate_texts(translator, splitter, &batch.lines, batching)
                    .with_context(|| format!("stdin lines {}-{last}", batch.first_line))?;
            print_texts(&batch.lines, &sentences, translations, output, results)?;
        }
        match batch.end {
            BatchEnd::More => {}
            BatchEnd::Input => return Ok(()),
            BatchEnd::Error(e) => return Err(e),
        }
    }
}

/// What to do about an input too large to read whole.
fn too_large_advice(error: &std::io::Error) -> &'static str {
    if error.kind() == std::io::ErrorKind::FileTooLarge {
        "; split it, or translate it as text, line by line, from stdin"
    } else {
        ""
    }
}

/// All of stdin, as one HTML document's bytes.
fn read_stdin() -> anyhow::Result<Vec<u8>> {
    read_at_most(std::io::stdin().lock(), MOST_INPUT_BYTES)
        .map_err(|e| anyhow::anyhow!("cannot read stdin: {e}{}", too_large_advice(&e)))
}

/// How results are printed and warned about.
struct Output<'a> {
    /// For the warning a multilingual model's source without a target-language token gets,
    /// and whether it was given.
    tokenizers: &'a crate::tokenize::Tokenizers,
    warned_of_language: std::cell::Cell<bool>,
    json: bool,
    /// How much of a source is translated, for the warning about cut sentences.
    source_limit: crate::infer::translator::SourceLimit,
    /// Unknown words warned of so far in this run.
    unknown_words_listed: std::cell::Cell<usize>,
}

/// Most unknown words a run lists on stderr.
const UNKNOWN_WORDS_LISTED: usize = 20;

impl Output<'_> {
    /// Warns about unknown words and cut sentences on stderr.
    fn warn(&self, translation: &Translation) {
        // Once: a file of lines without the token would otherwise say it on every line.
        if !self.warned_of_language.get() {
            if let Some(warning) = self.tokenizers.missing_language_token(&translation.source) {
                warn(format_args!("{warning} (said once)"));
                self.warned_of_language.set(true);
            }
        }
        // Each word once a sentence, cut to 40 characters, and at most
        // UNKNOWN_WORDS_LISTED in a run: a pasted blob repeats its pieces thousands of times,
        // and a megabyte without spaces is hundreds of sentences of one unknown word each.
        let mut warned = std::collections::HashSet::new();
        for word in translation
            .unknown_words
            .iter()
            .filter(|word| warned.insert(word.as_str()))
        {
            let listed = self.unknown_words_listed.get();
            self.unknown_words_listed.set(listed + 1);
            if listed < UNKNOWN_WORDS_LISTED {
                warn(format_args!(
                    "unknown source word {:?} is translated as <unk>",
                    crate::errors::truncate_chars(word, 40)
                ));
            } else if listed == UNKNOWN_WORDS_LISTED {
                warn(format_args!(
                    "more unknown source words are translated as <unk>; they are not listed \
                     (translate --json shows each translation's tokens)"
                ));
            }
        }
        if translation.short {
            warn(format_args!(
                "{:?} translated to {:?}, under half the length the model gives such a \
                 source (decode.length_ratio); a sentence may be missing: check it, or cut the \
                 text into sentences",
                crate::errors::truncate_chars(&translation.source, 40),
                crate::errors::truncate_chars(&translation.translation, 40),
            ));
        }
        if let Some(limit) = translation.stopped_at_limit {
            warn(format_args!(
                "{:?} translated to {:?}, which ran into the limit of {limit} tokens before it \
                 ended: its end is missing; raise --max-len (or decode.max_len), or split long \
                 sentences",
                crate::errors::truncate_chars(&translation.source, 40),
                crate::errors::truncate_chars(&translation.translation, 40),
            ));
        }
        if let Some(tokens) = translation.truncated_from {
            warn(format_args!(
                "{:?} has {tokens} tokens or more, more than the model reads; only the first \
                 {} were translated ({}); split long sentences",
                crate::errors::truncate_chars(&translation.source, 40),
                self.source_limit.tokens,
                self.source_limit.reason()
            ));
        }
    }
}

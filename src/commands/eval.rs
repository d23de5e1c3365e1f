//! `transformer eval`: corpus BLEU and chrF of a checkpoint's translations, or of a hypothesis
//! file, exactly as sacreBLEU computes them.
//!
//! Its arguments: the references, and a hypothesis file or a checkpoint and sources to translate.

use std::path::PathBuf;

use clap::{ArgGroup, Args};

use crate::atomic_file::write_atomic;
use crate::errors::UsageError;
use crate::flags::{DecodeArgs, DeviceArgs};
use crate::infer::OnePairLanguages;
use crate::metrics::{
    self, chrf_signature, corpus_bleu, corpus_chrf, read_segments, BleuScore, Case,
};
use crate::progress::{SentenceProgress, Verbosity};
use crate::sentences::{SentenceBatch, SentenceSplitter};
use crate::stdout::{print_line, warn};

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("input").required(true).args(["hyp", "src"])))]
pub struct EvalArgs {
    /// Reference translations, one per line (plain or .gz; - is stdin)
    #[arg(long = "ref", value_name = "FILE")]
    pub reference: PathBuf,
    /// Score this hypothesis file instead of translating (no model needed; - is stdin)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["checkpoint", "src"])]
    pub hyp: Option<PathBuf>,
    /// Checkpoint or run directory to translate --src with; default: the translation run
    /// under runs/ written most recently
    #[arg(long, value_name = "DIR", requires = "src")]
    pub checkpoint: Option<PathBuf>,
    /// Source sentences to translate, one per line, aligned with --ref (- is stdin)
    #[arg(long, value_name = "FILE")]
    pub src: Option<PathBuf>,
    /// Also write the translations here
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print {"bleu": ..., "signature": ..., ...} instead of sacreBLEU's text lines
    #[arg(long)]
    pub json: bool,
    /// Lowercase hypotheses and references for BLEU (sacreBLEU's -lc; chrF keeps the case)
    #[arg(long)]
    pub lowercase: bool,
    /// Cut each --src line into sentences (the checkpoint's data.source_lang rules),
    /// translate them and join them back, for sources with several sentences a line
    /// (Multi30k's lines are one sentence each)
    #[arg(long, requires = "src")]
    pub split_sentences: bool,
    #[command(flatten)]
    pub decode: DecodeArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
}

pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    let from_stdin = [Some(&args.reference), args.hyp.as_ref(), args.src.as_ref()]
        .into_iter()
        .flatten()
        .filter(|path| path.as_os_str() == "-")
        .count();
    if from_stdin > 1 {
        return Err(UsageError(
            "only one of --ref, --hyp and --src can be - (stdin); give the others as files".into(),
        )
        .into());
    }
    if args.hyp.is_some() {
        // Nothing is decoded when the hypotheses are given: a decoding flag would be ignored.
        let settings = &args.decode.settings;
        let decoding = [
            ("--checkpoint", args.checkpoint.is_some()),
            ("--beam", settings.beam.is_some()),
            ("--length-penalty", settings.length_penalty.is_some()),
            ("--max-len", settings.max_len.is_some()),
            ("--compute-type", settings.compute_type.is_some()),
            ("--vocab-map", settings.vocab_map.is_some()),
            ("--source-lang", settings.source_lang.is_some()),
            ("--target-lang", settings.target_lang.is_some()),
        ];
        if let Some((flag, _)) = decoding.iter().find(|(_, given)| *given) {
            return Err(UsageError(format!(
                "{flag} sets how --src is translated; with --hyp nothing is translated: \
                 drop {flag}, or give --src instead of --hyp"
            ))
            .into());
        }
    }
    if let Some(out) = &args.out {
        let inputs = [
            Some(("--ref", args.reference.as_path())),
            args.src.as_deref().map(|src| ("--src", src)),
            args.hyp.as_deref().map(|hyp| ("--hyp", hyp)),
            args.decode
                .settings
                .vocab_map
                .as_deref()
                .map(|map| ("--vocab-map", map)),
        ];
        crate::output_guard::refuse_output_onto_input(
            out,
            &inputs.into_iter().flatten().collect::<Vec<_>>(),
        )?;
    }
    let references = read_segments(&args.reference, "--ref")?;
    let hypotheses = match (&args.hyp, &args.src) {
        (Some(hyp), _) => {
            let lines = read_segments(hyp, "--hyp")?;
            metrics::check_aligned(lines.len(), references.len(), hyp, &args.reference)?;
            lines
        }
        (None, Some(src)) => {
            let sources = read_segments(src, "--src")?;
            metrics::check_aligned(sources.len(), references.len(), src, &args.reference)?;
            translate_all(&args, &sources)?
        }
        // The parser requires one of the two.
        (None, None) => return Err(UsageError("give --hyp FILE or --src FILE".into()).into()),
    };
    if let Some(out) = &args.out {
        let mut text = hypotheses.join("\n");
        text.push('\n');
        write_atomic(out, text.as_bytes())?;
    }
    // As sacreBLEU's -lc: BLEU is lowercased, chrF keeps the case.
    let case = if args.lowercase {
        Case::Lower
    } else {
        Case::Mixed
    };
    let chrf = corpus_chrf(&hypotheses, &references);
    let bleu = corpus_bleu(&case.apply(hypotheses.clone()), &case.apply(references));
    if args.json {
        print_line(&json_report(&bleu, chrf, case, hypotheses.len())?)
    } else {
        print_line(&bleu.format_text(case))?;
        print_line(&format!("chrF2|{} = {chrf:.2}", chrf_signature()))
    }
}

fn translate_all(args: &EvalArgs, sources: &[String]) -> anyhow::Result<Vec<String>> {
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
    // Split, a line's sentences are translated apart and joined; else each line is one
    // sentence, blank lines included, as the corpora are aligned line by line.
    let splitter = SentenceSplitter::new(
        loaded.config.data.source_lang.as_deref(),
        args.split_sentences,
    );
    let batch = args
        .split_sentences
        .then(|| SentenceBatch::new(&splitter, sources));
    let sentences = batch.as_ref().map_or(sources, |b| b.sentences());
    let progress = SentenceProgress::new(sentences.len(), Verbosity::Normal);
    let translations =
        translator.translate_all_observed(sentences, args.decode.batching(), &mut |n| {
            progress.advance(n)
        })?;
    drop(progress);
    let warnings: Vec<String> = sources
        .iter()
        .filter_map(|s| loaded.tokenizers.missing_language_token(s))
        .collect();
    if let Some(warning) = warnings.first() {
        let unmarked = warnings.len();
        warn(format_args!(
            "{unmarked} source lines lack a target-language token: {warning}"
        ));
    }
    warn_of_lost_sentences(&splitter, sources, &translations, args.split_sentences);
    let truncated: Vec<String> = translations
        .iter()
        .enumerate()
        .filter(|(_, t)| t.truncated_from.is_some())
        .map(|(index, _)| (index + 1).to_string())
        .collect();
    let translated: Vec<String> = translations.into_iter().map(|t| t.translation).collect();
    let hypotheses = match &batch {
        Some(batch) => batch.join_all(&translated),
        None => translated,
    };
    if !truncated.is_empty() {
        eprintln!(
            "warning: source {} {} are longer than the model reads ({}); only their \
             beginnings were translated",
            if batch.is_some() {
                "sentences"
            } else {
                "lines"
            },
            truncated.join(", "),
            opened.source_limit().reason()
        );
    }
    Ok(hypotheses)
}

/// Warns where sentences may be missing from the translations: read whole (without
/// --split-sentences), source lines that hold several sentences, and translations marked
/// `short` (under half the length the model gives their source).
fn warn_of_lost_sentences(
    splitter: &SentenceSplitter,
    sources: &[String],
    translations: &[crate::infer::translator::Translation],
    split: bool,
) {
    let short = translations.iter().filter(|t| t.short).count();
    let what = if split { "sentences" } else { "lines" };
    if !split {
        let cutter = SentenceSplitter::new(Some(splitter.language()), true);
        let several = sources
            .iter()
            .filter(|line| cutter.sentences_of_line(line).len() > 1)
            .count();
        if several > 0 {
            warn(format_args!(
                "{several} of {} source lines hold more than one sentence and were each \
                 translated as one ({short} came back under half the length their source \
                 gives): a model trained on sentences may leave some out; give \
                 --split-sentences to translate them one by one",
                sources.len()
            ));
            return;
        }
    }
    if short > 0 {
        warn(format_args!(
            "{short} of {} translated {what} came back under half the length their source \
             gives (decode.length_ratio): check them, a sentence may be missing",
            translations.len()
        ));
    }
}

/// Scores to four decimals: sacreBLEU's text line shows two, and further digits are
/// floating-point noise.
fn rounded(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

fn json_report(
    bleu: &BleuScore,
    chrf: f64,
    case: Case,
    sentences: usize,
) -> anyhow::Result<String> {
    let ratio = bleu.hyp_len as f64 / bleu.ref_len.max(1) as f64;
    let precisions: Vec<f64> = bleu.precisions.iter().map(|&p| rounded(p)).collect();
    Ok(serde_json::to_string(&serde_json::json!({
        "bleu": rounded(bleu.score),
        "signature": BleuScore::signature(case),
        "precisions": precisions,
        "brevity_penalty": rounded(bleu.brevity_penalty),
        "ratio": rounded(ratio),
        "hyp_len": bleu.hyp_len,
        "ref_len": bleu.ref_len,
        "chrf": rounded(chrf),
        "chrf_signature": chrf_signature(),
        "sentences": sentences,
    }))?)
}

#[cfg(test)]
mod tests {
    use super::rounded;

    #[test]
    fn scores_are_rounded_to_four_decimals() {
        assert_eq!(rounded(34.212_345_678), 34.2123);
        assert_eq!(rounded(100.0), 100.0);
    }
}

//! `transformer eval`: corpus BLEU and chrF of a checkpoint's translations, or of a hypothesis
//! file, exactly as sacreBLEU computes them.

use std::path::Path;

use anyhow::Context;

use crate::checkpoint;
use crate::cli::EvalArgs;
use crate::metrics::{
    self, chrf_signature, corpus_bleu, corpus_chrf, read_segments, BleuScore, Case,
};

pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    let references = read_segments(&args.reference)?;
    let hypotheses = match (&args.hyp, &args.checkpoint, &args.src) {
        (Some(hyp), _, _) => {
            let lines = read_segments(hyp)?;
            metrics::check_aligned(lines.len(), references.len(), hyp, &args.reference)?;
            lines
        }
        (None, Some(dir), Some(src)) => {
            let sources = read_segments(src)?;
            metrics::check_aligned(sources.len(), references.len(), src, &args.reference)?;
            translate_all(&args, dir, &sources)?
        }
        _ => anyhow::bail!("give --hyp FILE, or --checkpoint DIR and --src FILE, with --ref FILE"),
    };
    if let Some(out) = &args.out {
        let mut text = hypotheses.join("\n");
        text.push('\n');
        checkpoint::write_atomic(out, text.as_bytes())?;
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
        println!("{}", json_report(&bleu, chrf, case, hypotheses.len())?);
    } else {
        println!("{}", bleu.format_text(case));
        println!("chrF2|{} = {chrf:.2}", chrf_signature());
    }
    Ok(())
}

fn translate_all(args: &EvalArgs, dir: &Path, sources: &[String]) -> anyhow::Result<Vec<String>> {
    let options = super::decode_options(&args.decode)?;
    let device = super::device_from(&args.device)?;
    let loaded = checkpoint::load(dir, &device)?;
    let translator = loaded.translator(&device, options);
    let mut hypotheses = Vec::with_capacity(sources.len());
    let mut truncated = Vec::new();
    for (index, chunk) in sources.chunks(args.decode.batch_size).enumerate() {
        let first = index * args.decode.batch_size + 1;
        let translations = translator.translate_batch(chunk).with_context(|| {
            format!(
                "translating source lines {first}-{}",
                first + chunk.len() - 1
            )
        })?;
        for (offset, translation) in translations.into_iter().enumerate() {
            if translation.truncated_from.is_some() {
                truncated.push((first + offset).to_string());
            }
            hypotheses.push(translation.translation);
        }
    }
    if !truncated.is_empty() {
        eprintln!(
            "warning: source lines {} are longer than the model reads (model.max_len {}); \
             only their beginnings were translated",
            truncated.join(", "),
            loaded.config.model.max_len
        );
    }
    Ok(hypotheses)
}

fn json_report(
    bleu: &BleuScore,
    chrf: f64,
    case: Case,
    sentences: usize,
) -> anyhow::Result<String> {
    let ratio = bleu.hyp_len as f64 / bleu.ref_len.max(1) as f64;
    Ok(serde_json::to_string(&serde_json::json!({
        "bleu": bleu.score,
        "signature": BleuScore::signature(case),
        "precisions": bleu.precisions,
        "brevity_penalty": bleu.brevity_penalty,
        "ratio": ratio,
        "hyp_len": bleu.hyp_len,
        "ref_len": bleu.ref_len,
        "chrf": chrf,
        "chrf_signature": chrf_signature(),
        "sentences": sentences,
    }))?)
}

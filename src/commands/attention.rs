//! `transformer attention`: translate a sentence (or take `--target`), run the pair through
//! the model under teacher forcing, and draw every head's attention.

use std::path::Path;

use anyhow::{bail, Context};
use candle_core::{Device, Tensor};

use super::stdout::print_line;
use super::UsageError;
use crate::checkpoint::Checkpoint;
use crate::cli::AttentionArgs;
use crate::data::batch::with_boundaries;
use crate::data::corpus::normalize_sentence;
use crate::data::vocab::{BOS_ID, EOS_ID, PAD_ID};
use crate::data::TextTokenizer;
use crate::infer::translator::DecodeOptions;
use crate::model::{attention_maps, masks};
use crate::plot::{write_attention_heatmaps, AttentionGrid, HeadMaps};
use crate::progress::Verbosity;

pub fn run(args: AttentionArgs) -> anyhow::Result<()> {
    check_out_path(&args.out)?;
    let device = super::device_from(&args.device, Verbosity::Normal)?;
    let loaded = super::load_translation_model(args.checkpoint.as_deref(), &device)?;
    let layers = loaded.config.model.layers;
    if let Some(&bad) = args.layers.iter().find(|&&l| l > layers) {
        return Err(UsageError(format!(
            "--layers {bad} is not a layer of this model; it has layers 1 to {layers}"
        ))
        .into());
    }
    let text = normalize_sentence(&args.text);
    let src = loaded.tokenizers.src.encode(&text)?.ids;
    if src.is_empty() {
        bail!("the sentence is empty; give the source sentence whose attention to draw");
    }
    let target = match &args.target {
        Some(target) => {
            let mut ids = loaded
                .tokenizers
                .tgt
                .encode(&normalize_sentence(target))?
                .ids;
            ids.push(EOS_ID);
            ids
        }
        None => {
            let translator = super::translator(&loaded, &device, DecodeOptions::default())?;
            let translation = translator.translate(&text)?;
            print_line(&translation.translation)?;
            translation.ids
        }
    };
    let src = with_boundaries(&src);
    // The decoder reads <s> y1 .. y(n-1) and predicts y1 .. yn (yn is usually </s>).
    let mut tgt_in = vec![BOS_ID];
    tgt_in.extend(&target[..target.len().saturating_sub(1)]);
    let max_len = loaded.config.model.max_len;
    if src.len() > max_len || tgt_in.len() > max_len {
        bail!(
            "the sentence pair has {} source and {} target positions but model.max_len is \
             {max_len}; draw a shorter sentence",
            src.len(),
            tgt_in.len()
        );
    }
    let grids = grids(&loaded, &src, &tgt_in, &args.layers, &device)?;
    write_attention_heatmaps(&grids, &args.out)
        .with_context(|| format!("drawing the attention of {text:?}"))?;
    eprintln!(
        "wrote {}: {} layer(s) x {} heads of encoder, decoder and encoder-decoder attention",
        args.out.display(),
        grids[0].layers.len(),
        loaded.config.model.heads
    );
    Ok(())
}

/// Fails early, before any model work, on an output path the picture cannot be written to.
fn check_out_path(out: &Path) -> anyhow::Result<()> {
    if !out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"))
    {
        return Err(UsageError(format!("--out {} must name a .png file", out.display())).into());
    }
    match out.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => bail!(
            "--out {}: directory {} does not exist; create it or pick another path",
            out.display(),
            dir.display()
        ),
        _ => Ok(()),
    }
}

/// The three kinds of attention of the pair (`src`, decoder input `tgt_in`), for `layers`
/// (1-based; all when empty).
fn grids(
    loaded: &Checkpoint,
    src: &[u32],
    tgt_in: &[u32],
    layers: &[usize],
    device: &Device,
) -> anyhow::Result<Vec<AttentionGrid>> {
    let src_ids = Tensor::new(src, device)?.unsqueeze(0)?;
    let tgt_ids = Tensor::new(tgt_in, device)?.unsqueeze(0)?;
    let src_mask = masks::padding_mask(&src_ids, PAD_ID)?;
    let tgt_mask = masks::target_mask(&tgt_ids, PAD_ID)?;
    let maps = attention_maps(
        loaded.translation()?,
        &src_ids,
        &tgt_ids,
        &src_mask,
        &tgt_mask,
    )?;
    let src_tokens = tokens(&loaded.tokenizers.src, src);
    let tgt_tokens = tokens(&loaded.tokenizers.tgt, tgt_in);
    let pick = |per_layer: &[Tensor]| -> anyhow::Result<Vec<(usize, HeadMaps)>> {
        per_layer
            .iter()
            .enumerate()
            .map(|(i, map)| (i + 1, map))
            .filter(|(layer, _)| layers.is_empty() || layers.contains(layer))
            .map(|(layer, map)| Ok((layer, map.to_vec3::<f32>()?)))
            .collect()
    };
    Ok(vec![
        AttentionGrid {
            title: "Encoder self-attention".into(),
            queries: src_tokens.clone(),
            keys: src_tokens.clone(),
            layers: pick(&maps.encoder)?,
        },
        AttentionGrid {
            title: "Decoder self-attention (masked: no position sees later ones)".into(),
            queries: tgt_tokens.clone(),
            keys: tgt_tokens.clone(),
            layers: pick(&maps.decoder_self)?,
        },
        AttentionGrid {
            title: "Encoder-decoder attention (decoder positions over source tokens)".into(),
            queries: tgt_tokens,
            keys: src_tokens,
            layers: pick(&maps.cross)?,
        },
    ])
}

fn tokens(tokenizer: &TextTokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter().map(|&id| tokenizer.token(id)).collect()
}

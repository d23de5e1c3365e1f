//! What a model's weights (and, to train, its activations) take, from its config alone,
//! checked against the device's memory before anything is allocated: an absurd size in a
//! config (`d_model = 1000000000`) is an error naming the key and what it would need, not an
//! allocation that aborts the process.

use candle_core::Device;

use crate::config::{ModelConfig, VocabSizes};

/// How many encoder and decoder layers `cfg` has.
fn layer_counts(cfg: &ModelConfig) -> (f64, f64) {
    let encoder = if cfg.arch.reads_source() {
        cfg.layers
    } else {
        0
    };
    let decoder = cfg.decoder_layers.unwrap_or(cfg.layers);
    (encoder as f64, decoder as f64)
}

/// The float32 activations one training batch of `tokens` tokens (a side) keeps for the
/// backward pass, at least, with the key that sizes it: per token and layer, about ten
/// d_model-wide vectors (the sublayers' inputs, norms, Q, K, V and outputs; sixteen in a
/// decoder layer, which attends twice) and three d_ff-wide (the feed-forward's hidden
/// layer, its activation and dropout); the generator's logits, their log-softmax and its
/// gradient over the target vocabulary. The attention weights (heads x sentence length a
/// token) come on top: left out, so that a config is refused only when it cannot fit.
fn activations(cfg: &ModelConfig, vocab: VocabSizes, tokens: usize) -> (String, f64) {
    let (d, ff) = (cfg.d_model as f64, cfg.d_ff as f64);
    let (encoder, decoder) = layer_counts(cfg);
    let layers = encoder * (10.0 * d + 3.0 * ff) + decoder * (16.0 * d + 3.0 * ff);
    let generator = 3.0 * vocab.tgt as f64;
    (
        format!("training.max_tokens = {tokens} (the activations of one batch)"),
        4.0 * tokens as f64 * (layers + generator),
    )
}

/// The parameters of each part of the model `cfg` describes over `vocab`, with the key that
/// sizes it, largest first.
fn parameters(cfg: &ModelConfig, vocab: VocabSizes) -> Vec<(String, f64)> {
    let (d, ff) = (cfg.d_model as f64, cfg.d_ff as f64);
    let (encoder, decoder) = layer_counts(cfg);
    // Attention's four d x d projections (twice in a decoder layer), the feed-forward's two
    // d x d_ff matrices.
    let layer = |attentions: f64| attentions * 4.0 * d * d + 2.0 * d * ff;
    let mut parts = vec![
        (
            format!(
                "model.d_model = {}, model.d_ff = {} ({} encoder and {} decoder layers)",
                cfg.d_model, cfg.d_ff, encoder, decoder
            ),
            encoder * layer(1.0) + decoder * layer(2.0),
        ),
        (
            format!("model.max_len = {} (the position table)", cfg.max_len),
            cfg.max_len as f64 * d,
        ),
        (
            format!(
                "vocabularies of {} and {} (the embeddings and the generator)",
                vocab.src, vocab.tgt
            ),
            (vocab.src as f64 + 2.0 * vocab.tgt as f64) * d,
        ),
    ];
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    parts
}

/// `bytes` for people: "1.2 GB", "36 TB".
fn shown(bytes: f64) -> String {
    let units = ["B", "KB", "MB", "GB", "TB", "PB", "EB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < units.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit + 1 == units.len() && value >= 1000.0 {
        return format!("{bytes:.1e} B");
    }
    format!("{value:.1} {}", units[unit])
}

/// Refuses a model whose weights could not fit `device`'s memory even in int8 (one byte a
/// weight): the error names the largest part and the key that sizes it.
pub fn refuse_if_too_large(
    cfg: &ModelConfig,
    vocab: VocabSizes,
    device: &Device,
) -> Result<(), String> {
    refuse_beyond(cfg, vocab, device, 1.0, "for its weights in int8")
}

/// Refuses a model `device` could not train on batches of `tokens` tokens: float32
/// weights, their gradients and Adam's two moments (16 bytes a weight), and one batch's
/// activations (none counted for `tokens` 0).
pub fn refuse_if_too_large_to_train(
    cfg: &ModelConfig,
    vocab: VocabSizes,
    tokens: usize,
    device: &Device,
) -> Result<(), String> {
    let Some(memory) = crate::device::memory_bytes(device) else {
        return Ok(());
    };
    let mut parts: Vec<(String, f64)> = parameters(cfg, vocab)
        .into_iter()
        .map(|(key, count)| (key, 16.0 * count))
        .collect();
    if tokens > 0 {
        parts.push(activations(cfg, vocab, tokens));
    }
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    refuse_parts(
        &parts,
        memory,
        "to train (float32 weights, gradients, Adam's two moments and a batch's activations)",
        "all of it",
    )
}

/// Refuses a model whose weights at `bytes_per_weight` exceed `device`'s memory.
fn refuse_beyond(
    cfg: &ModelConfig,
    vocab: VocabSizes,
    device: &Device,
    bytes_per_weight: f64,
    purpose: &str,
) -> Result<(), String> {
    let Some(memory) = crate::device::memory_bytes(device) else {
        return Ok(());
    };
    let parts: Vec<(String, f64)> = parameters(cfg, vocab)
        .into_iter()
        .map(|(key, count)| (key, bytes_per_weight * count))
        .collect();
    refuse_parts(&parts, memory, purpose, "the whole model")
}

/// Refuses `parts` (bytes, largest first) that together (`whole`) exceed `memory`, naming
/// the largest.
fn refuse_parts(
    parts: &[(String, f64)],
    memory: u64,
    purpose: &str,
    whole: &str,
) -> Result<(), String> {
    let total: f64 = parts.iter().map(|(_, bytes)| bytes).sum();
    if total <= memory as f64 {
        return Ok(());
    }
    let (largest, bytes) = &parts[0];
    Err(format!(
        "{largest} needs about {} {purpose}, and {whole} {}; this machine has {}: make it \
         smaller",
        shown(*bytes),
        shown(total),
        shown(memory as f64)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_part_is_named_with_its_key() {
        let cfg = ModelConfig {
            d_model: 1_000_000_000,
            heads: 8,
            ..ModelConfig::default()
        };
        let vocab = VocabSizes { src: 100, tgt: 100 };
        let parts = parameters(&cfg, vocab);
        assert!(
            parts[0].0.starts_with("model.d_model = 1000000000"),
            "{parts:?}"
        );
        let err = refuse_if_too_large(&cfg, vocab, &Device::Cpu).unwrap_err();
        assert!(err.contains("model.d_model = 1000000000"), "{err}");
        // Six layers each side: 6 x 4 d^2 + 6 x 8 d^2 weights of a byte each (int8).
        assert!(err.contains("the whole model 72.0 EB"), "{err}");
        let err = refuse_if_too_large_to_train(&cfg, vocab, 4096, &Device::Cpu).unwrap_err();
        assert!(err.contains("to train"), "{err}");
        let long = ModelConfig {
            max_len: 100_000_000_000,
            ..ModelConfig::default()
        };
        let err = refuse_if_too_large(&long, vocab, &Device::Cpu).unwrap_err();
        assert!(err.starts_with("model.max_len = 100000000000"), "{err}");
    }

    #[test]
    fn a_batch_whose_logits_could_not_fit_is_named_by_its_key() {
        // The base model's weights fit; a million tokens over a million-word vocabulary
        // would need 4 bytes x 10^12 logits, three times over.
        let vocab = VocabSizes {
            src: 1_000_000,
            tgt: 1_000_000,
        };
        let err =
            refuse_if_too_large_to_train(&ModelConfig::default(), vocab, 1_000_000, &Device::Cpu)
                .unwrap_err();
        assert!(
            err.starts_with(
                "training.max_tokens = 1000000 (the activations of one batch) needs about 12.6 TB"
            ),
            "{err}"
        );
        // The base model's usual batch (4096 tokens, 37000 words): 4.3 GB.
        let (_, bytes) = activations(
            &ModelConfig::default(),
            VocabSizes {
                src: 37000,
                tgt: 37000,
            },
            4096,
        );
        assert!((4.2e9..4.4e9).contains(&bytes), "{bytes}");
    }

    #[test]
    fn the_base_model_fits() {
        let vocab = VocabSizes {
            src: 37000,
            tgt: 37000,
        };
        refuse_if_too_large(&ModelConfig::default(), vocab, &Device::Cpu).unwrap();
        assert_eq!(shown(36e9), "36.0 GB");
    }
}

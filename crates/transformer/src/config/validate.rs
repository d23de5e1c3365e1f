//! The rules serde cannot check: sizes above zero, probabilities in range, `d_model`
//! divisible by `heads` and the like. Each failure names the dotted key and the rule.

use super::*;

/// A broken rule, when there is one: the offending key and the rule it breaks.
type Check = Result<(), (String, String)>;

impl Config {
    /// Checks the rules serde cannot: returns the offending key and the rule it breaks.
    pub(super) fn validate(&self) -> Check {
        let (m, d, t) = (&self.model, &self.data, &self.training);
        // A config that breaks several rules is told about the first one checked, so the
        // order is part of the behaviour; it interleaves the sections, which is why some
        // sections are checked in two parts.
        model_sizes(m)?;
        architecture_fits_corpus(m, d)?;
        model_dropout(m)?;
        data_counts_and_languages(d)?;
        training_loop(t)?;
        bpe_vocabulary(d)?;
        shared_source_embeddings(m, d)?;
        training_schedule_and_checkpoints(t)?;
        training_patience(t, d)?;
        decode(&self.decode)?;
        training_optimizer_and_loss(t)
    }
}

/// `[model]`'s sizes: all positive, `d_model` divisible by `heads` and even, room for
/// `<s>` and `</s>`.
fn model_sizes(m: &ModelConfig) -> Check {
    layer_count("model.layers", m.layers)?;
    if let Some(layers) = m.decoder_layers {
        layer_count("model.decoder_layers", layers)?;
    }
    positive("model.d_model", m.d_model)?;
    positive("model.d_ff", m.d_ff)?;
    positive("model.heads", m.heads)?;
    if !m.d_model.is_multiple_of(m.heads) {
        return Err((
            "model.heads".into(),
            format!(
                "d_model ({}) must be divisible by heads ({}); d_k = d_model / heads",
                m.d_model, m.heads
            ),
        ));
    }
    if !m.d_model.is_multiple_of(2) {
        return Err((
            "model.d_model".into(),
            format!(
                "must be even for the sine/cosine position table, got {}",
                m.d_model
            ),
        ));
    }
    if m.max_len < 2 {
        return Err((
            "model.max_len".into(),
            format!("must be at least 2 (<s> and </s>), got {}", m.max_len),
        ));
    }
    Ok(())
}

/// A decoder-only model trains on a `{ text = ... }` corpus, and only it does.
fn architecture_fits_corpus(m: &ModelConfig, d: &DataConfig) -> Check {
    let text_corpus = d.train.is_target_only();
    if m.arch.reads_source() == text_corpus {
        return Err(if text_corpus {
            (
                "data.train".into(),
                "a { text = ... } corpus trains a language model; set model.arch = \
                 \"decoder-only\", or give pairs (a TSV path or { src, tgt })"
                    .into(),
            )
        } else {
            (
                "model.arch".into(),
                "\"decoder-only\" learns from plain text; set data.train = \
                 { text = \"FILE\" } (one example per line)"
                    .into(),
            )
        });
    }
    Ok(())
}

fn model_dropout(m: &ModelConfig) -> Check {
    probability("model.dropout", m.dropout)?;
    if let Some(rate) = m.activation_dropout {
        probability("model.activation_dropout", rate)?;
    }
    probability("model.attention_dropout", m.attention_dropout)
}

fn data_counts_and_languages(d: &DataConfig) -> Check {
    positive("data.min_freq", d.min_freq)?;
    language_code("data.source_lang", d.source_lang.as_deref())?;
    language_code("data.target_lang", d.target_lang.as_deref())
}

/// Epochs, batches and gradient clipping.
fn training_loop(t: &TrainingConfig) -> Check {
    positive("training.epochs", t.epochs)?;
    positive("training.max_tokens", t.max_tokens)?;
    positive("training.accumulate", t.accumulate)?;
    if let Some(norm) = t.clip_grad_norm {
        positive_number("training.clip_grad_norm", norm)?;
    }
    Ok(())
}

/// The largest vocabulary a tokenizer is learned to: sixteen times NLLB-200's 256,206, and
/// far below what the learners' tables would take all the memory for.
pub const MOST_VOCAB_SIZE: usize = 1 << 22;

fn bpe_vocabulary(d: &DataConfig) -> Check {
    if d.vocab_size > MOST_VOCAB_SIZE {
        return Err((
            "data.vocab_size".into(),
            format!(
                "must be at most {MOST_VOCAB_SIZE} (the learners' tables grow with it), got {}",
                d.vocab_size
            ),
        ));
    }
    if d.tokenizer != TokenizerKind::Word && d.vocab_size < 16 {
        return Err((
            "data.vocab_size".into(),
            format!(
                "must be at least 16 for {}, got {}",
                d.tokenizer, d.vocab_size
            ),
        ));
    }
    Ok(())
}

/// One embedding table for both sides reads one vocabulary.
fn shared_source_embeddings(m: &ModelConfig, d: &DataConfig) -> Check {
    if m.share_source_embeddings && !(d.joint_vocab && d.tokenizer != TokenizerKind::Word) {
        return Err((
            "model.share_source_embeddings".into(),
            format!(
                "one embedding table for both sides needs one vocabulary for both, and \
                 data.tokenizer = \"{}\" with data.joint_vocab = {} gives each side its own; \
                 set data.joint_vocab = true (bpe or marian) or leave this key false",
                d.tokenizer, d.joint_vocab
            ),
        ));
    }
    Ok(())
}

/// Warmup, logging, checkpoints, and averaging no more checkpoints than are kept.
fn training_schedule_and_checkpoints(t: &TrainingConfig) -> Check {
    positive("training.warmup", t.warmup)?;
    positive("training.log_every", t.log_every)?;
    positive("training.checkpoint_every", t.checkpoint_every)?;
    positive("training.validate_every", t.validate_every)?;
    if let Some(steps) = t.validate_every_steps {
        positive("training.validate_every_steps", steps)?;
    }
    if let Some(last) = t.average_last {
        positive("training.average_last", last)?;
        if last > t.keep_last {
            return Err((
                "training.average_last".into(),
                format!(
                    "averages the last {last} kept checkpoints but training.keep_last is {}; \
                     set keep_last to at least {last}",
                    t.keep_last
                ),
            ));
        }
    }
    Ok(())
}

/// Early stopping judges epochs by the validation set, so it needs one; so do validations
/// asked for more or less often than after every epoch.
fn training_patience(t: &TrainingConfig, d: &DataConfig) -> Check {
    let asked = [
        ("training.validate_every", t.validate_every != 1),
        (
            "training.validate_every_steps",
            t.validate_every_steps.is_some(),
        ),
    ];
    if let (Some((key, _)), None) = (asked.iter().find(|(_, set)| *set), &d.valid) {
        return Err((
            key.to_string(),
            "sets how often the validation set is scored, and there is none; set data.valid \
             or remove the key"
                .into(),
        ));
    }
    if let Some(patience) = t.patience {
        positive("training.patience", patience)?;
        if d.valid.is_none() {
            return Err((
                "training.patience".into(),
                "needs a validation set to judge the epochs by; set data.valid".into(),
            ));
        }
    }
    Ok(())
}

fn decode(decode: &DecodeConfig) -> Check {
    positive("decode.beam", decode.beam)?;
    if !decode.length_penalty.is_finite() {
        return Err((
            "decode.length_penalty".into(),
            format!("must be a finite number, got {}", decode.length_penalty),
        ));
    }
    if let Some(max_len) = decode.max_len {
        positive("decode.max_len", max_len)?;
    }
    if let Some(ratio) = decode.length_ratio {
        positive_number("decode.length_ratio", ratio)?;
        // No language pair is a thousand target tokens a source token; beyond f32's range
        // every translation would be marked short.
        if ratio > 1000.0 {
            return Err((
                "decode.length_ratio".into(),
                format!("must be at most 1000 target tokens per source token, got {ratio:e}"),
            ));
        }
    }
    Ok(())
}

/// Adam's settings, the rate's factor and the loss's label smoothing.
fn training_optimizer_and_loss(t: &TrainingConfig) -> Check {
    positive_number("training.lr_factor", t.lr_factor)?;
    probability("training.adam_beta1", t.adam_beta1)?;
    probability("training.adam_beta2", t.adam_beta2)?;
    positive_number("training.adam_eps", t.adam_eps)?;
    probability("training.label_smoothing", t.label_smoothing)
}

/// A language code as LibreTranslate clients send it: 2 to 16 ASCII letters, digits or `-`
/// (`de`, `en`, `zh-Hans`), and not `auto`, which asks the server to detect the language.
fn language_code(key: &str, code: Option<&str>) -> Check {
    let Some(code) = code else { return Ok(()) };
    let well_formed = (2..=16).contains(&code.len())
        && code
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !well_formed || code == "auto" {
        return Err((
            key.into(),
            format!("must be a language code such as \"de\", \"en\" or \"deu_Latn\", got {code:?}"),
        ));
    }
    Ok(())
}

/// The most layers a stack may have: the backward pass walks the graph recursively, and
/// past about 900 layers its depth overflows the thread's stack (an abort, not an error).
pub const MOST_LAYERS: usize = 256;

fn layer_count(key: &str, value: usize) -> Check {
    positive(key, value)?;
    if value > MOST_LAYERS {
        return Err((
            key.into(),
            format!("must be at most {MOST_LAYERS}, got {value}"),
        ));
    }
    Ok(())
}

fn positive(key: &str, value: usize) -> Check {
    if value == 0 {
        return Err((key.into(), "must be at least 1, got 0".into()));
    }
    Ok(())
}

fn positive_number(key: &str, value: f64) -> Check {
    if !(value.is_finite() && value > 0.0) {
        return Err((
            key.into(),
            format!("must be a positive number, got {value}"),
        ));
    }
    Ok(())
}

fn probability(key: &str, value: f64) -> Check {
    if !(0.0..1.0).contains(&value) {
        return Err((key.into(), format!("must be in [0, 1), got {value}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, "test.toml")
    }

    #[test]
    fn d_model_not_divisible_by_heads_is_rejected_with_the_rule() {
        let err = parse("[model]\nd_model = 100\nheads = 8\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("model.heads"));
        assert_eq!(err.line, Some(3));
        assert!(err.message.contains("divisible"), "{err}");
    }

    #[test]
    fn zero_sizes_and_out_of_range_dropout_are_rejected() {
        let err = parse("[model]\nlayers = 0\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("model.layers"));
        let err = parse("[model]\ndropout = 1.0\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("model.dropout"));
        let err = parse("[training]\nwarmup = 0\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("training.warmup"));
        let err = parse("[model]\nlayers = -3\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("model.layers"));
        let err = parse("[model]\nlayers = 900\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("model.layers"));
        let err = parse("[model]\ndecoder_layers = 257\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("model.decoder_layers"));
    }

    #[test]
    fn one_embedding_table_for_both_sides_needs_one_vocabulary() {
        let shared_but_separate = "[model]\nshare_source_embeddings = true\n\
                                   [data]\ntokenizer = \"bpe\"\njoint_vocab = false\n";
        let error = parse(shared_but_separate).unwrap_err();
        assert_eq!(error.key.as_deref(), Some("model.share_source_embeddings"));
        assert!(error.message.contains("joint_vocab = false"), "{error}");
    }

    #[test]
    fn a_config_breaking_several_rules_is_told_the_first_checked() {
        let bpe_too_small = "[data]\ntokenizer = \"bpe\"\nvocab_size = 8\n";
        let err = parse(&format!("{bpe_too_small}[training]\nwarmup = 0\n")).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("data.vocab_size"));
        let err = parse(&format!("{bpe_too_small}[training]\nepochs = 0\n")).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("training.epochs"));
        let err = parse("[decode]\nbeam = 0\n[training]\nlr_factor = 0.0\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("decode.beam"));
    }
}

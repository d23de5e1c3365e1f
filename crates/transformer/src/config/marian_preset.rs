//! `model.arch = "marian"`: the encoder-decoder with MarianMT's conventions, as OPUS-MT's
//! models are built and decoded, so that a model trained here from scratch is one that every
//! Marian tool loads once exported (`transformer export --to hf`). The preset fills the keys
//! the config leaves out and a stated key wins; the resolved config, which checkpoints carry,
//! says `arch = "encoder-decoder"` with every setting explicit.

use super::{
    Activation, Architecture, Config, LengthNormalization, NormPlacement, PositionEncoding,
    TokenizerKind,
};

/// OPUS-MT's position table: `max_position_embeddings`.
const MARIAN_MAX_LEN: usize = 512;

/// Resolves `config`'s `arch = "marian"` against the keys the config file states (`table`).
pub(super) fn resolve(config: &mut Config, table: &toml::Table) {
    if config.model.arch != Architecture::Marian {
        return;
    }
    let stated = |section: &str, key: &str| {
        table
            .get(section)
            .and_then(toml::Value::as_table)
            .is_some_and(|t| t.contains_key(key))
    };
    let data = &mut config.data;
    if !stated("data", "tokenizer") {
        data.tokenizer = TokenizerKind::Marian;
    }
    let joint = data.joint_vocab && data.tokenizer != TokenizerKind::Word;
    let m = &mut config.model;
    m.arch = Architecture::EncoderDecoder;
    let model = |key| !stated("model", key);
    if model("norm") {
        m.norm = NormPlacement::Post;
    }
    if model("positions") {
        m.positions = PositionEncoding::SinusoidalHalves;
    }
    if model("activation") {
        m.activation = Activation::Swish;
    }
    if model("attention_dropout") {
        m.attention_dropout = 0.0;
    }
    if model("activation_dropout") {
        m.activation_dropout = Some(0.0);
    }
    if model("max_len") {
        m.max_len = MARIAN_MAX_LEN;
    }
    if model("share_embeddings") {
        m.share_embeddings = true;
    }
    if model("share_source_embeddings") {
        m.share_source_embeddings = joint;
    }
    // scale_embeddings, the biases and the sizes (6 + 6 layers, 512, 2048, 8 heads) are
    // already OPUS-MT's as the paper's defaults.
    let d = &mut config.decode;
    if !stated("decode", "length_normalization") {
        d.length_normalization = LengthNormalization::Length;
    }
    if !stated("decode", "end_at_max_len") {
        d.end_at_max_len = true;
    }
    // transformers' limit (max_length, which counts the decoder's start): the position
    // table's, not this tool's source length + 50, which an export could not carry.
    if !stated("decode", "max_len") {
        d.max_len = Some(m.max_len.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;

    #[test]
    fn the_preset_fills_what_the_config_leaves_out_and_a_stated_key_wins() {
        let text = "[model]\narch = \"marian\"\nactivation = \"gelu\"\nlayers = 2\n";
        let config = Config::parse(text, "marian.toml").unwrap();
        let m = &config.model;
        assert_eq!(m.arch, Architecture::EncoderDecoder);
        assert_eq!(m.activation, Activation::Gelu);
        assert_eq!(m.layers, 2);
        assert_eq!(m.norm, NormPlacement::Post);
        assert_eq!(m.positions, PositionEncoding::SinusoidalHalves);
        assert_eq!(m.max_len, 512);
        assert!(m.share_embeddings && m.share_source_embeddings && m.scale_embeddings);
        assert_eq!((m.attention_dropout, m.ffn_dropout()), (0.0, 0.0));
        assert_eq!(config.data.tokenizer, TokenizerKind::Marian);
        assert_eq!(
            config.decode.length_normalization,
            LengthNormalization::Length
        );
        assert!(config.decode.end_at_max_len);
        assert_eq!(config.decode.max_len, Some(511));
        // What a checkpoint carries reads back as the same model.
        let saved = Config::parse(&config.to_toml().unwrap(), "config.toml").unwrap();
        assert_eq!(saved.model, config.model);
    }

    #[test]
    fn separate_vocabularies_keep_separate_embeddings() {
        let text = "[model]\narch = \"marian\"\n[data]\njoint_vocab = false\n";
        let config = Config::parse(text, "marian.toml").unwrap();
        assert!(!config.model.share_source_embeddings);
        assert!(config.model.share_embeddings);
    }
}

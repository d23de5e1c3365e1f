//! Any UTF-8 text typed into `translate`: a small random-weight model with word and with BPE
//! tokenizers must translate it (unknown words, empty lines, long lines, odd whitespace and
//! scripts included) without an error or a panic, and its JSON must serialise.
#![no_main]

use std::sync::OnceLock;

use candle_core::Device;
use candle_nn::VarMap;
use libfuzzer_sys::fuzz_target;
use transformer::config::{Config, DataConfig, ModelConfig, TokenizerKind};
use transformer::corpus::read_corpus;
use transformer::tokenize::Tokenizers;
use transformer::model::{make_model, EncoderDecoder, VocabSizes};
use transformer::infer::translator::{DecodeSettings, ConfiguredTranslator};

struct Fixture {
    model: EncoderDecoder,
    tokenizers: Tokenizers,
    max_len: usize,
}

fn fixture(kind: TokenizerKind) -> Fixture {
    let source = transformer::config::CorpusSource::Tsv(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../data/toy.tsv").into(),
    );
    let (pairs, _) = read_corpus(&source).unwrap();
    let data = DataConfig {
        tokenizer: kind,
        vocab_size: 40,
        ..Config::default().data
    };
    let tokenizers = Tokenizers::learn(&data, &pairs).unwrap();
    let cfg = ModelConfig {
        layers: 1,
        d_model: 16,
        d_ff: 32,
        heads: 2,
        max_len: 24,
        ..ModelConfig::default()
    };
    let vocab = VocabSizes {
        src: tokenizers.src.vocab_size(),
        tgt: tokenizers.tgt.vocab_size(),
    };
    let model = make_model(&cfg, vocab, &VarMap::new(), 1, &Device::Cpu).unwrap();
    Fixture {
        model,
        tokenizers,
        max_len: cfg.max_len,
    }
}

static WORD: OnceLock<Fixture> = OnceLock::new();
static BPE: OnceLock<Fixture> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let fixture = if selector % 2 == 0 {
        WORD.get_or_init(|| fixture(TokenizerKind::Word))
    } else {
        BPE.get_or_init(|| fixture(TokenizerKind::Bpe))
    };
    let translator = ConfiguredTranslator {
        model: &fixture.model,
        tokenizers: &fixture.tokenizers,
        max_positions: fixture.max_len,
        device: &Device::Cpu,
        options: DecodeSettings {
            beam: 1 + usize::from(selector / 2 % 3),
            max_len: Some(8),
            ..DecodeSettings::default()
        },
    };
    let translation = translator.translate(text).expect("any text translates");
    serde_json::to_string(&translation).expect("a translation serialises");
});

//! What a run trains and validates on: the encoded training pairs with their tokenizers, and
//! the validation split (encoded for the loss, as text for BLEU), prepared from the config's
//! corpora.

use crate::config::{Config, TokenizerKind};
use crate::data::{encode_pairs, read_corpus, EncodedPair, SentencePair, Tokenizers};

/// Everything the loop trains on.
pub struct TrainingData {
    pub pairs: Vec<EncodedPair>,
    pub tokenizers: Tokenizers,
    pub valid: Option<ValidationData>,
}

/// The validation split: encoded pairs for the loss, raw text for BLEU.
pub struct ValidationData {
    pub pairs: Vec<EncodedPair>,
    pub sources: Vec<String>,
    pub references: Vec<String>,
}

impl TrainingData {
    /// Reads and cleans the config's corpora, learns the tokenizers (a resumed run passes
    /// those it was trained with), encodes everything; says what it did through `note`, one
    /// line at a time. Also returns the first `samples` training sources, to show translations
    /// of at the end.
    pub fn prepare(
        config: &Config,
        tokenizers: Option<Tokenizers>,
        samples: usize,
        mut note: impl FnMut(String),
    ) -> anyhow::Result<(Self, Vec<String>)> {
        let (pairs, report) = read_corpus(&config.data.train)?;
        note(format!("train data {}: {report}", config.data.train));
        let tokenizers = match tokenizers {
            Some(saved) => saved,
            None => {
                if config.data.tokenizer == TokenizerKind::Marian {
                    note_lines_left_out_of_sentencepiece(&pairs, &mut note);
                }
                Tokenizers::learn(&config.data, &pairs)?
            }
        };
        let max_positions = config.model.max_len;
        let (encoded, kept) = encode_pairs(&pairs, &tokenizers, max_positions)?;
        let too_long = pairs.len() - kept.len();
        if encoded.is_empty() && !pairs.is_empty() {
            anyhow::bail!(
                "every one of the {} training pairs is longer than model.max_len = {} lets the \
                 model read (the framing tokens count too), so nothing would train; raise \
                 model.max_len",
                pairs.len(),
                max_positions
            );
        }
        note(format!(
            "tokenizer: {}, {} source / {} target tokens in the vocabulary{}",
            config.data.tokenizer,
            tokenizers.src.vocab_size(),
            tokenizers.tgt.vocab_size(),
            if too_long > 0 {
                format!("; {too_long} pairs longer than model.max_len left out")
            } else {
                String::new()
            }
        ));
        let valid = match &config.data.valid {
            Some(source) => {
                let (valid_pairs, report) = read_corpus(source)?;
                note(format!("valid data {source}: {report}"));
                let valid = ValidationData::encode(&valid_pairs, &tokenizers, max_positions)?;
                if valid.pairs.len() < valid_pairs.len() {
                    note(format!(
                        "valid data: {} pairs longer than model.max_len left out",
                        valid_pairs.len() - valid.pairs.len()
                    ));
                }
                Some(valid)
            }
            None => None,
        };
        let samples = pairs.iter().take(samples).map(|p| p.src.clone()).collect();
        let data = Self {
            pairs: encoded,
            tokenizers,
            valid,
        };
        Ok((data, samples))
    }
}

impl ValidationData {
    /// Pairs the model cannot read (longer than its position table) are left out of both the
    /// loss and BLEU, so that validation never stops a run.
    fn encode(
        pairs: &[SentencePair],
        tokenizers: &Tokenizers,
        max_positions: usize,
    ) -> anyhow::Result<Self> {
        let (encoded, kept) = encode_pairs(pairs, tokenizers, max_positions)?;
        Ok(Self {
            pairs: encoded,
            sources: kept.iter().map(|&i| pairs[i].src.clone()).collect(),
            references: kept.iter().map(|&i| pairs[i].tgt.clone()).collect(),
        })
    }
}

/// Says how many sentences learning the SentencePiece models leaves out for their length
/// (they still train, segmented by the models learned from the rest).
fn note_lines_left_out_of_sentencepiece(pairs: &[SentencePair], note: &mut impl FnMut(String)) {
    let limit = crate::data::SENTENCEPIECE_MAX_SENTENCE_BYTES;
    let long = pairs
        .iter()
        .flat_map(|p| [&p.src, &p.tgt])
        .filter(|text| text.len() > limit)
        .count();
    if long > 0 {
        note(format!(
            "tokenizer: {long} sentences longer than {limit} bytes left out of learning the \
             SentencePiece models, as SentencePiece's trainer leaves them out"
        ));
    }
}

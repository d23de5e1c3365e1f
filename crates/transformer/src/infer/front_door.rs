//! The one front door for inference: a translation checkpoint opened on a device. It owns
//! what every door (`translate`, `eval`, `attention`, `serve`, the documents path, the
//! benchmark) used to assemble by hand: the checkpoint of whichever family (our own, a
//! Hugging Face MarianMT directory), the weight form its compute type asks for, the language
//! pair (checked by the library's rule, [`super::languages`]), and the decoding settings under
//! every request (the checkpoint's `[decode]`, named by its file, and what the model bounds).
//!
//! ```no_run
//! use transformer::infer::{LoadOptions, Translator};
//! # fn main() -> anyhow::Result<()> {
//! let translator = Translator::open("runs/base".as_ref(), &candle_core::Device::Cpu, LoadOptions::default())?;
//! let options = translator.default_settings()?;
//! for translation in translator.translate(&["ich mochte ein bier"], &options)? {
//!     println!("{}", translation.translation);
//! }
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::Device;

use super::languages::{checked_pair, require_pair};
use super::languages::{LanguageNames, LanguageRefused, OnePairLanguages};
use super::settings::{settings_of, DecodeRequest, DecodeSettings, Refused};
use super::translator::{Batching, ConfiguredTranslator, SourceLimit, Translation};
use crate::checkpoint::{self, Checkpoint, Task};
use crate::config::ComputeType;
use crate::decoding::vocab_map::VocabularyMap;
use crate::sentences::SentenceSplitter;
use crate::tokenize::specials::LanguageIds;
use crate::tokenize::TextTokenizer;

/// How to open a checkpoint for decoding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// The products' number form; `None` takes the checkpoint's own (`decode.compute_type`,
    /// int8 for an int8 checkpoint). A device without int8 products decodes in float32 and
    /// says so in [`Translator::notes`].
    pub compute_type: Option<ComputeType>,
    /// A vocabulary map (CTranslate2's `vmap.txt` format): each sentence is decoded over the
    /// target tokens its source's n-grams allow (see [`crate::decoding::vocab_map`]).
    pub vocab_map: Option<PathBuf>,
    /// The source language's code, where the checkpoint names none or another (see
    /// [`Translator::name_languages`]).
    pub source_lang: Option<String>,
    /// The target language's code, as `source_lang`.
    pub target_lang: Option<String>,
    /// What a code may do to a model of one pair that names its own: refuse (the default)
    /// or rename the pair for a server's clients.
    pub one_pair: OnePairLanguages,
    /// What the caller calls the two codes, for refusals and warnings.
    pub language_names: LanguageNames,
}

/// A translation model opened for decoding: its checkpoint, its device and its settings.
pub struct Translator {
    checkpoint: Checkpoint,
    device: Device,
    vocab_map: Option<VocabularyMap>,
    /// What the opener calls the language codes, for [`Self::require_language_pair`].
    language_names: LanguageNames,
}

impl Translator {
    /// Opens the checkpoint at `path` (a checkpoint directory, a run directory whose `best/`
    /// or `last/` is taken, or a Hugging Face MarianMT, M2M100 or NLLB-200 directory) on
    /// `device`, in the languages `options` names. A language model is refused, by name; a
    /// language the model cannot translate in is a [`LanguageRefused`] (a code a
    /// multilingual model lacks, half a pair, another language than a model of one pair's
    /// own unless `options.one_pair` renames, which is said among [`Self::notes`]).
    pub fn open(path: &Path, device: &Device, options: LoadOptions) -> anyhow::Result<Self> {
        let mut checkpoint = checkpoint::load_as(path, device, options.compute_type)?;
        checkpoint.model_for(Task::Translate)?;
        let vocab_map = match &options.vocab_map {
            Some(map) => Some(read_vocab_map(map, &mut checkpoint)?),
            None => None,
        };
        let mut translator = Self {
            checkpoint,
            device: device.clone(),
            vocab_map,
            language_names: options.language_names,
        };
        let pair = checked_pair(
            &translator.checkpoint,
            options.source_lang,
            options.target_lang,
            options.one_pair,
            options.language_names,
        )?;
        translator.name_languages(pair.source.as_deref(), pair.target.as_deref())?;
        translator
            .checkpoint
            .config
            .notes
            .splice(0..0, pair.warnings);
        Ok(translator)
    }

    /// Refuses to translate with a multilingual model before its language pair is named.
    pub fn require_language_pair(&self) -> Result<(), LanguageRefused> {
        require_pair(&self.checkpoint, self.language_names)
    }

    /// The checkpoint: its directory, config, tokenizers and model.
    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }

    /// The device it decodes on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// What opening it noticed and a user should hear (the config's notes: keys filled in
    /// from a preset, int8 asked for on a device without int8 products).
    pub fn notes(&self) -> &[String] {
        &self.checkpoint.config.notes
    }

    /// Names the language pair where the checkpoint does not (or names it otherwise). A
    /// multilingual model translates in this pair unless a request names another, and
    /// refuses a code it lacks (the error lists some it has); another model's pair is only
    /// its name, which a server's clients use.
    pub fn name_languages(
        &mut self,
        source: Option<&str>,
        target: Option<&str>,
    ) -> anyhow::Result<()> {
        let data = &mut self.checkpoint.config.data;
        if let Some(code) = source {
            data.source_lang = Some(code.to_string());
        }
        if let Some(code) = target {
            data.target_lang = Some(code.to_string());
        }
        if let (Some(source), Some(target)) = (&data.source_lang, &data.target_lang) {
            self.checkpoint.tokenizers.name_languages(source, target)?;
        }
        Ok(())
    }

    /// The languages a multilingual model translates from and into (its codes, in its
    /// tokenizer's order); `None` for a model of one language pair.
    pub fn languages(&self) -> Option<Vec<String>> {
        let tokenizer = self.checkpoint.tokenizers.multilingual_tokenizer()?;
        Some(tokenizer.languages().map(str::to_string).collect())
    }

    /// A multilingual model's language pair `source` -> `target` as its tokens, for a
    /// request's [`DecodeSettings::languages`]; an unknown code is an error listing some it
    /// has. `None` for a model of one language pair.
    pub fn language_ids(&self, source: &str, target: &str) -> anyhow::Result<Option<LanguageIds>> {
        self.checkpoint
            .tokenizers
            .multilingual_tokenizer()
            .map(|tokenizer| tokenizer.pair(source, target))
            .transpose()
    }

    /// The decoding settings of a door: the checkpoint's `[decode]`, then `asked` (a door's
    /// own settings: flags, a server's defaults); `door_beam` is the door's widest beam. A
    /// setting out of bounds is refused, naming where it came from; each of the door's
    /// requests is settled over the result ([`DecodeSettings::ask`]).
    pub fn decode_settings(
        &self,
        asked: Option<DecodeRequest>,
        door_beam: Option<usize>,
    ) -> Result<DecodeSettings, Refused> {
        settings_of(&self.checkpoint, asked, door_beam)
    }

    /// The checkpoint's own decoding settings, checked.
    pub fn default_settings(&self) -> Result<DecodeSettings, Refused> {
        self.decode_settings(None, None)
    }

    /// Decodes with `options` (see [`Self::decode_settings`] for settings a door asks for).
    pub fn with(&self, options: DecodeSettings) -> ConfiguredTranslator<'_> {
        ConfiguredTranslator {
            model: self.checkpoint.model.decoding(),
            tokenizers: &self.checkpoint.tokenizers,
            device: &self.device,
            options,
            vocab_map: self.vocab_map.as_ref(),
        }
    }

    /// Translates `texts`, one translation each, in order: each text is cut into sentences
    /// (at its line breaks, and at sentence ends by the source language's rules, as the
    /// `translate` command cuts them), the sentences of all texts are decoded in batches as
    /// [`Batching::default`] bounds them, and each text is put back together between its own
    /// whitespace.
    /// A translation's tokens, ids and log-probabilities are its sentences' one after
    /// another; it is marked `short` or `truncated_from` where one of its sentences is.
    /// [`Self::with`] and [`ConfiguredTranslator::translate_all`] take other batch bounds.
    pub fn translate(
        &self,
        texts: &[&str],
        options: &DecodeSettings,
    ) -> anyhow::Result<Vec<Translation>> {
        self.with(options.clone()).translate_texts(
            texts,
            &self.sentence_splitter(),
            Batching::default(),
            &crate::decoding::always_wanted,
        )
    }

    /// Translates `sentences` as they are, each read as one sentence, batched in one call, in
    /// order. A text of several sentences read as one may come back with some left out (the
    /// model was trained on single sentences): check each translation's `short`, or give
    /// texts to [`Self::translate`].
    pub fn translate_sentences(
        &self,
        sentences: &[&str],
        options: &DecodeSettings,
    ) -> anyhow::Result<Vec<Translation>> {
        let sentences: Vec<String> = sentences.iter().map(|s| s.to_string()).collect();
        self.with(options.clone()).translate_batch(&sentences)
    }

    /// How many tokens of a source are translated (a longer one is cut to them and marked
    /// `truncated_from`).
    pub fn source_limit(&self) -> SourceLimit {
        SourceLimit::of(
            self.checkpoint.config.model.max_len,
            self.checkpoint.tokenizers.source_overhead(),
        )
    }

    /// How [`Self::translate`] cuts texts into sentences: by the rules of the checkpoint's
    /// source language (English rules where it names none).
    pub fn sentence_splitter(&self) -> SentenceSplitter {
        SentenceSplitter::new(self.checkpoint.config.data.source_lang.as_deref(), true)
    }
}

/// The vocabulary map at `path`, its tokens numbered by `checkpoint`'s vocabularies; what it
/// names that they lack becomes a note.
fn read_vocab_map(path: &Path, checkpoint: &mut Checkpoint) -> anyhow::Result<VocabularyMap> {
    let tokenizers = &checkpoint.tokenizers;
    let (source, target) = (numbering(&tokenizers.src), numbering(&tokenizers.tgt));
    let specials = tokenizers.specials();
    // As CTranslate2: the end, unknown and padding symbols are always candidates; so is the
    // decoder's first input, which each search feeds as a candidate.
    let always = [
        specials.eos,
        specials.unk,
        specials.pad,
        specials.decoder_start,
    ];
    let (map, unmatched) = VocabularyMap::read(
        path,
        &|token| source.get(token).copied(),
        &|token| target.get(token).copied(),
        &always,
    )?;
    if map.is_empty(&always) {
        checkpoint.config.notes.push(format!(
            "the vocabulary map {} allows no token of its own (no rule, no always-allowed \
             token): every translation can say only the end and unknown symbols",
            path.display()
        ));
    }
    if unmatched.source_rules > 0 || unmatched.target_tokens > 0 {
        checkpoint.config.notes.push(format!(
            "the vocabulary map {} names tokens this model's vocabularies lack: {} rules \
             whose source n-gram can never match and {} target tokens were left out",
            path.display(),
            unmatched.source_rules,
            unmatched.target_tokens
        ));
    }
    Ok(map)
}

/// A vocabulary's token -> id.
fn numbering(tokenizer: &TextTokenizer) -> HashMap<String, u32> {
    (0..tokenizer.vocab_size() as u32)
        .map(|id| (tokenizer.token(id), id))
        .collect()
}

//! Sentences in, sentences out: tokenize, map to ids, decode (batched greedy or beam search),
//! map back to text.

use anyhow::Context;
use candle_core::{Device, Tensor};

pub use super::limits::{
    readable_beginning, readable_end, Batching, SourceLimit, DEFAULT_BATCH_SIZE,
    DEFAULT_BATCH_TOKENS, MOST_SOURCE_TOKENS,
};
use super::settings::DecodeSettings;
pub use super::short_mark::is_short;
use super::short_mark::is_short_for;
pub use super::translation::{Alternative, Translation};
use crate::decoding::restricted::Restricted;
use crate::decoding::vocab_map::VocabularyMap;
use crate::decoding::{
    always_wanted, beam_search, greedy_batch, BeamSettings, DecodeInput, Hypothesis, StillWanted,
};
use crate::model::{masks, DecodingModel, Prompt, Source};
use crate::sentences::{SentenceBatch, SentenceSplitter};
use crate::tokenize::{SpecialIds, Tokenizers};

/// A sentence read for the model: its framed ids (`None` for an empty source, which is not
/// decoded) and its translation's record so far.
struct ReadSource {
    src_ids: Option<Vec<u32>>,
    translation: Translation,
}

/// A trained model that reads a source, with its tokenizers, on a device.
pub struct ConfiguredTranslator<'a> {
    pub model: &'a dyn DecodingModel,
    pub tokenizers: &'a Tokenizers,
    pub device: &'a Device,
    pub options: DecodeSettings,
    /// Each batch decoded over the target ids its sources allow, when given.
    pub vocab_map: Option<&'a VocabularyMap>,
}

impl ConfiguredTranslator<'_> {
    /// The special ids sentences are framed with: a multilingual model's in the language
    /// pair the options name, else the one it was opened with; it refuses to guess one.
    fn specials(&self) -> anyhow::Result<SpecialIds> {
        let languages = self.options.languages.or(self.tokenizers.languages);
        if let (Some(tokenizer), None) = (self.tokenizers.multilingual_tokenizer(), languages) {
            anyhow::bail!(
                "this model translates between {} languages and none were named; name the \
                 source and target language ({})",
                tokenizer.languages().count(),
                tokenizer.codes_like("")
            );
        }
        Ok(self.tokenizers.specials_in(languages))
    }

    /// Translates one sentence; an empty sentence gives an empty translation.
    pub fn translate(&self, sentence: &str) -> anyhow::Result<Translation> {
        let mut out = self.translate_batch(&[sentence.to_string()])?;
        Ok(out.remove(0))
    }

    /// Translates `sentences` in batches as `batching` bounds them, in order: the loop that
    /// `translate`, `eval` and the library's front door share (`translate` reads stdin in
    /// batches of the lines already there). An error names the lines, counted from 1, of the
    /// batch it came from.
    pub fn translate_all(
        &self,
        sentences: &[String],
        batching: Batching,
    ) -> anyhow::Result<Vec<Translation>> {
        self.translate_all_observed(sentences, batching, &mut |_| {})
    }

    /// Translates `texts`, one translation each, in order: each text is cut into sentences by
    /// `splitter`, the sentences of all texts are decoded in batches as `batching` bounds them,
    /// and each text is put back together between its own whitespace, its translation's
    /// tokens, ids and log-probabilities its sentences' one after another (see
    /// [`Translation::concatenate`]). Decoding stops with an error at the first step where `still_wanted` says no.
    pub fn translate_texts<S: AsRef<str>>(
        &self,
        texts: &[S],
        splitter: &SentenceSplitter,
        batching: Batching,
        still_wanted: StillWanted,
    ) -> anyhow::Result<Vec<Translation>> {
        let batch = SentenceBatch::new(splitter, texts);
        let translations =
            self.translate_all_while(batch.sentences(), batching, still_wanted, &mut |_| {})?;
        Ok(texts
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let joined = batch.join_with(i, |n| translations[n].translation.as_str());
                let own = batch
                    .sentence_range(i)
                    .map(|n| translations[n].clone())
                    .collect();
                Translation::concatenate(text.as_ref(), joined, own)
            })
            .collect())
    }

    /// [`Self::translate_all`], telling `done` how many sentences each batch finished (for a
    /// progress bar). Each sentence is read (tokenized) as its batch fills, so that no more
    /// than a batch's ids are held at once.
    pub fn translate_all_observed(
        &self,
        sentences: &[String],
        batching: Batching,
        done: &mut dyn FnMut(usize),
    ) -> anyhow::Result<Vec<Translation>> {
        self.translate_all_while(sentences, batching, &always_wanted, done)
    }

    /// [`Self::translate_all_observed`], stopping with an error at the first decoding step
    /// where `still_wanted` says no (a caller interrupted: Ctrl-C in Python).
    pub fn translate_all_while(
        &self,
        sentences: &[String],
        batching: Batching,
        still_wanted: StillWanted,
        done: &mut dyn FnMut(usize),
    ) -> anyhow::Result<Vec<Translation>> {
        let specials = self.specials()?;
        let mut translations = Vec::with_capacity(sentences.len());
        let mut batch: Vec<ReadSource> = Vec::new();
        // The longest framed source in `batch`, which its padding makes every row's width.
        let mut widest = 0;
        let mut first = 1;
        let mut flush = |batch: &mut Vec<ReadSource>, first: &mut usize| {
            let count = batch.len();
            let last = *first + count - 1;
            let translated = self
                .translate_read(std::mem::take(batch), &specials, still_wanted)
                .with_context(|| format!("translating source lines {first}-{last}"))?;
            done(count);
            translations.extend(translated);
            *first = last + 1;
            anyhow::Ok(())
        };
        for sentence in sentences {
            let read = self.read_source(sentence, &specials)?;
            let width = read.src_ids.as_ref().map_or(0, Vec::len);
            let fits = batching.fits(batch.len() + 1, widest.max(width), self.options.beam);
            if !batch.is_empty() && !fits {
                flush(&mut batch, &mut first)?;
                widest = 0;
            }
            widest = widest.max(width);
            batch.push(read);
        }
        if !batch.is_empty() {
            flush(&mut batch, &mut first)?;
        }
        Ok(translations)
    }

    /// Translates sentences together (one padded batch for greedy decoding). A sentence
    /// longer than the model reads is translated from its first [`SourceLimit`] tokens and
    /// marked with `truncated_from`.
    pub fn translate_batch(&self, sentences: &[String]) -> anyhow::Result<Vec<Translation>> {
        self.translate_batch_while(sentences, &always_wanted)
    }

    /// [`Self::translate_batch`], stopping with an error at the first decoding step where
    /// `still_wanted` says no (the server's requesters have all gone).
    pub fn translate_batch_while(
        &self,
        sentences: &[String],
        still_wanted: StillWanted,
    ) -> anyhow::Result<Vec<Translation>> {
        let specials = self.specials()?;
        let read = sentences
            .iter()
            .map(|sentence| self.read_source(sentence, &specials))
            .collect::<anyhow::Result<_>>()?;
        self.translate_read(read, &specials, still_wanted)
    }

    /// `sentence` read as the model reads it: tokenized (whitespace as training saw it: no-break
    /// spaces and runs of spaces become one space), cut to the [`SourceLimit`] (so that one
    /// long line does not end a stream of translations; the caller warns) and framed.
    fn read_source(&self, sentence: &str, specials: &SpecialIds) -> anyhow::Result<ReadSource> {
        let readable =
            SourceLimit::of(self.model.max_positions(), specials.source_overhead()).tokens;
        // Only a beginning that surely holds more than the readable tokens is tokenized: a
        // 16 MB word took 2.7 GB to tokenize whole, to be cut to 1,024 tokens after.
        let encoded = self
            .tokenizers
            .src
            .encode(readable_beginning(sentence, readable))?;
        let truncated_from = (encoded.ids.len() > readable).then_some(encoded.ids.len());
        let src_ids = (!encoded.ids.is_empty())
            .then(|| specials.source(&encoded.ids[..encoded.ids.len().min(readable)]));
        Ok(ReadSource {
            src_ids,
            translation: Translation {
                source: sentence.to_string(),
                translation: String::new(),
                tokens: Vec::new(),
                ids: Vec::new(),
                log_probs: Vec::new(),
                unknown_words: encoded.unknown,
                truncated_from,
                stopped_at_limit: None,
                short: false,
                alternatives: Vec::new(),
            },
        })
    }

    /// Decodes the sources of `read` together and fills in their translations.
    fn translate_read(
        &self,
        read: Vec<ReadSource>,
        specials: &SpecialIds,
        still_wanted: StillWanted,
    ) -> anyhow::Result<Vec<Translation>> {
        let mut results = Vec::with_capacity(read.len());
        let mut sources = Vec::new();
        for ReadSource {
            src_ids,
            translation,
        } in read
        {
            if let Some(src_ids) = src_ids {
                sources.push((results.len(), src_ids));
            }
            results.push(translation);
        }
        let hypotheses = self.decode(&sources, specials, still_wanted)?;
        for ((index, src_ids), ranked) in sources.iter().zip(hypotheses) {
            let mut ranked = ranked.into_iter().map(|h| self.alternative(h));
            let result = &mut results[*index];
            if let Some(best) = ranked.next().transpose()? {
                let source_tokens = src_ids.len().saturating_sub(specials.source_overhead());
                let generated = best.ids.iter().filter(|&&id| id != specials.eos).count();
                // A translation that ran into the length limit was cut there, not shortened by
                // a sentence left out.
                let limit = self.max_steps(src_ids.len(), specials);
                let ended_by_itself = best.ids.last() == Some(&specials.eos)
                    && !(self.options.end_at_max_len && best.ids.len() >= limit);
                result.stopped_at_limit = (!ended_by_itself).then_some(limit);
                result.short = ended_by_itself
                    && is_short_for(
                        &result.source,
                        source_tokens,
                        generated,
                        self.options.length_ratio,
                    );
                result.translation = best.translation;
                result.tokens = best.tokens;
                result.ids = best.ids;
                result.log_probs = best.log_probs;
            }
            result.alternatives = ranked.collect::<anyhow::Result<_>>()?;
        }
        Ok(results)
    }

    /// A hypothesis as text and tokens.
    fn alternative(&self, hypothesis: Hypothesis) -> anyhow::Result<Alternative> {
        let tgt = &self.tokenizers.tgt;
        Ok(Alternative {
            translation: tgt.decode(&hypothesis.ids)?,
            tokens: hypothesis.ids.iter().map(|&id| tgt.token(id)).collect(),
            ids: hypothesis.ids,
            log_probs: hypothesis.log_probs,
        })
    }

    /// For a source of `src_len` ids framed by `specials`; a forced first token takes a
    /// position of the decoder's.
    fn max_steps(&self, src_len: usize, specials: &SpecialIds) -> usize {
        let positions = self.model.max_positions() - usize::from(specials.forced.is_some());
        self.options.max_steps(
            src_len.saturating_sub(specials.source_overhead()),
            positions,
        )
    }

    /// Each source's hypotheses, best first (one unless `n_best` asks for more).
    fn decode(
        &self,
        sources: &[(usize, Vec<u32>)],
        specials: &SpecialIds,
        still_wanted: StillWanted,
    ) -> anyhow::Result<Vec<Vec<Hypothesis>>> {
        if sources.is_empty() {
            return Ok(Vec::new());
        }
        let width = sources.iter().map(|(_, ids)| ids.len()).max().unwrap_or(0);
        let mut padded = Vec::with_capacity(sources.len() * width);
        for (_, ids) in sources {
            padded.extend_from_slice(ids);
            padded.extend(std::iter::repeat_n(specials.pad, width - ids.len()));
        }
        let ids = Tensor::from_vec(padded, (sources.len(), width), self.device)?;
        let source = Source {
            mask: masks::padding_mask(&ids, specials.pad)?,
            ids,
        };
        let prompt = specials.decoder_prefix();
        let prefix = Tensor::from_vec(
            prompt.repeat(sources.len()),
            (sources.len(), prompt.len()),
            self.device,
        )?;
        // Each sentence decodes for its own number of steps, as it would alone.
        let max_steps: Vec<usize> = sources
            .iter()
            .map(|(_, ids)| self.max_steps(ids.len(), specials))
            .collect();
        let restricted = self
            .vocab_map
            .map(|map| self.restricted(map, sources, specials))
            .transpose()?;
        // Restricted, the searches' ids are positions among the candidates, turned back into
        // ids after.
        let (model, prefix, end, never): (&dyn DecodingModel, _, _, Vec<u32>) = match &restricted {
            None => (
                self.model,
                prefix,
                Some(specials.eos),
                specials.never.clone(),
            ),
            Some(restricted) => (
                restricted,
                restricted.positions(&prefix)?,
                restricted.position(specials.eos),
                // The forced token is a candidate only to be fed: a map that allows little
                // else must not fill a translation with it, nor with another language's
                // token or the framing a map may list among its targets.
                (specials.never.iter().copied())
                    .chain(specials.forced)
                    .chain(self.never_mapped())
                    .filter_map(|id| restricted.position(id))
                    .collect(),
            ),
        };
        let input = DecodeInput {
            prompt: Prompt {
                source: Some(&source),
                prefix: &prefix,
            },
            max_steps: &max_steps,
            end,
            never: &never,
            end_at_limit: self.options.end_at_max_len,
            still_wanted,
        };
        let ranked = self.search(model, &input, specials)?;
        let Some(restricted) = &restricted else {
            return Ok(ranked);
        };
        ranked
            .into_iter()
            .map(|ranked| ranked.into_iter().map(|h| restricted.to_ids(h)).collect())
            .collect::<candle_core::Result<_>>()
            .map_err(Into::into)
    }

    /// The model over each source's candidates under `map`: the targets of the n-grams of
    /// its own tokens (not their framing).
    fn restricted(
        &self,
        map: &VocabularyMap,
        sources: &[(usize, Vec<u32>)],
        specials: &SpecialIds,
    ) -> anyhow::Result<Restricted<'_>> {
        let framing = [
            Some(specials.eos),
            Some(specials.pad),
            specials.source_start,
            specials.source_last,
        ];
        let own: Vec<Vec<u32>> = sources
            .iter()
            .map(|(_, ids)| {
                let words: Vec<u32> = (ids.iter().copied())
                    .filter(|&id| !framing.contains(&Some(id)))
                    .collect();
                let mut candidates = map.candidates(&[&words]);
                // The forced token is fed as a candidate, as the decoder's start is.
                candidates.extend(specials.forced);
                candidates
            })
            .collect();
        Ok(Restricted::new(self.model, &own, self.device)?)
    }

    /// What a vocabulary map's candidates never contribute to a translation beyond what the
    /// whole vocabulary's search excludes: for a multilingual model, every id no text holds
    /// (a language's token, `<s>`, `<pad>`, `<mask>`). Other models' maps keep the whole
    /// vocabulary's exclusions, so that a map allowing every token decodes as no map does.
    fn never_mapped(&self) -> Vec<u32> {
        (self.tokenizers.multilingual_tokenizer())
            .map(|tokenizer| tokenizer.not_text_ids())
            .unwrap_or_default()
    }

    /// Each row's hypotheses, best first, from the search the options ask for.
    fn search(
        &self,
        model: &dyn DecodingModel,
        input: &DecodeInput,
        specials: &SpecialIds,
    ) -> anyhow::Result<Vec<Vec<Hypothesis>>> {
        Ok(match self.options.beam_settings() {
            Some(settings) => beam_search(
                model,
                input,
                BeamSettings {
                    // transformers counts a forced first token in a hypothesis's length.
                    prefix_in_length: usize::from(specials.forced.is_some()),
                    ..settings
                },
            )?,
            None => greedy_batch(model, input)?
                .into_iter()
                .map(|h| vec![h])
                .collect(),
        })
    }
}

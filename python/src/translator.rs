//! `transformer.Translator`: a checkpoint opened as `translate --checkpoint` opens it (a run
//! directory, a checkpoint, a Hugging Face directory or a Hub name), decoding texts, HTML and
//! files with the GIL released, so that Python threads share one model.

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};
use transformer::config::ComputeType;
use transformer::decoding::StillWanted;
use transformer::device::DeviceRequest;
use transformer::infer::translator::{Batching, ConfiguredTranslator, Translation};
use transformer::infer::{OnePairLanguages, Translator};
use transformer::input_text::{read_path, MOST_INPUT_BYTES};
use transformer::sentences::SentenceSplitter;
use transformer_cli::flags::{at_least_one, finite, language_code, DecodeSettingsArgs, DeviceArgs};
use transformer_cli::open_checkpoint::{decode_settings, open_translator};
use transformer_cli::output_guard::{refuse_output_into_checkpoint, refuse_output_onto_input};
use transformer_cli::progress::Verbosity;
use transformer_documents::{DocumentFormat, DocxLimits, Prepared};

use crate::arguments::{number, parsed, strings, text_of};
use crate::errors::usage;
use crate::pool::interruptible;
use crate::translation::PyTranslation;
use crate::values::python_repr;

/// A translation model opened for decoding.
#[pyclass(frozen, name = "Translator", module = "transformer")]
pub struct PyTranslator {
    inner: Translator,
    /// What `checkpoint` named (a run, a checkpoint, a Hub name), which `translate_file`
    /// never writes into.
    given: PathBuf,
    /// The compute type asked for, or the checkpoint's own.
    compute_type: ComputeType,
}

#[pymethods]
impl PyTranslator {
    #[new]
    #[pyo3(signature = (checkpoint, device = "auto", compute_type = "default", vocab_map = None, source_lang = None, target_lang = None))]
    fn new(
        py: Python<'_>,
        checkpoint: PathBuf,
        device: &str,
        compute_type: &str,
        vocab_map: Option<PathBuf>,
        source_lang: Option<String>,
        target_lang: Option<String>,
    ) -> PyResult<Self> {
        let device = parsed("device", device, |text| {
            text.parse::<DeviceRequest>().map_err(|e| e.to_string())
        })?;
        let asked_type = match compute_type {
            "default" => None,
            other => Some(parsed("compute_type", other, ComputeType::parse)?),
        };
        let settings = DecodeSettingsArgs {
            beam: None,
            length_penalty: None,
            max_len: None,
            compute_type: asked_type,
            vocab_map,
            source_lang: source_lang
                .map(|code| parsed("source_lang", &code, language_code))
                .transpose()?,
            target_lang: target_lang
                .map(|code| parsed("target_lang", &code, language_code))
                .transpose()?,
        };
        // On the pool, as decoding: loading may run its loops (int8 quantization).
        let inner = interruptible(py, |_| {
            crate::read_environment()?;
            let device = transformer_cli::device_choice::device_from(
                &DeviceArgs { device },
                Verbosity::Normal,
            )?;
            open_translator(
                Some(&checkpoint),
                &device,
                settings.load_options(OnePairLanguages::Refuse),
            )
        })?;
        let compute_type = asked_type.unwrap_or(inner.checkpoint().config.decode.compute_type);
        Ok(Self {
            inner,
            given: checkpoint,
            compute_type,
        })
    }

    /// Translates `texts` (a str, or a list of them): each is cut into sentences (unless
    /// `sentence_split=False`), the sentences of all are decoded in batches with the GIL
    /// released, and each text is put back together. A str gives one result, a list a list.
    /// `format="html"` reads each text as an HTML page or fragment and returns the translated
    /// markup (str) instead of `Translation`s.
    #[pyo3(signature = (texts, *, beam = None, max_len = None, length_penalty = None, source_lang = None, target_lang = None, return_scores = false, format = "text", sentence_split = true, batch_size = None, batch_tokens = None))]
    #[allow(clippy::too_many_arguments)]
    fn translate<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        beam: Option<&Bound<'py, PyAny>>,
        max_len: Option<&Bound<'py, PyAny>>,
        length_penalty: Option<&Bound<'py, PyAny>>,
        source_lang: Option<String>,
        target_lang: Option<String>,
        return_scores: bool,
        format: &str,
        sentence_split: bool,
        batch_size: Option<&Bound<'py, PyAny>>,
        batch_tokens: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (texts, one) = text_list(texts)?;
        let html = match format {
            "text" => false,
            "html" => true,
            other => {
                return Err(usage(format!(
                    "invalid value '{other}' for format: use \"text\" or \"html\" (a .docx is \
                     translated by translate_file)"
                )))
            }
        };
        let asked = asked(beam, max_len, length_penalty)?;
        let batching = Batching {
            sentences: number("batch_size", batch_size, at_least_one)?
                .unwrap_or(Batching::default().sentences),
            tokens: number("batch_tokens", batch_tokens, at_least_one)?
                .unwrap_or(Batching::default().tokens),
        };
        let source_lang = source_lang
            .map(|code| parsed("source_lang", &code, language_code))
            .transpose()?;
        let target_lang = target_lang
            .map(|code| parsed("target_lang", &code, language_code))
            .transpose()?;
        let request = Request {
            asked,
            source_lang,
            target_lang,
            sentence_split,
        };
        // As the command: on one of the pool's threads, not beside them.
        let done = interruptible(py, |still_wanted| {
            let (translator, splitter) = self.configured(request)?;
            match html {
                true => translate_html(&translator, &splitter, batching, &texts, still_wanted)
                    .map(Done::Html),
                false => translator
                    .translate_texts(&texts, &splitter, batching, still_wanted)
                    .map(Done::Texts),
            }
        })?;
        let mut results: Vec<Bound<'py, PyAny>> = match done {
            Done::Html(pages) => pages
                .into_iter()
                .map(|page| Ok(PyString::new(py, &page).into_any()))
                .collect::<PyResult<_>>()?,
            Done::Texts(translations) => translations
                .into_iter()
                .map(|t| Ok(Bound::new(py, PyTranslation::new(t, return_scores))?.into_any()))
                .collect::<PyResult<_>>()?,
        };
        match (one, results.pop()) {
            (true, Some(only)) => Ok(only),
            (_, last) => {
                results.extend(last);
                Ok(PyList::new(py, results)?.into_any())
            }
        }
    }

    /// Translates the file at `path` (.txt, .html/.htm or .docx; `format` names the format of
    /// a file with another extension) into `out`, written atomically once done, as
    /// `transformer translate --file PATH --out OUT` does. Returns how many sentences it
    /// translated.
    #[pyo3(signature = (path, out, *, format = None, beam = None, max_len = None, length_penalty = None))]
    #[allow(clippy::too_many_arguments)]
    fn translate_file<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        out: PathBuf,
        format: Option<&str>,
        beam: Option<&Bound<'py, PyAny>>,
        max_len: Option<&Bound<'py, PyAny>>,
        length_penalty: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<usize> {
        let format = match format {
            None => DocumentFormat::from_path(&path).ok_or_else(|| {
                usage(format!(
                    "{}: cannot tell its format from its extension; name it {} or give \
                     format=\"text\", \"html\" or \"docx\"",
                    path.display(),
                    DocumentFormat::all_extensions()
                ))
            })?,
            Some("text") => DocumentFormat::Text,
            Some("html") => DocumentFormat::Html,
            Some("docx") => DocumentFormat::Docx,
            Some(other) => {
                return Err(usage(format!(
                    "invalid value '{other}' for format: use \"text\", \"html\" or \"docx\""
                )))
            }
        };
        let request = Request {
            asked: asked(beam, max_len, length_penalty)?,
            source_lang: None,
            target_lang: None,
            sentence_split: true,
        };
        interruptible(py, |still_wanted| {
            let (translator, splitter) = self.configured(request)?;
            // As the command guards --out: never onto the input, never into the model.
            refuse_output_onto_input(&out, &[("--file", &path)])?;
            let loaded = &self.inner.checkpoint().dir;
            refuse_output_into_checkpoint(&out, Some(&self.given), loaded)?;
            translate_file(&translator, &splitter, &path, &out, format, still_wanted)
        })
    }

    /// The languages a multilingual model translates from and into (its codes); `None` for a
    /// model of one language pair.
    #[getter]
    fn languages(&self) -> Option<Vec<String>> {
        self.inner.languages()
    }

    /// The checkpoint directory the model was read from.
    #[getter]
    fn checkpoint(&self) -> PathBuf {
        self.inner.checkpoint().dir.clone()
    }

    /// Where it decodes: "cpu" or "cuda:N".
    #[getter]
    fn device(&self) -> String {
        match self.inner.device().location() {
            candle_core::DeviceLocation::Cpu => "cpu".into(),
            candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
            other => format!("{other:?}"),
        }
    }

    /// The products' number form: "float32", "int8" or "bfloat16".
    #[getter]
    fn compute_type(&self) -> &'static str {
        self.compute_type.name()
    }

    /// What opening it noticed (said on stderr too): keys filled in from a preset, int8 on a
    /// device without int8 products.
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.inner.notes().to_vec()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let checkpoint = self.inner.checkpoint().dir.display().to_string();
        Ok(format!(
            "Translator({}, device={}, compute_type={})",
            python_repr(py, &checkpoint)?,
            python_repr(py, &self.device())?,
            python_repr(py, self.compute_type())?
        ))
    }
}

/// What one call asks for, checked.
struct Request {
    asked: DecodeSettingsArgs,
    source_lang: Option<String>,
    target_lang: Option<String>,
    sentence_split: bool,
}

/// What a call decoded.
enum Done {
    Texts(Vec<Translation>),
    Html(Vec<String>),
}

impl PyTranslator {
    /// The translator with `request`'s settings over the checkpoint's, and the sentence
    /// splitter of its source language.
    fn configured(
        &self,
        request: Request,
    ) -> anyhow::Result<(ConfiguredTranslator<'_>, SentenceSplitter)> {
        let mut settings = decode_settings(&request.asked, &self.inner, None)?;
        let data = &self.inner.checkpoint().config.data;
        let source = request.source_lang.or_else(|| data.source_lang.clone());
        let target = request.target_lang.or_else(|| data.target_lang.clone());
        match &self.inner.languages() {
            // A multilingual model: the call's pair, or the one it was opened with.
            Some(_) => match (&source, &target) {
                (Some(source), Some(target)) => {
                    // A code the model lacks is the caller's choice, as the flag's is.
                    let pair = self.inner.language_ids(source, target);
                    settings.languages = pair.map_err(|e| {
                        transformer_cli::errors::UsageError(format!(
                            "source_lang {source:?}, target_lang {target:?}: {e:#}"
                        ))
                    })?;
                }
                _ => self.inner.require_language_pair()?,
            },
            // A model of one pair translates only in its own.
            None => {
                for (asked, own, name) in [
                    (&source, &data.source_lang, "source_lang"),
                    (&target, &data.target_lang, "target_lang"),
                ] {
                    if let (Some(asked), Some(own)) = (asked, own) {
                        if asked != own {
                            return Err(transformer_cli::errors::UsageError(format!(
                                "{name} {asked:?}: this model translates only {} to {}; leave \
                                 {name} out",
                                data.source_lang.as_deref().unwrap_or("?"),
                                data.target_lang.as_deref().unwrap_or("?"),
                            ))
                            .into());
                        }
                    }
                }
            }
        }
        let splitter = SentenceSplitter::new(source.as_deref(), request.sentence_split);
        Ok((self.inner.with(settings), splitter))
    }
}

/// Each HTML page or fragment in `pages` translated, its markup kept; the sentences of all
/// are decoded together.
fn translate_html(
    translator: &ConfiguredTranslator,
    splitter: &SentenceSplitter,
    batching: Batching,
    pages: &[String],
    still_wanted: StillWanted,
) -> anyhow::Result<Vec<String>> {
    let prepared = pages
        .iter()
        .enumerate()
        .map(|(i, page)| {
            let name = format!("texts[{i}]");
            let job = DocumentFormat::Html.parse(
                page.as_bytes().to_vec(),
                &name,
                DocxLimits::default(),
            )?;
            Ok(Prepared::new(job, splitter))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let sentences: Vec<String> = prepared
        .iter()
        .flat_map(|page| page.sentences().iter().cloned())
        .collect();
    let translations: Vec<String> = translator
        .translate_all_while(&sentences, batching, still_wanted, &mut |_| {})?
        .into_iter()
        .map(|t| t.translation)
        .collect();
    let mut first = 0;
    prepared
        .into_iter()
        .map(|page| {
            let count = page.sentences().len();
            let html = page.finish(&translations[first..first + count])?;
            first += count;
            Ok(String::from_utf8_lossy(&html).into_owned())
        })
        .collect()
}

/// The file at `path` translated into `out` (atomically); how many sentences it held.
fn translate_file(
    translator: &ConfiguredTranslator,
    splitter: &SentenceSplitter,
    path: &Path,
    out: &Path,
    format: DocumentFormat,
    still_wanted: StillWanted,
) -> anyhow::Result<usize> {
    let name = path.display().to_string();
    let bytes = read_path(path, MOST_INPUT_BYTES)
        .map_err(|e| anyhow::Error::new(e).context(format!("cannot read {name}")))?;
    let prepared = Prepared::new(format.parse(bytes, &name, DocxLimits::default())?, splitter);
    let count = prepared.document_sentences();
    let translations: Vec<String> = translator
        .translate_all_while(
            prepared.sentences(),
            Batching::default(),
            still_wanted,
            &mut |_| {},
        )?
        .into_iter()
        .map(|t| t.translation)
        .collect();
    let translated = prepared.finish(&translations)?;
    transformer::atomic_file::write_atomic(out, &translated)?;
    Ok(count)
}

/// A call's decoding settings, each checked by its flag's parser.
fn asked(
    beam: Option<&Bound<'_, PyAny>>,
    max_len: Option<&Bound<'_, PyAny>>,
    length_penalty: Option<&Bound<'_, PyAny>>,
) -> PyResult<DecodeSettingsArgs> {
    Ok(DecodeSettingsArgs {
        beam: number("beam", beam, at_least_one)?,
        length_penalty: number("length_penalty", length_penalty, finite)?,
        max_len: number("max_len", max_len, at_least_one)?,
        compute_type: None,
        vocab_map: None,
        source_lang: None,
        target_lang: None,
    })
}

/// `texts` as a list of str, and whether it was one str.
fn text_list(texts: &Bound<'_, PyAny>) -> PyResult<(Vec<String>, bool)> {
    match texts.cast::<PyString>() {
        Ok(one) => Ok((vec![text_of(one, "texts")?], true)),
        Err(_) => Ok((strings(texts, "texts", "or a str")?, false)),
    }
}

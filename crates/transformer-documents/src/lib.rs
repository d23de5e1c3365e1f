//! Documents, not only lines: texts cut into sentences and put back together, HTML with its
//! markup, Word files with their formatting. Each format pulls out the texts to translate
//! (a [`TextJob`]), the sentence layer cuts them into what the model reads, and the
//! translations go back the same way. Nothing here decodes: the caller translates the
//! sentences in its own batches (the CLI's loop, the server's queue).

pub mod docx;
pub mod html;
pub mod inline;
mod text;

use std::path::Path;

use anyhow::bail;

pub use docx::DocxLimits;
use transformer::sentences::{SentenceBatch, SentenceSplitter};

/// The texts a document gives to translate, in groups (one per block) that come back
/// translated in the same shape.
#[derive(Debug, Default)]
pub struct Extracted {
    pub groups: Vec<Vec<String>>,
}

impl Extracted {
    pub fn from_groups(groups: impl IntoIterator<Item = Vec<String>>) -> Self {
        Self {
            groups: groups.into_iter().collect(),
        }
    }
}

/// A parsed document: its texts out, their translations in, the translated file out.
pub trait TextJob: Send {
    fn extract(&self) -> Extracted;
    /// The document with `translations` (shaped as `extract()`'s groups) in place.
    fn finish(self: Box<Self>, translations: Vec<Vec<String>>) -> anyhow::Result<Vec<u8>>;
}

/// The formats a file may be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentFormat {
    Text,
    Html,
    Docx,
}

impl DocumentFormat {
    /// Every format, for messages and LibreTranslate's `supportedFilesFormat`.
    pub const ALL: [DocumentFormat; 3] = [Self::Text, Self::Html, Self::Docx];

    /// The format a file name's extension names, case-insensitively; a name that is only an
    /// extension (`.txt`) names its format too.
    pub fn from_path(path: &Path) -> Option<Self> {
        let name = path.file_name()?.to_str()?;
        let extension = match path.extension() {
            Some(extension) => extension.to_str()?,
            None => name.strip_prefix('.')?,
        }
        .to_ascii_lowercase();
        match extension.as_str() {
            "txt" => Some(Self::Text),
            "html" | "htm" => Some(Self::Html),
            "docx" => Some(Self::Docx),
            _ => None,
        }
    }

    /// The extensions it is known by, the first the usual one.
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            Self::Text => &[".txt"],
            Self::Html => &[".html", ".htm"],
            Self::Docx => &[".docx"],
        }
    }

    /// Every extension a file may have, for messages: ".txt, .html, .htm, .docx".
    pub fn all_extensions() -> String {
        Self::ALL
            .iter()
            .flat_map(|f| f.extensions())
            .copied()
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The media type a translated file is sent with.
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Text => "text/plain; charset=utf-8",
            Self::Html => "text/html",
            Self::Docx => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        }
    }

    /// Parses `bytes` (the file `name`, for errors) into a job.
    pub fn parse(
        self,
        bytes: Vec<u8>,
        name: &str,
        limits: DocxLimits,
    ) -> anyhow::Result<Box<dyn TextJob>> {
        Ok(match self {
            Self::Text => Box::new(text::PlainTextJob::parse(bytes, name)?),
            Self::Html => Box::new(html::HtmlFileJob::parse(&bytes)?),
            Self::Docx => Box::new(docx::DocxJob::parse(bytes, name, limits)?),
        })
    }
}

impl std::str::FromStr for DocumentFormat {
    type Err = anyhow::Error;

    fn from_str(name: &str) -> anyhow::Result<Self> {
        match name {
            "text" | "txt" => Ok(Self::Text),
            "html" => Ok(Self::Html),
            "docx" => Ok(Self::Docx),
            other => bail!("unknown format {other:?}; use text, html or docx"),
        }
    }
}

/// A document's texts cut into sentences, waiting for their translations.
pub struct Prepared {
    job: Box<dyn TextJob>,
    batch: SentenceBatch,
    group_sizes: Vec<usize>,
}

impl Prepared {
    pub fn new(job: Box<dyn TextJob>, splitter: &SentenceSplitter) -> Self {
        let extracted = job.extract();
        let group_sizes = extracted.groups.iter().map(Vec::len).collect();
        let texts: Vec<String> = extracted.groups.into_iter().flatten().collect();
        let batch = SentenceBatch::new(splitter, &texts);
        Self {
            job,
            batch,
            group_sizes,
        }
    }

    /// Every sentence to translate, in order: the document's own, and the pieces of a
    /// formatted text each translated alone (to find where its marks go).
    pub fn sentences(&self) -> &[String] {
        self.batch.sentences()
    }

    /// How many sentences the document holds (its texts', not the formatted pieces').
    pub fn document_sentences(&self) -> usize {
        let per_text: Vec<usize> = self.batch.sentences_per_text().collect();
        let mut first = 0;
        let mut count = 0;
        for &size in &self.group_sizes {
            if size > 0 {
                count += per_text[first];
            }
            first += size;
        }
        count
    }

    /// The translated document, given `sentences()`'s translations in order.
    pub fn finish<S: AsRef<str>>(self, translations: &[S]) -> anyhow::Result<Vec<u8>> {
        if translations.len() != self.batch.sentences().len() {
            bail!(
                "{} translations for {} sentences",
                translations.len(),
                self.batch.sentences().len()
            );
        }
        let mut texts = self.batch.join_all(translations).into_iter();
        let groups = self
            .group_sizes
            .iter()
            .map(|&n| texts.by_ref().take(n).collect())
            .collect();
        self.job.finish(groups)
    }
}

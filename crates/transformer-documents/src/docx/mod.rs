//! Word documents (`.docx`, Office Open XML): the text of each paragraph's runs translated,
//! everything else of the package written back byte for byte. The parts that hold text
//! (the body, headers, footers, foot- and endnotes) are read event by event (quick-xml) and
//! written back event by event, so that only the text inside `<w:t>` changes. A run's
//! formatting (`<w:rPr>`, bold or a font) is a mark that moves with the words it covers
//! ([`InlineBlock`](super::inline::InlineBlock)); tabs, breaks, fields, drawings and
//! hyperlinks end a block.
//!
//! `part` reads and writes one XML part event by event; `blocks` finds the blocks in it
//! and places each block's translation into its runs.

mod blocks;
mod part;

use std::io::{Cursor, Read, Write};

use anyhow::{bail, Context};

use super::{Extracted, TextJob};
use part::Part;

/// What a `.docx` may hold before it is refused: packages are zip files, and a small one can
/// claim (or inflate to) gigabytes.
#[derive(Debug, Clone, Copy)]
pub struct DocxLimits {
    /// Most entries in the package.
    pub max_entries: usize,
    /// Most bytes the XML parts this reads may inflate to, together.
    pub max_part_bytes: u64,
}

impl Default for DocxLimits {
    fn default() -> Self {
        Self {
            max_entries: 10_000,
            max_part_bytes: 64 << 20,
        }
    }
}

/// A package, its text parts parsed.
pub struct DocxJob {
    package: Vec<u8>,
    parts: Vec<Part>,
}

/// The package's parts with text this translates: its main document (the one `_rels/.rels`
/// names, as Word may write `word/document2.xml`) and the headers, footers, foot- and
/// endnotes its relationships name; by their usual names where the package has no
/// relationships to read.
fn text_parts(
    archive: &mut zip::ZipArchive<Cursor<&[u8]>>,
    names: &[String],
) -> anyhow::Result<Vec<String>> {
    let relationships = |archive: &mut zip::ZipArchive<Cursor<&[u8]>>, part: &str| {
        let (dir, file) = part.rsplit_once('/').unwrap_or(("", part));
        let rels = match dir {
            "" => format!("_rels/{file}.rels"),
            dir => format!("{dir}/_rels/{file}.rels"),
        };
        let mut xml = Vec::new();
        let read = archive.by_name(&rels).ok().and_then(|entry| {
            entry
                .take(MOST_RELATIONSHIP_BYTES)
                .read_to_end(&mut xml)
                .ok()
        });
        read.map(|_| {
            relationship_targets(&xml)
                .into_iter()
                .map(|(kind, target)| (kind, resolve_target(dir, &target)))
                .collect::<Vec<_>>()
        })
    };
    let main = relationships(archive, "")
        .and_then(|rels| {
            rels.into_iter()
                .find(|(kind, _)| kind.ends_with("/officeDocument"))
                .map(|(_, target)| target)
        })
        .filter(|main| names.contains(main))
        .unwrap_or_else(|| MAIN_PART.to_string());
    if !names.contains(&main) {
        bail!("it has no {MAIN_PART} (nor a main document its _rels/.rels names)");
    }
    let related = relationships(archive, &main).unwrap_or_default();
    let mut parts = vec![main];
    if related.is_empty() {
        parts.extend(names.iter().filter(|n| is_usual_text_part(n)).cloned());
    }
    for (kind, target) in related {
        let text = ["/header", "/footer", "/footnotes", "/endnotes"]
            .iter()
            .any(|k| kind.ends_with(k));
        if text && names.contains(&target) && !parts.contains(&target) {
            parts.push(target);
        }
    }
    parts.dedup();
    Ok(parts)
}

/// Where Word keeps the main document.
const MAIN_PART: &str = "word/document.xml";

/// The most bytes of a relationships part read.
const MOST_RELATIONSHIP_BYTES: u64 = 1 << 20;

/// The (type, target) of each `Relationship` of a relationships part.
fn relationship_targets(xml: &[u8]) -> Vec<(String, String)> {
    let mut reader = quick_xml::Reader::from_reader(xml);
    let mut found = Vec::new();
    let mut buffer = Vec::new();
    loop {
        match reader.read_event_into(&mut buffer) {
            Ok(quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e))
                if e.local_name().as_ref() == b"Relationship" =>
            {
                let value = |key: &[u8]| {
                    e.attributes()
                        .flatten()
                        .find(|a| a.key.local_name().as_ref() == key)
                        .and_then(|a| a.unescape_value().ok().map(|v| v.into_owned()))
                };
                let external = value(b"TargetMode").is_some_and(|m| m == "External");
                if let (Some(kind), Some(target), false) =
                    (value(b"Type"), value(b"Target"), external)
                {
                    found.push((kind, target));
                }
            }
            Ok(quick_xml::events::Event::Eof) | Err(_) => break,
            _ => {}
        }
        buffer.clear();
    }
    found
}

/// A relationship's target as a part name: absolute (`/word/x.xml`) or relative to the
/// source part's folder `dir`, `..` resolved.
fn resolve_target(dir: &str, target: &str) -> String {
    let joined = match target.strip_prefix('/') {
        Some(absolute) => absolute.to_string(),
        None if dir.is_empty() => target.to_string(),
        None => format!("{dir}/{target}"),
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    parts.join("/")
}

/// Whether `name` is a part with text by Word's usual names (for a package without
/// relationships).
fn is_usual_text_part(name: &str) -> bool {
    let Some(file) = name.strip_prefix("word/") else {
        return false;
    };
    let numbered = |prefix: &str| {
        file.strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(".xml"))
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
    };
    matches!(file, "footnotes.xml" | "endnotes.xml") || numbered("header") || numbered("footer")
}

impl DocxJob {
    /// Reads the package and parses its text parts; `file` names it in errors.
    pub fn parse(package: Vec<u8>, file: &str, limits: DocxLimits) -> anyhow::Result<Self> {
        let mut archive = zip::ZipArchive::new(Cursor::new(package.as_slice()))
            .with_context(|| format!("{file} is not a .docx: not a zip package"))?;
        if archive.len() > limits.max_entries {
            bail!(
                "{file} has {} entries, more than the {} a .docx may have here",
                archive.len(),
                limits.max_entries
            );
        }
        let names: Vec<String> = archive
            .file_names()
            .map(|name| name.map(|n| n.into_owned()))
            .collect::<Result<_, _>>()
            .with_context(|| format!("{file}: an entry name that is not UTF-8"))?;
        let text_parts = text_parts(&mut archive, &names)
            .map_err(|e| anyhow::anyhow!("{file} is not a .docx (Word) package: {e}"))?;
        let mut parts = Vec::new();
        // What the parts may still inflate to: the limit holds for all of them together.
        let mut budget = limits.max_part_bytes;
        for name in &text_parts {
            let entry = archive
                .by_name(name)
                .with_context(|| format!("{file}: reading {name}"))?;
            if entry.size() > budget {
                bail!(
                    "{file}: {name} inflates to {} bytes, more than the {} allowed for the \
                     text parts together",
                    entry.size(),
                    limits.max_part_bytes
                );
            }
            let mut xml = Vec::new();
            // The header's size can lie: never inflate more than the limit.
            entry
                .take(budget + 1)
                .read_to_end(&mut xml)
                .with_context(|| format!("{file}: inflating {name}"))?;
            if xml.len() as u64 > budget {
                bail!(
                    "{file}: {name} inflates to more than the {} bytes allowed for the text \
                     parts together",
                    limits.max_part_bytes
                );
            }
            budget -= xml.len() as u64;
            parts.push(Part::parse(name, &xml).with_context(|| format!("{file}: {name}"))?);
        }
        drop(archive);
        Ok(Self { package, parts })
    }

    /// The package with each text part rewritten and every other entry copied raw.
    fn write(&self, translated: Vec<Vec<u8>>) -> anyhow::Result<Vec<u8>> {
        let mut archive = zip::ZipArchive::new(Cursor::new(self.package.as_slice()))?;
        let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let mut translated: std::collections::HashMap<&str, Vec<u8>> = self
            .parts
            .iter()
            .map(|p| p.name.as_str())
            .zip(translated)
            .collect();
        for i in 0..archive.len() {
            let entry = archive.by_index_raw(i)?;
            let name = entry.name()?.into_owned();
            match translated.remove(name.as_str()) {
                Some(xml) => {
                    let options = zip::write::SimpleFileOptions::default()
                        .compression_method(zip::CompressionMethod::Deflated)
                        .last_modified_time(entry.last_modified().unwrap_or_default());
                    drop(entry);
                    out.start_file(name, options)?;
                    out.write_all(&xml)?;
                }
                None => out.raw_copy_file(entry)?,
            }
        }
        Ok(out.finish()?.into_inner())
    }
}

impl TextJob for DocxJob {
    fn extract(&self) -> Extracted {
        Extracted::from_groups(
            self.parts
                .iter()
                .flat_map(|p| p.blocks.iter().map(|b| b.inline.requests())),
        )
    }

    fn finish(self: Box<Self>, translations: Vec<Vec<String>>) -> anyhow::Result<Vec<u8>> {
        let mut translations = translations.into_iter();
        let mut xml = Vec::with_capacity(self.parts.len());
        for part in &self.parts {
            let own: Vec<Vec<String>> = translations.by_ref().take(part.blocks.len()).collect();
            xml.push(
                part.write(&own)
                    .with_context(|| format!("writing {}", part.name))?,
            );
        }
        self.write(xml)
    }
}

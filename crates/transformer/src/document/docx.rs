//! Word documents (`.docx`, Office Open XML): the text of each paragraph's runs translated,
//! everything else of the package written back byte for byte. The parts that hold text
//! (the body, headers, footers, foot- and endnotes) are read event by event (quick-xml) and
//! written back event by event, so that only the text inside `<w:t>` changes. A run's
//! formatting (`<w:rPr>`, bold or a font) is a mark that moves with the words it covers
//! ([`InlineBlock`]); tabs, breaks, fields, drawings and hyperlinks end a block.

use std::io::{Cursor, Read, Write};

use anyhow::{bail, Context};
use quick_xml::events::{BytesStart, BytesText, Event};
use quick_xml::{Reader, Writer};

use super::inline::{InlineBlock, Piece};
use super::{Extracted, TextJob};

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

/// One XML part whose text is translated.
struct Part {
    name: String,
    events: Vec<Event<'static>>,
    blocks: Vec<Block>,
}

/// One stretch of a paragraph's text: the `<w:t>` elements of consecutive runs.
struct Block {
    /// Each `<w:t>`: the index of its text's first event and of its end tag, and its run's
    /// formatting.
    slots: Vec<Slot>,
    inline: InlineBlock<Vec<u8>>,
    /// The formatting that reads as the block's own (the one with the most characters).
    base: Vec<u8>,
}

struct Slot {
    /// Index of the `<w:t>` start event.
    start: usize,
    /// Index of its `</w:t>`.
    end: usize,
    format: Vec<u8>,
}

/// Whether `name` is a part with text this translates.
fn is_text_part(name: &str) -> bool {
    let Some(file) = name.strip_prefix("word/") else {
        return false;
    };
    let numbered = |prefix: &str| {
        file.strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(".xml"))
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
    };
    matches!(file, "document.xml" | "footnotes.xml" | "endnotes.xml")
        || numbered("header")
        || numbered("footer")
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
        if !names.iter().any(|n| n == "word/document.xml") {
            bail!("{file} is not a .docx (Word) package: it has no word/document.xml");
        }
        let mut parts = Vec::new();
        // What the parts may still inflate to: the limit holds for all of them together.
        let mut budget = limits.max_part_bytes;
        for name in names.iter().filter(|n| is_text_part(n)) {
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

/// The elements that may sit between two runs of one block without ending it.
fn between_runs(name: &[u8]) -> bool {
    matches!(
        name,
        b"w:r"
            | b"w:rPr"
            | b"w:proofErr"
            | b"w:bookmarkStart"
            | b"w:bookmarkEnd"
            | b"w:lastRenderedPageBreak"
    )
}

impl Part {
    fn parse(name: &str, xml: &[u8]) -> anyhow::Result<Self> {
        let mut reader = Reader::from_reader(xml);
        let mut buffer = Vec::new();
        let mut events = Vec::new();
        let mut open: Vec<Vec<u8>> = Vec::new();
        loop {
            let position = reader.buffer_position();
            let event = reader
                .read_event_into(&mut buffer)
                .with_context(|| format!("malformed XML at byte {position}"))?;
            match &event {
                Event::Eof => break,
                Event::Start(e) => open.push(e.name().as_ref().to_vec()),
                Event::End(_) => {
                    open.pop();
                }
                _ => {}
            }
            if let Event::DocType(_) = event {
                bail!("malformed part: a DOCTYPE (Word never writes one)");
            }
            events.push(event.into_owned());
            buffer.clear();
        }
        if let Some(unclosed) = open.last() {
            bail!(
                "malformed XML: it ends inside <{}>",
                String::from_utf8_lossy(unclosed)
            );
        }
        let root = events.iter().find(|e| {
            !matches!(e, Event::Decl(_) | Event::Comment(_) | Event::PI(_))
                && !matches!(e, Event::Text(t) if t.iter().all(u8::is_ascii_whitespace))
        });
        if !matches!(root, Some(Event::Start(_) | Event::Empty(_))) {
            bail!("malformed XML: the part has no root element");
        }
        let blocks = find_blocks(&events)?;
        Ok(Self {
            name: name.to_string(),
            events,
            blocks,
        })
    }

    /// The part with each block's `<w:t>` texts replaced.
    fn write(&self, translations: &[Vec<String>]) -> anyhow::Result<Vec<u8>> {
        // Slot start index -> (its text, its end index).
        let mut replaced = std::collections::HashMap::new();
        for (block, translations) in self.blocks.iter().zip(translations) {
            for (slot, text) in block.slots.iter().zip(block.place(translations)) {
                replaced.insert(slot.start, (text, slot.end));
            }
        }
        let mut writer = Writer::new(Vec::new());
        let mut i = 0;
        while i < self.events.len() {
            match (replaced.get(&i), &self.events[i]) {
                (Some((text, end)), Event::Start(start)) => {
                    writer.write_event(Event::Start(preserving_space(start, text)))?;
                    writer.write_event(Event::Text(BytesText::new(text)))?;
                    writer.write_event(self.events[*end].borrow())?;
                    i = end + 1;
                }
                (_, event) => {
                    writer.write_event(event.borrow())?;
                    i += 1;
                }
            }
        }
        Ok(writer.into_inner())
    }
}

/// `<w:t>` with `xml:space="preserve"` added when `text` starts or ends with a space (Word
/// drops such spaces otherwise), else as it was.
fn preserving_space(start: &BytesStart<'_>, text: &str) -> BytesStart<'static> {
    let mut start = start.clone().into_owned();
    let needs = text.starts_with(char::is_whitespace) || text.ends_with(char::is_whitespace);
    let has = start
        .attributes()
        .flatten()
        .any(|a| a.key.as_ref() == b"xml:space");
    if needs && !has {
        start.push_attribute(("xml:space", "preserve"));
    }
    start
}

/// The text of the `<w:t>` whose start event is `events[start]`, and its end's index.
fn slot_text(events: &[Event<'static>], start: usize) -> anyhow::Result<(String, usize)> {
    let mut text = String::new();
    for (i, event) in events.iter().enumerate().skip(start + 1) {
        match event {
            Event::Text(t) => text.push_str(&t.decode()?),
            Event::CData(c) => text.push_str(&c.decode()?),
            Event::GeneralRef(r) => {
                if let Some(c) = r.resolve_char_ref()? {
                    text.push(c);
                } else {
                    let name = r.decode()?;
                    let Some(value) = quick_xml::escape::resolve_predefined_entity(&name) else {
                        bail!("malformed part: unknown entity &{name}; in a <w:t>");
                    };
                    text.push_str(value);
                }
            }
            Event::End(e) if e.name().as_ref() == b"w:t" => return Ok((text, i)),
            _ => bail!("malformed part: markup inside a <w:t>"),
        }
    }
    bail!("malformed part: a <w:t> that never ends")
}

/// Every block of the part: `<w:t>` elements of runs that follow each other, broken by
/// anything but run boundaries, run formatting, bookmarks and proofing marks.
fn find_blocks(events: &[Event<'static>]) -> anyhow::Result<Vec<Block>> {
    let mut blocks = Vec::new();
    let mut slots: Vec<(Slot, String)> = Vec::new();
    // The formatting of the run being read: the raw events of its <w:rPr>.
    let mut format: Vec<u8> = Vec::new();
    let mut in_format = 0usize;
    let mut i = 0;
    while i < events.len() {
        let event = &events[i];
        if in_format > 0 {
            match event {
                Event::Start(_) => in_format += 1,
                Event::End(_) => in_format -= 1,
                _ => {}
            }
            format.extend_from_slice(&raw(event));
            i += 1;
            continue;
        }
        match event {
            Event::Start(e) if e.name().as_ref() == b"w:t" => {
                let (text, end) = slot_text(events, i)?;
                slots.push((
                    Slot {
                        start: i,
                        end,
                        format: format.clone(),
                    },
                    text,
                ));
                i = end + 1;
                continue;
            }
            Event::Start(e) if e.name().as_ref() == b"w:rPr" => {
                format = raw(event);
                in_format = 1;
            }
            Event::Empty(e) if e.name().as_ref() == b"w:rPr" => format = raw(event),
            Event::Start(e) if e.name().as_ref() == b"w:r" => format.clear(),
            Event::Start(e) | Event::Empty(e) if between_runs(e.name().as_ref()) => {}
            Event::End(e) if between_runs(e.name().as_ref()) => {}
            Event::Text(t) if t.iter().all(u8::is_ascii_whitespace) => {}
            _ => close_block(&mut slots, &mut blocks),
        }
        i += 1;
    }
    close_block(&mut slots, &mut blocks);
    Ok(blocks)
}

fn raw(event: &Event<'_>) -> Vec<u8> {
    let mut writer = Writer::new(Vec::new());
    // Writing into a Vec cannot fail.
    let _ = writer.write_event(event.borrow());
    writer.into_inner()
}

fn close_block(slots: &mut Vec<(Slot, String)>, blocks: &mut Vec<Block>) {
    let slots = std::mem::take(slots);
    if slots.iter().all(|(_, text)| text.trim().is_empty()) {
        return;
    }
    let mut characters: Vec<(&[u8], usize)> = Vec::new();
    for (slot, text) in &slots {
        match characters
            .iter_mut()
            .find(|(f, _)| *f == slot.format.as_slice())
        {
            Some((_, n)) => *n += text.chars().count(),
            None => characters.push((&slot.format, text.chars().count())),
        }
    }
    let base = characters
        .iter()
        .max_by_key(|(_, n)| *n)
        .map(|(f, _)| f.to_vec())
        .unwrap_or_default();
    let pieces = slots
        .iter()
        .map(|(slot, text)| {
            let mark = (slot.format != base).then(|| slot.format.clone());
            Piece::new(mark, text.as_str())
        })
        .collect();
    let (slots, _): (Vec<Slot>, Vec<String>) = slots.into_iter().unzip();
    blocks.push(Block {
        slots,
        inline: InlineBlock::new(pieces, false),
        base,
    });
}

impl Block {
    /// The text of each slot: the translated pieces placed, in order, into slots of their
    /// formatting. Runs are not moved, so a translation that puts marked words in another
    /// order than the source is placed piece by piece instead.
    fn place(&self, translations: &[String]) -> Vec<String> {
        let carried = self.inline.carry(translations);
        if let Some(texts) = self.fit(&carried) {
            return texts;
        }
        let own = self.inline.carry_each_alone(translations);
        self.fit(&own).unwrap_or_else(|| {
            // Cannot happen (the pieces are the slots' own, in order); keep the whole
            // translation in the first slot rather than lose it.
            let mut texts = vec![String::new(); self.slots.len()];
            texts[0] = carried.iter().map(|p| p.text.as_str()).collect();
            texts
        })
    }

    /// Assigns each piece to the next slot with its formatting; blank pieces join the slot
    /// before. `None` when the order does not fit.
    fn fit(&self, pieces: &[Piece<Vec<u8>>]) -> Option<Vec<String>> {
        let mut texts = vec![String::new(); self.slots.len()];
        let mut current: Option<usize> = None;
        // Blank text before the first slot is chosen goes into that slot.
        let mut pending = String::new();
        for piece in pieces {
            let format = piece.mark.as_ref().unwrap_or(&self.base);
            if let Some(c) = current {
                // Spaces and punctuation may take the formatting of the run before them.
                let wordless = !piece.text.chars().any(char::is_alphanumeric);
                if &self.slots[c].format == format || wordless {
                    texts[c].push_str(&piece.text);
                    continue;
                }
            } else if piece.text.trim().is_empty() {
                pending.push_str(&piece.text);
                continue;
            }
            let from = current.map_or(0, |c| c + 1);
            let next = (from..self.slots.len()).find(|&s| &self.slots[s].format == format)?;
            texts[next].push_str(&std::mem::take(&mut pending));
            texts[next].push_str(&piece.text);
            current = Some(next);
        }
        if let Some(first) = texts.first_mut() {
            first.insert_str(0, &pending);
        }
        Some(texts)
    }
}

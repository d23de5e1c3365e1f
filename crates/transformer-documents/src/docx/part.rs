//! One XML part of the package (the body, a header, a footer, the notes): its events read
//! and checked, each element named by its namespace (WordprocessingML's under whatever prefix
//! the file binds it to: `w:`, a default namespace, ElementTree's `ns0:`), and written back
//! with only the text inside each block's `<w:t>` replaced.

use anyhow::{bail, Context};
use quick_xml::events::{BytesStart, BytesText, Event};
use quick_xml::name::ResolveResult;
use quick_xml::{NsReader, Writer};

use super::blocks::{find_blocks, Block, WordName};

/// WordprocessingML's namespaces: the transitional one every Word writes, and ISO 29500
/// strict's.
const WORDPROCESSING_ML: [&[u8]; 2] = [
    b"http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    b"http://purl.oclc.org/ooxml/wordprocessingml/main",
];

/// One XML part whose text is translated.
pub(super) struct Part {
    pub(super) name: String,
    events: Vec<Event<'static>>,
    pub(super) blocks: Vec<Block>,
}

impl Part {
    pub(super) fn parse(name: &str, xml: &[u8]) -> anyhow::Result<Self> {
        // Word writes UTF-8; a part in UTF-16 would read as NULs between its letters.
        let utf16 = xml.starts_with(&[0xFF, 0xFE])
            || xml.starts_with(&[0xFE, 0xFF])
            || xml.first() == Some(&0)
            || xml.get(1) == Some(&0);
        if utf16 {
            bail!("the part is UTF-16; this reads parts in UTF-8, as Word writes them");
        }
        let mut reader = NsReader::from_reader(xml);
        let mut buffer = Vec::new();
        let mut events = Vec::new();
        // Each event's element as WordprocessingML names it (`Other` for everything else).
        let mut names = Vec::new();
        let mut open: Vec<Vec<u8>> = Vec::new();
        loop {
            let position = reader.buffer_position();
            let (namespace, event) = reader
                .read_resolved_event_into(&mut buffer)
                .with_context(|| format!("malformed XML at byte {position}"))?;
            let word_name = match (&namespace, &event) {
                (ResolveResult::Unknown(prefix), _) => bail!(
                    "malformed XML at byte {position}: the prefix {}: is not declared \
                     (no xmlns:{0} names its namespace)",
                    String::from_utf8_lossy(prefix)
                ),
                (ResolveResult::Bound(ns), Event::Start(e) | Event::Empty(e))
                    if WORDPROCESSING_ML.contains(&ns.as_ref()) =>
                {
                    WordName::of(e.local_name().as_ref())
                }
                (ResolveResult::Bound(ns), Event::End(e))
                    if WORDPROCESSING_ML.contains(&ns.as_ref()) =>
                {
                    WordName::of(e.local_name().as_ref())
                }
                _ => WordName::Other,
            };
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
            names.push(word_name);
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
        let blocks = find_blocks(&events, &names)?;
        Ok(Self {
            name: name.to_string(),
            events,
            blocks,
        })
    }

    /// The part with each block's `<w:t>` texts replaced.
    pub(super) fn write(&self, translations: &[Vec<String>]) -> anyhow::Result<Vec<u8>> {
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

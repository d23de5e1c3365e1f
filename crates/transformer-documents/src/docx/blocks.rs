//! A part's blocks: the `<w:t>` texts of consecutive runs, each run's formatting (`<w:rPr>`)
//! a mark; and a block's translation placed back into its runs, piece by piece into runs of
//! the same formatting.

use anyhow::bail;
use quick_xml::events::Event;
use quick_xml::Writer;

use crate::inline::{InlineBlock, Piece};

/// One stretch of a paragraph's text: the `<w:t>` elements of consecutive runs.
pub(super) struct Block {
    /// Each `<w:t>`: the index of its text's first event and of its end tag, and its run's
    /// formatting.
    pub(super) slots: Vec<Slot>,
    pub(super) inline: InlineBlock<Vec<u8>>,
    /// The formatting that reads as the block's own (the one with the most characters).
    base: Vec<u8>,
}

pub(super) struct Slot {
    /// Index of the `<w:t>` start event.
    pub(super) start: usize,
    /// Index of its `</w:t>`.
    pub(super) end: usize,
    format: Vec<u8>,
}

/// A WordprocessingML element this reads, by its local name in that namespace (whatever
/// prefix the part binds it to); `Other` for every other element, event or namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WordName {
    /// `<w:t>`: a run's text.
    Text,
    /// `<w:r>`: a run.
    Run,
    /// `<w:rPr>`: a run's formatting.
    RunFormat,
    /// Elements that may sit between two runs of one block without ending it (see
    /// [`WordName::of`]).
    BetweenRuns,
    Other,
}

impl WordName {
    /// The element WordprocessingML calls `local`.
    pub(super) fn of(local: &[u8]) -> Self {
        match local {
            b"t" => Self::Text,
            b"r" => Self::Run,
            b"rPr" => Self::RunFormat,
            // Marks inside a sentence: proofing, bookmarks, a page break as rendered; a
            // hyperlink, a tracked insertion or deletion and smart tags around some of its
            // runs; a soft or non-breaking hyphen inside a word.
            b"proofErr"
            | b"bookmarkStart"
            | b"bookmarkEnd"
            | b"lastRenderedPageBreak"
            | b"hyperlink"
            | b"ins"
            | b"del"
            | b"smartTag"
            | b"customXml"
            | b"softHyphen"
            | b"noBreakHyphen" => Self::BetweenRuns,
            _ => Self::Other,
        }
    }

    fn between_runs(self) -> bool {
        matches!(self, Self::Run | Self::RunFormat | Self::BetweenRuns)
    }
}

/// The text of the `<w:t>` whose start event is `events[start]`, and its end's index.
fn slot_text(
    events: &[Event<'static>],
    names: &[WordName],
    start: usize,
) -> anyhow::Result<(String, usize)> {
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
            Event::End(_) if names[i] == WordName::Text => return Ok((text, i)),
            // A comment or instruction inside the text is no text; it goes with the text.
            Event::Comment(_) | Event::PI(_) => {}
            _ => bail!("malformed part: markup inside a <w:t>"),
        }
    }
    bail!("malformed part: a <w:t> that never ends")
}

/// Every block of the part: `<w:t>` elements of runs that follow each other, broken by
/// anything but run boundaries, run formatting, bookmarks and proofing marks.
/// `names[i]` is `events[i]`'s element as WordprocessingML names it.
pub(super) fn find_blocks(
    events: &[Event<'static>],
    names: &[WordName],
) -> anyhow::Result<Vec<Block>> {
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
        match (event, names[i]) {
            (Event::Start(_), WordName::Text) => {
                let (text, end) = slot_text(events, names, i)?;
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
            (Event::Start(_), WordName::RunFormat) => {
                format = raw(event);
                in_format = 1;
            }
            (Event::Empty(_), WordName::RunFormat) => format = raw(event),
            // An empty `<w:t/>` holds no text and ends nothing.
            (Event::Empty(_), WordName::Text) => {}
            (Event::Start(_), WordName::Run) => format.clear(),
            (Event::Start(_) | Event::Empty(_) | Event::End(_), name) if name.between_runs() => {}
            (Event::Text(t), _) if t.iter().all(u8::is_ascii_whitespace) => {}
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
    pub(super) fn place(&self, translations: &[String]) -> Vec<String> {
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

//! Plain text files: UTF-8 (a byte-order mark is kept), translated as one text whose lines
//! and sentences the sentence layer cuts.

use anyhow::bail;

use super::{Extracted, TextJob};

pub struct PlainTextJob {
    text: String,
    bom: bool,
}

impl PlainTextJob {
    pub fn parse(bytes: Vec<u8>, name: &str) -> anyhow::Result<Self> {
        let bom = bytes.starts_with(b"\xef\xbb\xbf");
        let mut bytes = bytes;
        if bom {
            bytes.drain(..3);
        }
        match String::from_utf8(bytes) {
            Ok(text) => Ok(Self { text, bom }),
            Err(e) => bail!(
                "{name} is not UTF-8 text (byte {} is not); convert it, e.g. with iconv -t UTF-8",
                e.utf8_error().valid_up_to() + if bom { 3 } else { 0 }
            ),
        }
    }
}

impl TextJob for PlainTextJob {
    fn extract(&self) -> Extracted {
        Extracted::from_groups([vec![self.text.clone()]])
    }

    fn finish(self: Box<Self>, translations: Vec<Vec<String>>) -> anyhow::Result<Vec<u8>> {
        let text = translations
            .into_iter()
            .flatten()
            .next()
            .unwrap_or_default();
        let mut out = Vec::with_capacity(text.len() + 3);
        if self.bom {
            out.extend_from_slice(b"\xef\xbb\xbf");
        }
        out.extend_from_slice(text.as_bytes());
        Ok(out)
    }
}

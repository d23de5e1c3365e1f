//! An HTML file's encoding: read from its byte-order mark or `<meta charset>` (else guessed
//! as browsers do) and written back in it.

use super::HtmlJob;
use crate::{Extracted, TextJob};

/// An HTML file in the encoding it declares, written back in the same encoding (characters
/// the encoding lacks as numeric character references, the WHATWG encoder's rule).
pub struct HtmlFileJob {
    inner: HtmlJob,
    encoding: &'static encoding_rs::Encoding,
    bom: bool,
}

impl HtmlFileJob {
    /// Reads the encoding from a byte-order mark, else from a `<meta charset>` near the top,
    /// else UTF-8 where the bytes are UTF-8, else windows-1252 (what browsers assume).
    pub fn parse(bytes: &[u8]) -> anyhow::Result<Self> {
        let (encoding, bom) = match encoding_rs::Encoding::for_bom(bytes) {
            Some((encoding, length)) => (encoding, length),
            None => (
                declared_encoding(bytes).unwrap_or_else(|| {
                    if std::str::from_utf8(bytes).is_ok() {
                        encoding_rs::UTF_8
                    } else {
                        encoding_rs::WINDOWS_1252
                    }
                }),
                0,
            ),
        };
        let (text, _) = encoding.decode_without_bom_handling(&bytes[bom..]);
        Ok(Self {
            inner: HtmlJob::parse(&text)?,
            encoding,
            bom: bom > 0,
        })
    }
}

impl TextJob for HtmlFileJob {
    fn extract(&self) -> Extracted {
        self.inner.extract()
    }

    fn finish(self: Box<Self>, translations: Vec<Vec<String>>) -> anyhow::Result<Vec<u8>> {
        let Self {
            inner,
            encoding,
            bom,
        } = *self;
        let html = String::from_utf8(Box::new(inner).finish(translations)?)?;
        // UTF-16 is written as UTF-8 by the encoder; its mark must say so.
        let (bytes, written, _) = encoding.encode(&html);
        let mut out = Vec::with_capacity(bytes.len() + 3);
        if bom && written == encoding_rs::UTF_8 {
            out.extend_from_slice(b"\xef\xbb\xbf");
        }
        out.extend_from_slice(&bytes);
        Ok(out)
    }
}

/// The charset a `<meta>` in the first 1024 bytes declares (a simplified form of the HTML
/// standard's prescan).
fn declared_encoding(bytes: &[u8]) -> Option<&'static encoding_rs::Encoding> {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(1024)]).to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = head[from..].find("<meta") {
        let start = from + at;
        let end = head[start..].find('>').map_or(head.len(), |e| start + e);
        let tag = &head[start..end];
        if let Some(c) = tag.find("charset") {
            let value = tag[c + "charset".len()..]
                .trim_start()
                .strip_prefix('=')?
                .trim_start()
                .trim_start_matches(['"', '\'']);
            let label: String = value
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "-_:.".contains(*c))
                .collect();
            // A page that declares UTF-16 in ASCII bytes cannot be UTF-16.
            return encoding_rs::Encoding::for_label(label.as_bytes()).map(|e| {
                if e == encoding_rs::UTF_16LE || e == encoding_rs::UTF_16BE {
                    encoding_rs::UTF_8
                } else {
                    e
                }
            });
        }
        from = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latin1_page_is_written_back_in_latin1() {
        let source = b"<html><head><meta charset=\"iso-8859-1\"></head><body><p>gr\xfc\xdfe</p></body></html>";
        let job = Box::new(HtmlFileJob::parse(source).unwrap());
        let texts = job.extract();
        assert_eq!(texts.groups, [vec!["gr\u{fc}\u{df}e".to_string()]]);
        let out = job
            .finish(vec![vec!["gr\u{fc}\u{df}e \u{2603}".into()]])
            .unwrap();
        assert!(
            out.windows(13).any(|w| w == b"gr\xfc\xdfe &#9731;"),
            "{}",
            String::from_utf8_lossy(&out)
        );
    }
}

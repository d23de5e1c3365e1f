//! HTML: the text of each block translated, the markup kept. The page is parsed as a browser
//! parses it (html5ever, through scraper's tree); each run of text and inline elements
//! between block boundaries is one [`InlineBlock`](super::inline::InlineBlock), whose inline
//! elements (`<b>`, `<a>`, `<span>` around a single text) move to the words they translate
//! to. `script`, `style`, `code`, `pre` and anything marked `translate="no"` are left as they
//! are; entities are decoded by the parser and written back by its serializer.
//!
//! `blocks` decides which nodes form a block; `encoding` reads and writes a file's
//! encoding around the page.

mod blocks;
mod depth;
mod encoding;

use scraper::node::Text;
use scraper::{Html, Node};

use super::{Extracted, TextJob};
use blocks::{Block, Marked};

pub use encoding::HtmlFileJob;

/// Deepest nesting a page may have: deeper pages are refused (nothing sensible is that deep,
/// and walking it costs stack).
pub const MAX_DEPTH: usize = 512;

/// Most elements a page's tree may hold: 2 MB of markup makes at most about 500,000.
pub const MAX_ELEMENTS: usize = 2_000_000;

/// Most attributes one tag may have.
pub const MAX_ATTRIBUTES: usize = 1024;

/// A parsed page (or fragment) and the blocks whose text is translated.
pub struct HtmlJob {
    html: Html,
    fragment: bool,
    blocks: Vec<Block>,
}

impl HtmlJob {
    /// Parses `source`: a whole page when it starts with a doctype or `<html>`, else a
    /// fragment (what LibreTranslate's `format=html` clients send), which stays one. A page
    /// nested deeper than [`MAX_DEPTH`] is refused.
    pub fn parse(source: &str) -> anyhow::Result<Self> {
        // Measured from the tags first, in linear time: the tree builder's work grows with
        // the depth at each tag, and its tree with the formatting elements it reopens.
        let shape = depth::measure(source);
        if shape.attributes > MAX_ATTRIBUTES {
            anyhow::bail!(
                "a tag of the page has {} attributes, more than the {MAX_ATTRIBUTES} a tag may \
                 have",
                shape.attributes
            );
        }
        if shape.deepest > MAX_DEPTH {
            anyhow::bail!("the page nests elements more than {MAX_DEPTH} deep; flatten it first");
        }
        if shape.elements > MAX_ELEMENTS {
            anyhow::bail!(
                "the page would make more than {MAX_ELEMENTS} elements (unclosed formatting \
                 elements such as <b> or <i> are reopened in every block that follows); close \
                 them first"
            );
        }
        let fragment = !looks_like_document(source);
        let html = if fragment {
            Html::parse_fragment(source)
        } else {
            Html::parse_document(source)
        };
        let mut depth = 0usize;
        for edge in html.tree.root().traverse() {
            match edge {
                ego_tree::iter::Edge::Open(_) => depth += 1,
                ego_tree::iter::Edge::Close(_) => depth -= 1,
            }
            if depth > MAX_DEPTH {
                anyhow::bail!(
                    "the page nests elements more than {MAX_DEPTH} deep; flatten it first"
                );
            }
        }
        let mut job = Self {
            html,
            fragment,
            blocks: Vec::new(),
        };
        let root = job.html.tree.root().id();
        job.collect(root);
        Ok(job)
    }

    /// Replaces each block's nodes with its translated pieces.
    fn apply(&mut self, translations: &[Vec<String>]) {
        for (block, translations) in self.blocks.iter().zip(translations) {
            let pieces = block.inline.carry(translations);
            let tree = &mut self.html.tree;
            let first = block.nodes[0];
            let anchor = tree
                .get_mut(first)
                .expect("ids come from this tree")
                .insert_before(Node::Text(Text { text: "".into() }))
                .id();
            for &id in &block.nodes {
                tree.get_mut(id).expect("ids come from this tree").detach();
            }
            for piece in pieces {
                let mut anchor = tree.get_mut(anchor).expect("the anchor is in the tree");
                match piece.mark {
                    None => {
                        anchor.insert_before(Node::Text(Text {
                            text: piece.text.as_str().into(),
                        }));
                    }
                    Some(Marked { element, text }) => {
                        anchor.insert_id_before(element);
                        let text = text.filter(|_| !piece.fixed);
                        if let Some(mut node) = text.and_then(|t| tree.get_mut(t)) {
                            *node.value() = Node::Text(Text {
                                text: piece.text.as_str().into(),
                            });
                        }
                    }
                }
            }
            tree.get_mut(anchor)
                .expect("the anchor is in the tree")
                .detach();
        }
    }

    /// The page written back with scripting on, as it was parsed: the markup inside
    /// `<noscript>` goes back as it came, not escaped.
    fn serialize(&self) -> anyhow::Result<String> {
        use html5ever::serialize::{serialize, SerializeOpts, TraversalScope};
        let options = |traversal_scope| SerializeOpts {
            scripting_enabled: true,
            traversal_scope,
            create_missing_parent: false,
        };
        let mut out = Vec::new();
        if self.fragment {
            serialize(
                &mut out,
                &self.html.root_element(),
                options(TraversalScope::ChildrenOnly(None)),
            )?;
        } else {
            serialize(&mut out, &self.html, options(TraversalScope::IncludeNode))?;
        }
        Ok(String::from_utf8(out)?)
    }
}

impl TextJob for HtmlJob {
    fn extract(&self) -> Extracted {
        Extracted::from_groups(self.blocks.iter().map(|b| b.inline.requests()))
    }

    fn finish(mut self: Box<Self>, translations: Vec<Vec<String>>) -> anyhow::Result<Vec<u8>> {
        self.apply(&translations);
        Ok(self.serialize()?.into_bytes())
    }
}

/// Whether `source` is a whole page (a doctype or `<html>` first) rather than a fragment.
pub fn looks_like_document(source: &str) -> bool {
    let head = source.trim_start_matches('\u{feff}').trim_start();
    // Bytes, not a slice of the text: the 16th byte may fall inside a character.
    let head = head.as_bytes()[..head.len().min(16)].to_ascii_lowercase();
    [&b"<!doctype"[..], b"<html", b"<?xml"]
        .iter()
        .any(|start| head.starts_with(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fragment_of_wide_characters_is_told_from_a_page_without_cutting_one() {
        assert!(!looks_like_document(
            "0\u{80}\u{80}\u{10000}\u{10000}\u{10000}"
        ));
        assert!(looks_like_document("\u{feff}  <!DOCTYPE html><p>ü</p>"));
        assert!(!looks_like_document("<p>𐀀𐀀𐀀𐀀𐀀</p>"));
    }

    /// Translates by upper-casing, which keeps words findable.
    fn upper(source: &str) -> String {
        let job = Box::new(HtmlJob::parse(source).unwrap());
        let texts = job.extract();
        let translated: Vec<Vec<String>> = texts
            .groups
            .iter()
            .map(|g| g.iter().map(|t| t.to_uppercase()).collect())
            .collect();
        String::from_utf8(job.finish(translated).unwrap()).unwrap()
    }

    #[test]
    fn text_is_translated_and_markup_kept() {
        assert_eq!(
            upper(r#"<p class="x">ich <b>mag</b> bier &amp; wein</p><ul><li>eins</li></ul>"#),
            r#"<p class="x">ICH <b>MAG</b> BIER &amp; WEIN</p><ul><li>EINS</li></ul>"#
        );
    }

    #[test]
    fn code_scripts_and_translate_no_are_untouched() {
        let source = "<p>a <code>x = 1</code> b</p><script>var s = 'x';</script>\
                      <p translate=\"no\">keep</p><div class=\"notranslate\">keep</div>";
        assert_eq!(
            upper(source),
            "<p>A <code>x = 1</code> B</p><script>var s = 'x';</script>\
             <p translate=\"no\">keep</p><div class=\"notranslate\">keep</div>"
        );
    }

    #[test]
    fn a_whole_page_keeps_its_doctype_and_head() {
        let out = upper(
            "<!DOCTYPE html><html><head><title>hallo</title></head><body><p>welt</p></body></html>",
        );
        assert_eq!(
            out,
            "<!DOCTYPE html><html><head><title>HALLO</title></head><body><p>WELT</p></body></html>"
        );
    }

    #[test]
    fn footnotes_images_comments_and_noscript_stay_in_place() {
        let out = upper("<p>ein hund<sup>1</sup>. <img src=\"a.png\"> ein <!-- c --> bild</p>");
        for kept in [
            "<sup>1</sup>",
            "<img src=\"a.png\">",
            "<!-- c -->",
            "HUND",
            "BILD",
        ] {
            assert!(out.contains(kept), "{kept}: {out}");
        }
        assert_eq!(
            upper("<noscript><p>ohne skripte</p></noscript>"),
            "<noscript><p>ohne skripte</p></noscript>"
        );
    }

    #[test]
    fn a_page_nested_too_deep_is_refused() {
        let deep = format!(
            "{}x{}",
            "<div>".repeat(MAX_DEPTH + 1),
            "</div>".repeat(MAX_DEPTH + 1)
        );
        let error = HtmlJob::parse(&deep).err().unwrap().to_string();
        assert!(
            error.contains("nests elements more than 512 deep"),
            "{error}"
        );
        let fine = format!("{}x{}", "<div>".repeat(100), "</div>".repeat(100));
        assert!(HtmlJob::parse(&fine).is_ok());
    }

    #[test]
    fn nested_inline_elements_with_several_texts_are_blocks_of_their_own() {
        assert_eq!(
            upper("<p>a <a href=\"/\">b <i>c</i></a> d</p>"),
            "<p>A <a href=\"/\">B <i>C</i></a> D</p>"
        );
    }
}

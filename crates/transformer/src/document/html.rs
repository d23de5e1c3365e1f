//! HTML: the text of each block translated, the markup kept. The page is parsed as a browser
//! parses it (html5ever, through scraper's tree); each run of text and inline elements
//! between block boundaries is one [`InlineBlock`], whose inline elements (`<b>`, `<a>`,
//! `<span>` around a single text) move to the words they translate to. `script`, `style`,
//! `code`, `pre` and anything marked `translate="no"` are left as they are; entities are
//! decoded by the parser and written back by its serializer.

use ego_tree::NodeId;
use scraper::node::Text;
use scraper::{Html, Node};

use super::inline::{InlineBlock, Piece};
use super::{Extracted, TextJob};

/// Elements whose text is never translated: code, styles, scripts, preformatted text.
const UNTOUCHED: &[&str] = &[
    "script", "style", "code", "pre", "kbd", "samp", "var", "textarea", "template", "svg", "math",
    "noscript", "iframe", "object",
];

/// Elements that sit inside a sentence; anything else (`p`, `div`, `li`, `td`, `br`, ...)
/// ends one.
const INLINE: &[&str] = &[
    "a", "abbr", "b", "bdi", "bdo", "cite", "data", "del", "dfn", "em", "font", "i", "ins",
    "label", "mark", "q", "s", "small", "span", "strong", "sub", "sup", "time", "u",
];

/// Of the untouched elements, those that sit inside a sentence: kept as they are, in their
/// place.
const UNTOUCHED_INLINE: &[&str] = &["code", "kbd", "samp", "var", "svg", "math"];

/// Elements with nothing inside that sit inside a sentence.
const EMPTY_INLINE: &[&str] = &["img", "wbr", "input", "embed"];

/// Deepest nesting a page may have: deeper pages are refused (nothing sensible is that deep,
/// and walking it costs stack).
pub const MAX_DEPTH: usize = 512;

/// A parsed page (or fragment) and the blocks whose text is translated.
pub struct HtmlJob {
    html: Html,
    fragment: bool,
    blocks: Vec<Block>,
}

/// One run of text nodes and inline elements inside one parent, in document order.
struct Block {
    /// The run's top-level nodes: text nodes and inline elements.
    nodes: Vec<NodeId>,
    /// Marks are the inline elements (`nodes` entries) that hold a single text node.
    inline: InlineBlock<Marked>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Marked {
    element: NodeId,
    /// The one text node inside, which takes the translation; none for a node kept whole.
    text: Option<NodeId>,
}

impl HtmlJob {
    /// Parses `source`: a whole page when it starts with a doctype or `<html>`, else a
    /// fragment (what LibreTranslate's `format=html` clients send), which stays one. A page
    /// nested deeper than [`MAX_DEPTH`] is refused.
    pub fn parse(source: &str) -> anyhow::Result<Self> {
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

    /// Walks `parent`'s children, cutting runs at every child that is not inline.
    fn collect(&mut self, parent: NodeId) {
        let children: Vec<NodeId> = self.node(parent).children().map(|c| c.id()).collect();
        let mut run: Vec<NodeId> = Vec::new();
        for child in children {
            match self.role(child) {
                Role::Text | Role::Inline | Role::Fixed => run.push(child),
                Role::Boundary { descend } => {
                    self.close_run(std::mem::take(&mut run));
                    if descend {
                        self.collect(child);
                    }
                }
            }
        }
        self.close_run(run);
    }

    fn node(&self, id: NodeId) -> ego_tree::NodeRef<'_, Node> {
        self.html.tree.get(id).expect("ids come from this tree")
    }

    fn role(&self, id: NodeId) -> Role {
        let node = self.node(id);
        match node.value() {
            Node::Text(_) => Role::Text,
            Node::Comment(_) => Role::Fixed,
            Node::Element(element) => {
                let name = element.name();
                let untouched = UNTOUCHED.contains(&name)
                    || element
                        .attr("translate")
                        .is_some_and(|v| v.eq_ignore_ascii_case("no"))
                    || element.has_class(
                        "notranslate",
                        scraper::CaseSensitivity::AsciiCaseInsensitive,
                    );
                let inline = INLINE.contains(&name);
                let textless = !node
                    .descendants()
                    .any(|d| d.value().as_text().is_some_and(|t| !t.trim().is_empty()));
                if untouched && (UNTOUCHED_INLINE.contains(&name) || inline) {
                    Role::Fixed
                } else if untouched {
                    Role::Boundary { descend: false }
                } else if EMPTY_INLINE.contains(&name) || (inline && textless) {
                    Role::Fixed
                } else if inline && self.single_text(id).is_some() {
                    Role::Inline
                } else {
                    Role::Boundary { descend: true }
                }
            }
            Node::Document | Node::Fragment => Role::Boundary { descend: true },
            _ => Role::Boundary { descend: false },
        }
    }

    /// The one text node inside an inline element whose descendants are inline elements
    /// and that text alone; `None` otherwise (such an element is translated inside, as a
    /// block of its own).
    fn single_text(&self, id: NodeId) -> Option<NodeId> {
        let mut text = None;
        for node in self.node(id).descendants().skip(1) {
            match node.value() {
                Node::Text(_) if text.is_none() => text = Some(node.id()),
                Node::Element(e) if INLINE.contains(&e.name()) && e.attr("translate").is_none() => {
                }
                _ => return None,
            }
        }
        text
    }

    fn close_run(&mut self, nodes: Vec<NodeId>) {
        let pieces: Vec<Piece<Marked>> = nodes
            .iter()
            .map(|&id| match (self.node(id).value(), self.role(id)) {
                (Node::Text(text), _) => Piece::new(None, &*text.text),
                (_, Role::Fixed) => {
                    // Its text reads in the sentence the model sees; it is kept as it is.
                    let content: String = self
                        .node(id)
                        .descendants()
                        .filter_map(|d| d.value().as_text().map(|t| t.to_string()))
                        .collect();
                    Piece::fixed(
                        Marked {
                            element: id,
                            text: None,
                        },
                        content,
                    )
                }
                _ => {
                    let text = self.single_text(id).expect("inline nodes hold one text");
                    let content = self.node(text).value().as_text().map_or("", |t| &t.text);
                    let mark = Marked {
                        element: id,
                        text: Some(text),
                    };
                    Piece::new(Some(mark), content)
                }
            })
            .collect();
        let inline = InlineBlock::new(pieces, true);
        if !inline.requests().is_empty() {
            self.blocks.push(Block { nodes, inline });
        }
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

enum Role {
    Text,
    /// An inline element around one text, which moves with its words.
    Inline,
    /// Kept as it is, in its place in the sentence: inline code, an image, a comment, an
    /// inline element without text.
    Fixed,
    Boundary {
        descend: bool,
    },
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

//! Which nodes of the page form the blocks that are translated: each child is text, an
//! inline mark that moves with its words, something kept whole in its place, or a boundary
//! that ends the block (and is walked into or left alone).

use ego_tree::NodeId;
use scraper::Node;

use super::HtmlJob;
use crate::inline::{InlineBlock, Piece};

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

/// One run of text nodes and inline elements inside one parent, in document order.
pub(super) struct Block {
    /// The run's top-level nodes: text nodes and inline elements.
    pub(super) nodes: Vec<NodeId>,
    /// Marks are the inline elements (`nodes` entries) that hold a single text node.
    pub(super) inline: InlineBlock<Marked>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Marked {
    pub(super) element: NodeId,
    /// The one text node inside, which takes the translation; none for a node kept whole.
    pub(super) text: Option<NodeId>,
}

impl HtmlJob {
    /// Walks `parent`'s children, cutting runs at every child that is not inline.
    pub(super) fn collect(&mut self, parent: NodeId) {
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

//! A page's nesting measured from its tags alone, in one linear pass before the tree is
//! built: html5ever's tree builder looks through its stack of open elements at each tag, so
//! a page nested 100,000 deep would cost it tens of seconds of CPU before the depth check
//! on the tree could refuse it.

use std::cell::Cell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer};

/// Elements that never hold others (void), or that the next of their kind closes (an
/// optional end tag): counting them would make `<p>` after `<p>` look nested.
const NOT_NESTING: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr", "p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "thead", "tbody",
    "tfoot", "colgroup", "caption", "rb", "rt", "rtc", "rp",
];

/// The formatting elements the tree builder reopens in each new block while they are
/// unclosed (its list of active formatting elements).
const FORMATTING: &[&str] = &[
    "a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt", "u",
];

/// What one pass over the tags measures of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// The deepest nesting of elements that hold others.
    pub deepest: usize,
    /// An upper bound on the elements the tree builder makes: each tag and run of text, and
    /// the unclosed formatting elements it reopens before each.
    pub elements: usize,
    /// The most attributes one tag has (the tokenizer compares each new attribute's name
    /// with the tag's others: its time grows with their square).
    pub attributes: usize,
}

/// Follows the open elements as the tokens go by: an end tag closes the element it names
/// and those opened inside it, and one that names no open element closes nothing (stray end
/// tags must not hide the depth).
#[derive(Default)]
struct ShapeSink {
    open: std::cell::RefCell<Vec<String>>,
    deepest: Cell<usize>,
    formatting: Cell<usize>,
    elements: Cell<usize>,
    /// Past the depth limit: the page is refused, the rest is not followed.
    beyond: Cell<bool>,
}

impl ShapeSink {
    fn count_elements(&self) {
        let made = 1 + self.formatting.get();
        self.elements.set(self.elements.get().saturating_add(made));
    }
}

impl TokenSink for ShapeSink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        if self.beyond.get() {
            return TokenSinkResult::Continue;
        }
        let tag = match token {
            Token::TagToken(tag) => tag,
            Token::CharacterTokens(_) => {
                self.count_elements();
                return TokenSinkResult::Continue;
            }
            _ => return TokenSinkResult::Continue,
        };
        let name: &str = &tag.name;
        let formatting = FORMATTING.contains(&name);
        match tag.kind {
            TagKind::StartTag => {
                self.count_elements();
                if formatting {
                    self.formatting.set(self.formatting.get() + 1);
                }
                if !NOT_NESTING.contains(&name) {
                    let mut open = self.open.borrow_mut();
                    open.push(name.to_string());
                    self.deepest.set(self.deepest.get().max(open.len()));
                    if open.len() > super::MAX_DEPTH {
                        self.beyond.set(true);
                    }
                }
                // As the tree builder tells its tokenizer: these elements' contents are text.
                match name {
                    "script" => return TokenSinkResult::RawData(RawKind::ScriptData),
                    "style" | "xmp" | "iframe" | "noembed" | "noframes" => {
                        return TokenSinkResult::RawData(RawKind::Rawtext)
                    }
                    "textarea" | "title" => return TokenSinkResult::RawData(RawKind::Rcdata),
                    "plaintext" => return TokenSinkResult::Plaintext,
                    _ => {}
                }
            }
            TagKind::EndTag => {
                let mut open = self.open.borrow_mut();
                // At most MAX_DEPTH names to look through: linear in the page.
                if let Some(at) = open.iter().rposition(|n| n == name) {
                    open.truncate(at);
                    if formatting {
                        self.formatting.set(self.formatting.get().saturating_sub(1));
                    }
                }
            }
        }
        TokenSinkResult::Continue
    }
}

/// The shape of `source` (see [`Shape`]), in one pass over its tags; past
/// [`super::MAX_DEPTH`] the count stops there. A tag with more than
/// [`super::MAX_ATTRIBUTES`] attributes is found first, in a pass over the bytes, as the
/// tokenizer's own pass over it would take its square.
pub fn measure(source: &str) -> Shape {
    let attributes = most_attributes(source);
    if attributes > super::MAX_ATTRIBUTES {
        return Shape {
            deepest: 0,
            elements: 0,
            attributes,
        };
    }
    let tokenizer = Tokenizer::new(ShapeSink::default(), Default::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from(source));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    Shape {
        deepest: tokenizer.sink.deepest.get(),
        elements: tokenizer.sink.elements.get(),
        attributes,
    }
}

/// Elements whose contents are text up to their end tag, not tags.
const RAW_TEXT: &[&str] = &[
    "script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes",
];

/// The most attributes a tag of `source` has: outside comments and raw text, each run of
/// characters after a space inside `<...>`, quoted values skipped.
fn most_attributes(source: &str) -> usize {
    let lower = source.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let find = |from: usize, needle: &str| {
        lower[from.min(bytes.len())..]
            .find(needle)
            .map(|at| from + at)
    };
    let (mut most, mut at) = (0, 0);
    while let Some(open) = find(at, "<") {
        at = open + 1;
        if lower[at..].starts_with("!--") {
            at = find(at, "-->").map_or(bytes.len(), |end| end + 3);
            continue;
        }
        let name_end = at
            + bytes[at..]
                .iter()
                .position(|b| !b.is_ascii_alphanumeric())
                .unwrap_or(bytes.len() - at);
        let name = &lower[at..name_end];
        if name.is_empty() {
            continue;
        }
        let (mut attributes, mut gap) = (0, false);
        at = name_end;
        while at < bytes.len() && bytes[at] != b'>' {
            match bytes[at] {
                b'"' | b'\'' => {
                    let quote = bytes[at];
                    at += 1;
                    at += bytes[at..]
                        .iter()
                        .position(|&b| b == quote)
                        .unwrap_or(bytes.len() - at);
                    gap = false;
                }
                b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' | b'/' => gap = true,
                b'=' => gap = false,
                _ => {
                    if gap {
                        attributes += 1;
                    }
                    gap = false;
                }
            }
            at += 1;
        }
        most = most.max(attributes);
        if RAW_TEXT.contains(&name) {
            at = find(at, &format!("</{name}")).unwrap_or(bytes.len());
        }
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deepest(source: &str) -> usize {
        measure(source).deepest
    }

    #[test]
    fn nesting_counts_elements_that_hold_others_and_not_script_text() {
        assert_eq!(deepest("<div><b>x</b></div><div></div>"), 2);
        assert_eq!(deepest("<p>a<p>b<p>c<ul><li>d<li>e</ul>"), 1);
        assert_eq!(
            deepest("<script>'<div><div><div>'</script><style><div></style>"),
            1
        );
        assert_eq!(deepest(&"<div>".repeat(300)), 300);
    }

    #[test]
    fn stray_end_tags_do_not_hide_the_depth_and_a_deep_page_stops_at_the_limit() {
        // `</x>` closes nothing: the tree builder ignores it, and so does the count.
        assert_eq!(deepest(&"<div></x>".repeat(300)), 300);
        // (The tree builder took 38 s of CPU on 100,000 deep; this pass stops at the limit.)
        assert_eq!(
            deepest(&"<div>".repeat(100_000)),
            super::super::MAX_DEPTH + 1
        );
    }

    #[test]
    fn attributes_are_counted_per_tag_outside_quotes_comments_and_scripts() {
        let attributes = |source: &str| measure(source).attributes;
        assert_eq!(attributes("<a href='x y z' title=\"a b\" hidden>t</a>"), 3);
        assert_eq!(attributes("<!-- <a b c d e> --><p>x</p>"), 0);
        assert_eq!(
            attributes("<script>if (a < b) { one two three four } a > b</script><i x y>"),
            2
        );
        let many = format!(
            "<p {}>x</p>",
            (0..5000).map(|i| format!("a{i}=1 ")).collect::<String>()
        );
        assert_eq!(attributes(&many), 5000);
    }

    #[test]
    fn unclosed_formatting_reopened_in_every_block_is_counted() {
        // 500 distinct <i> left open, then 1000 paragraphs: each paragraph reopens all 500.
        let page = format!(
            "<p>{}</p>{}",
            (0..500)
                .map(|i| format!("<i id={i}></q>"))
                .collect::<String>(),
            "<p>x</p>".repeat(1000)
        );
        assert!(measure(&page).elements > 1000 * 500, "{:?}", measure(&page));
        assert_eq!(measure(&"<p><b>x</b></p>".repeat(1000)).elements, 4000);
    }
}

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

/// Counts open elements as the tokens go by.
#[derive(Default)]
struct DepthSink {
    depth: Cell<usize>,
    deepest: Cell<usize>,
}

impl TokenSink for DepthSink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let Token::TagToken(tag) = token else {
            return TokenSinkResult::Continue;
        };
        let name: &str = &tag.name;
        if NOT_NESTING.contains(&name) {
            return TokenSinkResult::Continue;
        }
        match tag.kind {
            TagKind::StartTag => {
                let depth = self.depth.get() + 1;
                self.depth.set(depth);
                self.deepest.set(self.deepest.get().max(depth));
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
            TagKind::EndTag => self.depth.set(self.depth.get().saturating_sub(1)),
        }
        TokenSinkResult::Continue
    }
}

/// The deepest nesting of `source`'s tags (elements that cannot nest left out).
pub fn deepest_nesting(source: &str) -> usize {
    let tokenizer = Tokenizer::new(DepthSink::default(), Default::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from(source));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    tokenizer.sink.deepest.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_counts_elements_that_hold_others_and_not_script_text() {
        assert_eq!(deepest_nesting("<div><b>x</b></div><div></div>"), 2);
        assert_eq!(deepest_nesting("<p>a<p>b<p>c<ul><li>d<li>e</ul>"), 1);
        assert_eq!(
            deepest_nesting("<script>'<div><div><div>'</script><style><div></style>"),
            1
        );
        assert_eq!(deepest_nesting(&"<div>".repeat(1000)), 1000);
    }

    #[test]
    fn a_page_100000_deep_is_measured_whole() {
        // (The tree builder took 38 s of CPU on this page; this pass is linear.)
        assert_eq!(deepest_nesting(&"<div>".repeat(100_000)), 100_000);
    }
}

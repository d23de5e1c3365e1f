//! sacreBLEU's default tokenizer, `13a` (the mteval-v13a.pl rules WMT uses), reproduced exactly:
//! the same replacements, the same left-to-right regex substitutions, Python's notion of
//! whitespace.

/// Tokenizes one segment as sacreBLEU's `Tokenizer13a` does; tokens are joined by one space.
pub fn tokenize_13a(line: &str) -> String {
    let mut line = line
        .replace("<skipped>", "")
        .replace("-\n", "")
        .replace('\n', " ");
    if line.contains('&') {
        line = line
            .replace("&quot;", "\"")
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">");
    }
    let chars: Vec<char> = format!(" {line} ").chars().collect();
    let chars = pad_symbols(&chars);
    let chars = split_period_comma_after_non_digit(&chars);
    let chars = split_period_comma_before_non_digit(&chars);
    let chars = split_dash_after_digit(&chars);
    python_split(&chars.into_iter().collect::<String>()).join(" ")
}

/// `([\{-\~\[-\` -\&\(-\+\:-\@\/])` -> ` \1 `
fn pad_symbols(chars: &[char]) -> Vec<char> {
    let mut out = Vec::with_capacity(chars.len() * 2);
    for &c in chars {
        if matches!(c, '{'..='~' | '['..='`' | ' '..='&' | '('..='+' | ':'..='@' | '/') {
            out.extend([' ', c, ' ']);
        } else {
            out.push(c);
        }
    }
    out
}

/// One of the two-character substitutions of sacreBLEU's `TokenizerRegexp`, applied as
/// `re.sub` does: scanning left to right, a match consumes both characters.
fn substitute_pairs(
    chars: &[char],
    matches: impl Fn(char, char) -> bool,
    replace: impl Fn(char, char) -> [char; 4],
) -> Vec<char> {
    let mut out = Vec::with_capacity(chars.len() * 2);
    let mut i = 0;
    while i < chars.len() {
        if i + 1 < chars.len() && matches(chars[i], chars[i + 1]) {
            out.extend(replace(chars[i], chars[i + 1]));
            i += 2;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// `([^0-9])([\.,])` -> `\1 \2 `
fn split_period_comma_after_non_digit(chars: &[char]) -> Vec<char> {
    substitute_pairs(
        chars,
        |a, b| !a.is_ascii_digit() && matches!(b, '.' | ','),
        |a, b| [a, ' ', b, ' '],
    )
}

/// `([\.,])([^0-9])` -> ` \1 \2`
fn split_period_comma_before_non_digit(chars: &[char]) -> Vec<char> {
    substitute_pairs(
        chars,
        |a, b| matches!(a, '.' | ',') && !b.is_ascii_digit(),
        |a, b| [' ', a, ' ', b],
    )
}

/// `([0-9])(-)` -> `\1 \2 `
fn split_dash_after_digit(chars: &[char]) -> Vec<char> {
    substitute_pairs(
        chars,
        |a, b| a.is_ascii_digit() && b == '-',
        |a, b| [a, ' ', b, ' '],
    )
}

/// Python's `str.isspace`: Unicode White_Space plus the information separators U+001C..U+001F.
pub fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.split()` with no argument.
pub fn python_split(text: &str) -> Vec<&str> {
    text.split(is_python_space)
        .filter(|token| !token.is_empty())
        .collect()
}

/// Python's `str.rstrip()` with no argument.
pub fn python_rstrip(text: &str) -> &str {
    text.trim_end_matches(is_python_space)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn punctuation_is_split_but_numbers_keep_their_separators() {
        assert_eq!(tokenize_13a("Hello, world."), "Hello , world .");
        assert_eq!(
            tokenize_13a("It costs 3.50, or 1,000 in 2-3 days."),
            "It costs 3.50 , or 1,000 in 2 - 3 days ."
        );
        assert_eq!(tokenize_13a("a&amp;b &quot;x&quot;"), "a & b \" x \"");
        assert_eq!(tokenize_13a("well-known"), "well-known");
        assert_eq!(tokenize_13a(""), "");
    }

    #[test]
    fn consecutive_periods_follow_the_regex_scan() {
        // sacreBLEU gives "a . . ." for "a..." (each substitution consumes its match).
        assert_eq!(tokenize_13a("a..."), "a . . .");
    }
}

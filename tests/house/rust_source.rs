//! Reads Rust source the way the house checks need it: the code without comments, string
//! literals and `#[cfg(test)]` modules, the paths its `use` trees name, and the paths it
//! writes inline (`crate::x::y(...)`, `super::z::W`). A lexer of a few rules, not a parser:
//! enough for the imports of this workspace, which rustfmt keeps regular.

/// A path as a file writes it: its segments, what it is imported as, and the line of its end.
#[derive(Debug, Clone, PartialEq)]
pub struct PathRef {
    pub segments: Vec<String>,
    /// The name it is known by in the file (`use a::b as c` -> `c`, `use a::b` -> `b`).
    pub alias: Option<String>,
    pub line: usize,
    /// Whether a `use` statement names it (rather than code using it inline).
    pub in_use: bool,
    /// The inline modules (`mod avx2 { ... }`) it stands in, outermost first.
    pub within: Vec<String>,
}

/// `source` with every comment and string or char literal turned to spaces, newlines kept,
/// so that byte offsets and line numbers still match the file.
pub fn without_comments_and_strings(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < chars.len() {
        let end = literal_end(&chars, i);
        if end > i {
            out.extend(
                chars[i..end]
                    .iter()
                    .map(|&c| if c == '\n' { '\n' } else { ' ' }),
            );
            i = end;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// The index just past the comment or literal that starts at `i`, or `i` if none does.
fn literal_end(c: &[char], i: usize) -> usize {
    let at = |k: usize| c.get(k).copied().unwrap_or('\0');
    let after_ident = i > 0 && is_ident_char(c[i - 1]);
    match (at(i), at(i + 1)) {
        ('/', '/') => (i..c.len()).find(|&k| c[k] == '\n').unwrap_or(c.len()),
        ('/', '*') => {
            let (mut depth, mut k) = (1, i + 2);
            while depth > 0 && k < c.len() {
                match (at(k), at(k + 1)) {
                    ('/', '*') => (depth, k) = (depth + 1, k + 2),
                    ('*', '/') => (depth, k) = (depth - 1, k + 2),
                    _ => k += 1,
                }
            }
            k.min(c.len())
        }
        ('"', _) => string_end(c, i + 1),
        ('b', '"') if !after_ident => string_end(c, i + 2),
        ('r', '"' | '#') if !after_ident => raw_string_end(c, i + 1).unwrap_or(i),
        ('b', 'r') if !after_ident => raw_string_end(c, i + 2).unwrap_or(i),
        ('\'', _) => char_end(c, i + 1).unwrap_or(i),
        ('b', '\'') if !after_ident => char_end(c, i + 2).unwrap_or(i),
        _ => i,
    }
}

fn string_end(c: &[char], mut k: usize) -> usize {
    while k < c.len() {
        match c[k] {
            '\\' => k += 2,
            '"' => return k + 1,
            _ => k += 1,
        }
    }
    c.len()
}

/// `r##"..."##` from just after the `r`; `None` for a raw identifier (`r#type`).
fn raw_string_end(c: &[char], mut k: usize) -> Option<usize> {
    let hashes = c[k..].iter().take_while(|&&ch| ch == '#').count();
    k += hashes;
    if c.get(k) != Some(&'"') {
        return None;
    }
    let closing: Vec<char> = std::iter::once('"')
        .chain(std::iter::repeat_n('#', hashes))
        .collect();
    (k + 1..c.len())
        .find(|&e| c[e..].starts_with(&closing))
        .map(|e| e + closing.len())
        .or(Some(c.len()))
}

/// A char literal from just after its quote; `None` for a lifetime (`'a`, `'static`).
fn char_end(c: &[char], k: usize) -> Option<usize> {
    if c.get(k) == Some(&'\\') {
        return (k + 2..c.len()).find(|&e| c[e] == '\'').map(|e| e + 1);
    }
    (c.get(k + 1) == Some(&'\'')).then_some(k + 2)
}

pub fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `code` (already without comments and strings) with each `#[cfg(test)]` item blanked.
pub fn without_test_modules(code: &str) -> String {
    let mut out: Vec<char> = code.chars().collect();
    let pattern: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i + pattern.len() <= out.len() {
        if out[i..].starts_with(&pattern) {
            let end = item_end(&out, i + pattern.len());
            for c in &mut out[i..end] {
                if *c != '\n' {
                    *c = ' ';
                }
            }
            i = end;
        } else {
            i += 1;
        }
    }
    out.into_iter().collect()
}

/// The modules `code` declares as test-only files: `#[cfg(test)] mod tests;` -> `tests`.
pub fn test_module_files(code: &str) -> Vec<String> {
    let toks = tokens(code);
    let text = |k: usize| match toks.get(k).map(|t| &t.0) {
        Some(Token::Ident(s)) => s.clone(),
        Some(Token::Punct(c)) => c.to_string(),
        Some(Token::PathSep) => "::".to_string(),
        None => String::new(),
    };
    let attribute: Vec<&str> = vec!["#", "[", "cfg", "(", "test", ")", "]"];
    (0..toks.len())
        .filter(|&k| attribute.iter().enumerate().all(|(j, a)| text(k + j) == *a))
        .map(|k| k + attribute.len())
        .map(|k| if text(k) == "pub" { k + 1 } else { k })
        .filter(|&k| text(k) == "mod" && text(k + 2) == ";")
        .map(|k| text(k + 1))
        .collect()
}

/// The index past the item that starts at `k`: through its `;`, or its `{ ... }` block.
fn item_end(c: &[char], k: usize) -> usize {
    let Some(open) = (k..c.len()).find(|&e| c[e] == '{' || c[e] == ';') else {
        return c.len();
    };
    if c[open] == ';' {
        return open + 1;
    }
    let mut depth = 0;
    for (e, &ch) in c.iter().enumerate().skip(open) {
        match ch {
            '{' => depth += 1,
            '}' if depth == 1 => return e + 1,
            '}' => depth -= 1,
            _ => {}
        }
    }
    c.len()
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    PathSep,
    Punct(char),
}

/// The tokens of `code`, each with its line number (1-based).
fn tokens(code: &str) -> Vec<(Token, usize)> {
    let c: Vec<char> = code.chars().collect();
    let (mut out, mut line, mut i) = (Vec::new(), 1, 0);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if is_ident_char(ch) {
            let start = i;
            while i < c.len() && is_ident_char(c[i]) {
                i += 1;
            }
            out.push((Token::Ident(c[start..i].iter().collect()), line));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Token::PathSep, line));
            i += 2;
        } else {
            out.push((Token::Punct(ch), line));
            i += 1;
        }
    }
    out
}

/// Every path that `code` names: the leaves of its `use` trees, and each path written inline
/// with at least one `::` (the caller decides which of them are the workspace's own).
pub fn paths(code: &str) -> Vec<PathRef> {
    let toks = tokens(code);
    let ident = |k: usize| match toks.get(k) {
        Some((Token::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    };
    let (mut out, mut k) = (Vec::new(), 0);
    // The inline modules open at `k`, each with the brace depth inside it.
    let (mut within, mut depth): (Vec<(String, usize)>, usize) = (Vec::new(), 0);
    let names =
        |within: &[(String, usize)]| within.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    while k < toks.len() {
        match &toks[k].0 {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                if within.last().is_some_and(|(_, d)| *d == depth) {
                    within.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        if ident(k) == Some("mod") && toks.get(k + 2).map(|t| &t.0) == Some(&Token::Punct('{')) {
            if let Some(name) = ident(k + 1) {
                within.push((name.to_string(), depth + 1));
            }
        }
        if ident(k) == Some("use") {
            k += 1;
            let first = out.len();
            use_tree(&toks, &mut k, &[], &mut out);
            for r in &mut out[first..] {
                r.within = names(&within);
            }
            continue;
        }
        let starts_path = ident(k).is_some()
            && toks.get(k + 1).map(|t| &t.0) == Some(&Token::PathSep)
            && !(k > 0 && toks[k - 1].0 == Token::PathSep);
        if !starts_path {
            k += 1;
            continue;
        }
        let mut segments = Vec::new();
        let mut line = toks[k].1;
        while let Some(name) = ident(k) {
            segments.push(name.to_string());
            line = toks[k].1;
            k += 1;
            if toks.get(k).map(|t| &t.0) != Some(&Token::PathSep) {
                break;
            }
            k += 1;
        }
        out.push(PathRef {
            segments,
            alias: None,
            line,
            in_use: false,
            within: names(&within),
        });
    }
    out
}

/// One `use` tree from `toks[*k]`, under `prefix`; leaves go to `out`, `*k` ends past it.
fn use_tree(toks: &[(Token, usize)], k: &mut usize, prefix: &[String], out: &mut Vec<PathRef>) {
    let mut segments = prefix.to_vec();
    let mut line = toks.get(*k).map_or(0, |t| t.1);
    while let Some((token, at)) = toks.get(*k) {
        match token {
            Token::PathSep => *k += 1,
            Token::Ident(name) => {
                segments.push(name.clone());
                line = *at;
                *k += 1;
                if toks.get(*k).map(|t| &t.0) != Some(&Token::PathSep) {
                    break;
                }
            }
            Token::Punct('{') => {
                *k += 1;
                while let Some((t, _)) = toks.get(*k) {
                    match t {
                        Token::Punct('}') => {
                            *k += 1;
                            break;
                        }
                        Token::Punct(',') => *k += 1,
                        _ => use_tree(toks, k, &segments, out),
                    }
                }
                return skip_to_end(toks, k);
            }
            Token::Punct('*') => {
                *k += 1;
                segments.push("*".into());
                out.push(PathRef {
                    segments,
                    alias: Some("*".into()),
                    line: *at,
                    in_use: true,
                    within: vec![],
                });
                return skip_to_end(toks, k);
            }
            Token::Punct(_) => return skip_to_end(toks, k),
        }
    }
    let mut alias = segments.last().cloned();
    if let (Some(Token::Ident(a)), Some(Token::Ident(name))) =
        (toks.get(*k).map(|t| &t.0), toks.get(*k + 1).map(|t| &t.0))
    {
        if a == "as" {
            alias = Some(name.clone());
            *k += 2;
        }
    }
    // `use a::b::{self, c}`: `self` names `a::b` itself.
    if segments.len() > 1 && segments.last().map(String::as_str) == Some("self") {
        segments.pop();
        alias = segments.last().cloned();
    }
    out.push(PathRef {
        segments,
        alias,
        line,
        in_use: true,
        within: vec![],
    });
    skip_to_end(toks, k);
}

/// Steps past a `;` that ends a `use` statement (a tree inside braces ends before `,` or `}`).
fn skip_to_end(toks: &[(Token, usize)], k: &mut usize) {
    if let Some((Token::Punct(';'), _)) = toks.get(*k) {
        *k += 1;
    }
}

//! What a client's file name becomes on the server: its last component, in characters any
//! file system and a `Content-Disposition` header take.

/// A name safe in a Content-Disposition header and on any file system: letters, digits,
/// `.`, `-` and `_` kept, anything else `_`; no leading dot; at most 120 characters (the
/// extension kept).
pub fn safe_file_name(name: &str) -> String {
    // Only the last component of whatever path a client sent.
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let mut safe: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    // A name that is only an extension (`.txt`) keeps it, after a name: `file.txt`.
    let only_an_extension = safe.starts_with('.') && !safe.trim_start_matches('.').contains('.');
    safe = safe.trim_start_matches('.').to_string();
    if only_an_extension && !safe.is_empty() {
        safe = format!("file.{safe}");
    }
    if safe.len() > 120 {
        let extension = safe
            .rfind('.')
            .map(|dot| safe[dot..].to_string())
            .unwrap_or_default();
        let keep = 120usize.saturating_sub(extension.len());
        safe = format!("{}{extension}", &safe[..keep.min(safe.len())]);
    }
    if safe.is_empty() {
        safe = "file".into();
    }
    safe
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_never_leave_the_directory() {
        assert_eq!(safe_file_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_file_name("..\\..\\x.docx"), "x.docx");
        assert_eq!(safe_file_name("/abs/.hidden.txt"), "hidden.txt");
        assert_eq!(
            safe_file_name("Brief an Jürgen.docx"),
            "Brief_an_J_rgen.docx"
        );
        assert_eq!(safe_file_name(".."), "file");
        assert_eq!(safe_file_name(".txt"), "file.txt");
        assert_eq!(safe_file_name("..txt"), "file.txt");
        let long = format!("{}.html", "a".repeat(500));
        assert_eq!(safe_file_name(&long).len(), 120);
        assert!(safe_file_name(&long).ends_with(".html"));
    }
}

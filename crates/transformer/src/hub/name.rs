//! A model's name on the Hub, as every tool in the field takes it: `org/name`, optionally
//! `@revision` (a branch, a tag or a commit).

use std::fmt;

/// The revision a name without `@` means.
pub const DEFAULT_REVISION: &str = "main";

/// Longest repository id the Hub accepts.
const LONGEST_ID: usize = 96;

/// Longest revision taken (a file name's limit).
const LONGEST_REVISION: usize = 255;

/// `org/name[@revision]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubName {
    /// `org/name`.
    pub id: String,
    pub revision: String,
}

impl HubName {
    /// `text` as a Hub name, if it looks like one: two parts of letters, digits, `-`, `_`
    /// and `.` around one `/`, neither starting with `.` or `-`, optionally `@revision`.
    pub fn parse(text: &str) -> Option<Self> {
        let (id, revision) = match text.split_once('@') {
            Some((id, revision)) => (id, revision),
            None => (text, DEFAULT_REVISION),
        };
        let (org, name) = id.split_once('/')?;
        let part = |p: &str| {
            !p.is_empty()
                && !p.starts_with(['.', '-'])
                && !p.contains("..")
                && !p.contains("--")
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        // A revision names a file under refs/: parts of the same letters, none empty, `.`
        // or `..` (so no absolute path and no way out of the cache), at most 255 long.
        let revision_ok = revision.len() <= LONGEST_REVISION
            && revision.split('/').all(|p| {
                !p.is_empty()
                    && p != "."
                    && !p.contains("..")
                    && p.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            });
        (part(org) && part(name) && id.len() <= LONGEST_ID && revision_ok).then(|| Self {
            id: id.to_string(),
            revision: revision.to_string(),
        })
    }

    /// The cache's folder of this model: `models--org--name`.
    pub fn folder(&self) -> String {
        format!("models--{}", self.id.replace('/', "--"))
    }

    /// Whether the revision is a commit hash (40 hex digits): it names one snapshot forever.
    pub fn revision_is_commit(&self) -> bool {
        is_commit(&self.revision)
    }
}

/// Whether `text` is a full commit hash.
pub fn is_commit(text: &str) -> bool {
    text.len() == 40 && text.chars().all(|c| c.is_ascii_hexdigit())
}

impl fmt::Display for HubName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.revision == DEFAULT_REVISION {
            write!(f, "{}", self.id)
        } else {
            write!(f, "{}@{}", self.id, self.revision)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_with_and_without_a_revision() {
        let name = HubName::parse("Helsinki-NLP/opus-mt-de-en").unwrap();
        assert_eq!(name.id, "Helsinki-NLP/opus-mt-de-en");
        assert_eq!(name.revision, "main");
        assert_eq!(name.folder(), "models--Helsinki-NLP--opus-mt-de-en");
        let pinned = HubName::parse("facebook/nllb-200-distilled-600M@v1.0").unwrap();
        assert_eq!(pinned.revision, "v1.0");
        assert_eq!(pinned.to_string(), "facebook/nllb-200-distilled-600M@v1.0");
        let commit = &"0123456789abcdef".repeat(3)[..40];
        let pinned = HubName::parse(&format!("a/b@{commit}")).unwrap();
        assert!(pinned.revision_is_commit());
    }

    #[test]
    fn paths_and_odd_text_are_not_names() {
        for text in [
            "runs/base/best",
            "./runs",
            "/abs/path",
            "no-slash",
            "a/",
            "/b",
            "../x",
            "a/..",
            "a b/c",
            "a/b@",
            "a/b@../x",
            ".hidden/x",
            "a/b/c@main",
            "a/b@/tmp/x",
            "a/b@.",
            "a/b@x/",
            "a/b@./x",
            "a/b@a//b",
            "a/b@/",
        ] {
            assert!(HubName::parse(text).is_none(), "{text}");
        }
        assert!(HubName::parse(&format!("a/{}", "x".repeat(100))).is_none());
        assert!(HubName::parse(&format!("a/b@{}", "r".repeat(256))).is_none());
        assert_eq!(
            HubName::parse("a/b@refs/pr/1").unwrap().revision,
            "refs/pr/1"
        );
    }
}

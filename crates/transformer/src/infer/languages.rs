//! The language pair a translator is opened in: the codes asked for checked against the model
//! (a multilingual model's codes, a model of one pair's own), then named. The policy is the
//! library's; the caller only says what it calls the two codes ([`LanguageNames`]), so that
//! a refusal names the flag or field a user changes.

use crate::checkpoint::Checkpoint;

/// What the caller calls the source and target codes, for refusals and warnings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LanguageNames {
    pub source: &'static str,
    pub target: &'static str,
}

impl Default for LanguageNames {
    /// [`super::LoadOptions`]' own field names.
    fn default() -> Self {
        Self {
            source: "source_lang",
            target: "target_lang",
        }
    }
}

/// What a code asked for may do to a model of one pair that names its own language.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnePairLanguages {
    /// Refuse another code: the model translates its own pair whatever a code says.
    #[default]
    Refuse,
    /// Rename the pair (a server's clients then ask for it by the codes given), with a
    /// warning among the translator's notes; the model still reads and writes its own.
    Rename,
}

/// A language the model cannot translate in, or a pair half named: the message names the
/// code as the caller calls it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LanguageRefused {
    pub message: String,
}

/// The codes to name a model's pair with, and what renaming it warns of.
pub(super) struct CheckedPair {
    pub source: Option<String>,
    pub target: Option<String>,
    pub warnings: Vec<String>,
}

/// The codes to name the model's pair with, after `source` and `target` (as asked) are
/// checked: a code a multilingual model lacks, half a pair it cannot complete, or (unless
/// `one_pair` renames) a language other than the one a model of one pair says it reads or
/// writes is refused. A model of one pair keeps its own names (its sentences are cut by its
/// source's rules); renaming is only for a server's clients.
pub(super) fn checked_pair(
    checkpoint: &Checkpoint,
    source: Option<String>,
    target: Option<String>,
    one_pair: OnePairLanguages,
    names: LanguageNames,
) -> Result<CheckedPair, LanguageRefused> {
    let refuse = |message: String| LanguageRefused { message };
    let data = &checkpoint.config.data;
    let multilingual = checkpoint.tokenizers.multilingual_tokenizer();
    let mut warnings = Vec::new();
    let sides = [
        (names.source, source.as_deref(), &data.source_lang),
        (names.target, target.as_deref(), &data.target_lang),
    ];
    for (name, code, own) in sides {
        let Some(code) = code else { continue };
        if let Some(tokenizer) = multilingual {
            if let Err(error) = tokenizer.pair(code, code) {
                return Err(refuse(format!("{name} {code}: {error}")));
            }
        } else if let Some(own) = own.as_deref().filter(|own| !own.eq_ignore_ascii_case(code)) {
            let pair = format!(
                "{} to {}",
                data.source_lang.as_deref().unwrap_or("?"),
                data.target_lang.as_deref().unwrap_or("?"),
            );
            let dir = checkpoint.dir.display();
            if one_pair == OnePairLanguages::Rename {
                warnings.push(format!(
                    "{name} {code}: clients call the model's {own} \"{code}\"; {dir} still \
                     translates {pair}"
                ));
                continue;
            }
            return Err(refuse(format!(
                "{name} {code}: {dir} translates {pair} only; drop {name}, or name {own}"
            )));
        }
    }
    let [(source_name, source_code, own_source), (target_name, target_code, own_target)] = sides;
    let half = match (source_code, target_code) {
        (Some(_), None) if own_target.is_none() => Some((source_name, target_name)),
        (None, Some(_)) if own_source.is_none() => Some((target_name, source_name)),
        _ => None,
    };
    if let (Some((given, missing)), Some(_)) = (half, multilingual) {
        return Err(refuse(format!(
            "{given} names half a language pair: give {missing} too"
        )));
    }
    let one_pair_named = multilingual.is_none();
    let unless_own = |code: Option<String>, own: &Option<String>| {
        code.filter(|_| !(one_pair_named && own.is_some()))
    };
    Ok(CheckedPair {
        source: unless_own(source, &data.source_lang),
        target: unless_own(target, &data.target_lang),
        warnings,
    })
}

/// Refuses a multilingual model whose language pair is not named yet: it cannot translate
/// before it knows into which language.
pub(super) fn require_pair(
    checkpoint: &Checkpoint,
    names: LanguageNames,
) -> Result<(), LanguageRefused> {
    let tokenizers = &checkpoint.tokenizers;
    match tokenizers.multilingual_tokenizer() {
        Some(tokenizer) if tokenizers.languages.is_none() => Err(LanguageRefused {
            message: format!(
                "{} is a multilingual model of {} languages: name the pair with {} and {} \
                 (its codes: {})",
                checkpoint.dir.display(),
                tokenizer.languages().count(),
                names.source,
                names.target,
                tokenizer.codes_like("")
            ),
        }),
        _ => Ok(()),
    }
}

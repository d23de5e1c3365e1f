//! NLLB-200's language codes (ISO 639-3 and a script: `deu_Latn`) as the ISO 639-1 codes the
//! sentence splitter's rules are named by (`de`), so that a multilingual model's source is
//! cut by its own language's rules.

/// ISO 639-3 codes NLLB-200 uses, with their ISO 639-1 code.
#[rustfmt::skip]
const TWO_LETTER: &[(&str, &str)] = &[
    ("afr", "af"), ("als", "sq"), ("amh", "am"), ("arb", "ar"), ("azj", "az"), ("bel", "be"),
    ("ben", "bn"), ("bos", "bs"), ("bul", "bg"), ("cat", "ca"), ("ces", "cs"), ("cym", "cy"),
    ("dan", "da"), ("deu", "de"), ("ell", "el"), ("eng", "en"), ("epo", "eo"), ("est", "et"),
    ("eus", "eu"), ("fin", "fi"), ("fra", "fr"), ("gle", "ga"), ("glg", "gl"), ("guj", "gu"),
    ("heb", "he"), ("hin", "hi"), ("hrv", "hr"), ("hun", "hu"), ("hye", "hy"), ("ind", "id"),
    ("isl", "is"), ("ita", "it"), ("jpn", "ja"), ("kan", "kn"), ("kat", "ka"), ("kaz", "kk"),
    ("khm", "km"), ("kor", "ko"), ("lao", "lo"), ("lit", "lt"), ("ltz", "lb"), ("lvs", "lv"),
    ("mal", "ml"), ("mar", "mr"), ("mkd", "mk"), ("mlt", "mt"), ("mya", "my"), ("nld", "nl"),
    ("nno", "nn"), ("nob", "nb"), ("npi", "ne"), ("pan", "pa"), ("pes", "fa"), ("pol", "pl"),
    ("por", "pt"), ("ron", "ro"), ("rus", "ru"), ("sin", "si"), ("slk", "sk"), ("slv", "sl"),
    ("spa", "es"), ("srp", "sr"), ("swe", "sv"), ("swh", "sw"), ("tam", "ta"), ("tel", "te"),
    ("tgl", "tl"), ("tha", "th"), ("tur", "tr"), ("ukr", "uk"), ("urd", "ur"), ("uzn", "uz"),
    ("vie", "vi"), ("zho", "zh"), ("zsm", "ms"),
];

/// The ISO 639-1 code of the language `code` names (`de`, `de-AT`, `deu_Latn`, `DEU`), or
/// its language part as it is.
pub fn language_of(code: &str) -> String {
    let language = code
        .split(['-', '_'])
        .next()
        .unwrap_or(code)
        .to_ascii_lowercase();
    TWO_LETTER
        .iter()
        .find(|(three, _)| *three == language)
        .map_or(language, |(_, two)| two.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_names_its_two_letter_language() {
        for (code, want) in [
            ("de", "de"),
            ("de-AT", "de"),
            ("deu_Latn", "de"),
            ("FRA_Latn", "fr"),
            ("zho_Hans", "zh"),
            ("xyz_Latn", "xyz"),
        ] {
            assert_eq!(language_of(code), want, "{code}");
        }
    }
}

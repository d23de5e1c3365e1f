//! The multilingual families' language codes: M2M100's lists (its tokenizer numbers the
//! `__xx__` tokens after the dictionary in this order) and the shape of NLLB-200's
//! (`xxx_Yyyy`, among its tokenizer's added tokens).

/// M2M100's language codes (`language_codes = "m2m100"`), in the order their tokens follow
/// the dictionary.
pub const M2M100_LANGUAGES: &[&str] = &[
    "af", "am", "ar", "ast", "az", "ba", "be", "bg", "bn", "br", "bs", "ca", "ceb", "cs", "cy",
    "da", "de", "el", "en", "es", "et", "fa", "ff", "fi", "fr", "fy", "ga", "gd", "gl", "gu", "ha",
    "he", "hi", "hr", "ht", "hu", "hy", "id", "ig", "ilo", "is", "it", "ja", "jv", "ka", "kk",
    "km", "kn", "ko", "lb", "lg", "ln", "lo", "lt", "lv", "mg", "mk", "ml", "mn", "mr", "ms", "my",
    "ne", "nl", "no", "ns", "oc", "or", "pa", "pl", "ps", "pt", "ro", "ru", "sd", "si", "sk", "sl",
    "so", "sq", "sr", "ss", "su", "sv", "sw", "ta", "th", "tl", "tn", "tr", "uk", "ur", "uz", "vi",
    "wo", "xh", "yi", "yo", "zh", "zu",
];

/// The WMT21 models' codes (`language_codes = "wmt21"`).
pub const WMT21_LANGUAGES: &[&str] = &["en", "ha", "is", "ja", "cs", "ru", "zh", "de"];

/// Whether `token` is shaped as an NLLB language code: three lowercase letters, `_`, a
/// capital and three lowercase letters (a script).
pub(super) fn is_nllb_code(token: &str) -> bool {
    let bytes = token.as_bytes();
    bytes.len() == 8
        && bytes[..3].iter().all(u8::is_ascii_lowercase)
        && bytes[3] == b'_'
        && bytes[4].is_ascii_uppercase()
        && bytes[5..].iter().all(u8::is_ascii_lowercase)
}

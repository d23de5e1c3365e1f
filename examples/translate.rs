//! Translating from Rust with the `transformer` library, as README.md shows it: open a
//! checkpoint through the one front door, take its own decoding settings, translate, and say
//! what the command line would warn of (unknown words, a source cut to the model's length, a
//! translation that ran into its length limit or is much shorter than its source).
//!
//!   cargo run --release --example translate -- runs/base "ich mochte ein bier"

use transformer::device::{select, DeviceRequest};
use transformer::infer::{LoadOptions, Translator};

fn main() -> anyhow::Result<()> {
    // args_os: an argument that is not UTF-8 is an error here, not a panic in std::env::args.
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|arg| {
            arg.into_string()
                .map_err(|arg| anyhow::anyhow!("{arg:?} is not UTF-8; give UTF-8 text"))
        })
        .collect::<anyhow::Result<_>>()?;
    let [checkpoint, text] = args.as_slice() else {
        anyhow::bail!("usage: translate CHECKPOINT TEXT");
    };
    let device = select(DeviceRequest::Auto)?.device;
    let translator = Translator::open(checkpoint.as_ref(), &device, LoadOptions::default())?;
    let options = translator.default_settings()?;
    for translation in translator.translate(&[text.as_str()], &options)? {
        for word in &translation.unknown_words {
            eprintln!("warning: unknown word {word:?} is translated as <unk>");
        }
        if let Some(tokens) = translation.truncated_from {
            eprintln!("warning: the source has {tokens} tokens, more than the model reads; its end was cut");
        }
        if let Some(limit) = translation.stopped_at_limit {
            eprintln!(
                "warning: the translation ran into the limit of {limit} tokens; its end is missing"
            );
        }
        if translation.short {
            eprintln!("warning: the translation is much shorter than its source; a sentence may be missing");
        }
        println!("{}", translation.translation);
    }
    Ok(())
}

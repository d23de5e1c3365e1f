//! Translating from Rust with the `transformer` library, as README.md shows it: open a
//! checkpoint through the one front door, take its own decoding settings, translate.
//!
//!   cargo run --release --example translate -- runs/base "ich mochte ein bier"

use transformer::device::{select, DeviceRequest};
use transformer::infer::{LoadOptions, Translator};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(checkpoint), Some(text)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: translate CHECKPOINT TEXT");
    };
    let device = select(DeviceRequest::Auto)?.device;
    let translator = Translator::open(checkpoint.as_ref(), &device, LoadOptions::default())?;
    let options = translator.default_options()?;
    for translation in translator.translate(&[text.as_str()], &options)? {
        println!("{}", translation.translation);
    }
    Ok(())
}

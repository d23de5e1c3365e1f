//! Pictures: training curves (`loss.png`) and attention heatmaps. Pure Rust (plotters' bitmap
//! backend with DejaVu Sans compiled in), so no system libraries are needed.

mod attention;
mod curves;

use std::path::Path;
use std::sync::Once;

use plotters::style::FontStyle;

use transformer::atomic_file::write_atomic_with;

pub use attention::{attention_heatmaps_png, write_attention_heatmaps, AttentionGrid, HeadMaps};
pub use curves::write_training_curves;

const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType font compiled into the binary; a failure would leave
        // text unrendered, never crash.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// Draws into a temporary PNG beside `path` and renames it over `path`, so a reader never
/// sees half a picture.
fn write_png_atomic(path: &Path, draw: impl FnOnce(&Path) -> DrawResult) -> anyhow::Result<()> {
    register_font();
    write_atomic_with(path, draw)
}

/// `rgb` (8-bit RGB rows of `size.0` pixels) as PNG bytes.
fn encode_png(rgb: &[u8], (width, height): (u32, u32)) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(bytes)
}

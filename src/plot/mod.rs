//! Pictures: training curves (`loss.png`) and attention heatmaps. Pure Rust (plotters' bitmap
//! backend with DejaVu Sans compiled in), so no system libraries are needed.

mod attention;
mod curves;

use std::path::Path;
use std::sync::Once;

use anyhow::anyhow;
use plotters::style::FontStyle;

pub use attention::{write_attention_heatmaps, AttentionGrid, HeadMaps};
pub use curves::write_training_curves;

const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

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
    // The encoder picks the format from the extension, so the temporary name ends in .png.
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".tmp.{name}"));
    let cannot_write = |e: &dyn std::fmt::Display| {
        let _ = std::fs::remove_file(&tmp);
        anyhow!(
            "cannot write {}: {e}; pick a path in a directory you can write to",
            path.display()
        )
    };
    // The plotting library's own error for an unwritable file is a nest of debug output:
    // creating the file first gives the operating system's one-line reason.
    std::fs::File::create(&tmp).map_err(|e| cannot_write(&e))?;
    draw(&tmp).map_err(|e| cannot_write(&e))?;
    std::fs::rename(&tmp, path).map_err(|e| cannot_write(&e))
}

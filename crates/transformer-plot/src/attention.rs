//! Attention heatmaps: for each kind of attention a grid of layers (rows) by heads (columns),
//! query tokens down the left, key tokens along the bottom, probability 0..1 in viridis.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::DrawResult;
use transformer::atomic_file::write_atomic;
pub use transformer::infer::attention::{AttentionGrid, HeadMaps};

/// How many heads each layer of `grid` has.
fn heads(grid: &AttentionGrid) -> usize {
    grid.layers.first().map_or(0, |(_, heads)| heads.len())
}

const MARGIN: i32 = 24;
const GAP: i32 = 10;
const TITLE_HEIGHT: i32 = 44;
const HEAD_LABEL_HEIGHT: i32 = 24;
const LAYER_LABEL_WIDTH: i32 = 72;
const COLOR_BAR_WIDTH: i32 = 90;
const LABEL_FONT: f64 = 16.0;
const GRID_BORDER: RGBColor = RGBColor(160, 160, 160);

/// Sizes shared by every grid of one picture.
struct Layout {
    /// Side of one attention cell in pixels.
    cell: i32,
    token_font: f64,
    /// Widest query label and widest key label (drawn turned), in pixels.
    query_label_width: i32,
    key_label_height: i32,
}

impl Layout {
    fn for_grids(grids: &[AttentionGrid]) -> Self {
        let longest = grids
            .iter()
            .flat_map(|g| [g.queries.len(), g.keys.len()])
            .max()
            .unwrap_or(1)
            .max(1) as i32;
        // Big cells for short sentences, never smaller than a readable label.
        let cell = (320 / longest).clamp(14, 34);
        let token_font = f64::from(cell - 2).min(17.0);
        let widest = |tokens: &mut dyn Iterator<Item = &String>| {
            tokens.map(|t| text_width(t, token_font)).max().unwrap_or(0) + 8
        };
        Self {
            cell,
            token_font,
            query_label_width: widest(&mut grids.iter().flat_map(|g| &g.queries)),
            key_label_height: widest(&mut grids.iter().flat_map(|g| &g.keys)),
        }
    }

    fn grid_width(&self, grid: &AttentionGrid) -> i32 {
        let heads = heads(grid) as i32;
        LAYER_LABEL_WIDTH
            + self.query_label_width
            + heads * (grid.keys.len() as i32 * self.cell + GAP)
    }

    fn grid_height(&self, grid: &AttentionGrid) -> i32 {
        let rows = grid.layers.len() as i32;
        TITLE_HEIGHT
            + HEAD_LABEL_HEIGHT
            + rows * (grid.queries.len() as i32 * self.cell + GAP)
            + self.key_label_height
            + MARGIN
    }
}

fn text_width(text: &str, size: f64) -> i32 {
    ("sans-serif", size)
        .into_font()
        .box_size(text)
        .map_or(text.len() as i32 * size as i32 / 2, |(w, _)| w as i32)
}

/// Draws `grids` one under another into a PNG at `path` (written atomically).
pub fn write_attention_heatmaps(grids: &[AttentionGrid], path: &Path) -> anyhow::Result<()> {
    write_atomic(path, &attention_heatmaps_png(grids)?)
}

/// Draws `grids` one under another and returns the picture as PNG bytes.
pub fn attention_heatmaps_png(grids: &[AttentionGrid]) -> anyhow::Result<Vec<u8>> {
    super::register_font();
    let layout = Layout::for_grids(grids);
    let width = grids
        .iter()
        .map(|g| layout.grid_width(g))
        .max()
        .unwrap_or(0)
        + 2 * MARGIN
        + COLOR_BAR_WIDTH;
    let height = grids.iter().map(|g| layout.grid_height(g)).sum::<i32>() + MARGIN;
    let size = (width.max(200) as u32, height.max(200) as u32);
    let mut rgb = vec![0u8; size.0 as usize * size.1 as usize * 3];
    draw_into(&mut rgb, size, &layout, grids)
        .map_err(|e| anyhow::anyhow!("drawing the attention heatmaps: {e}"))?;
    super::encode_png(&rgb, size)
}

fn draw_into(
    rgb: &mut [u8],
    size: (u32, u32),
    layout: &Layout,
    grids: &[AttentionGrid],
) -> DrawResult {
    let root = BitMapBackend::with_buffer(rgb, size).into_drawing_area();
    root.fill(&WHITE)?;
    let mut top = MARGIN;
    for grid in grids {
        draw_grid(&root, layout, grid, top)?;
        top += layout.grid_height(grid);
    }
    draw_color_bar(
        &root,
        size.0 as i32 - MARGIN - COLOR_BAR_WIDTH + 20,
        MARGIN + 50,
    )?;
    root.present()?;
    Ok(())
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

fn draw_grid(root: &Area, layout: &Layout, grid: &AttentionGrid, top: i32) -> DrawResult {
    let title_style = TextStyle::from(("sans-serif", 24).into_font()).color(&BLACK);
    root.draw(&Text::new(grid.title.clone(), (MARGIN, top), title_style))?;
    let label = TextStyle::from(("sans-serif", LABEL_FONT).into_font()).color(&BLACK);
    let token = TextStyle::from(("sans-serif", layout.token_font).into_font()).color(&BLACK);
    let cell = layout.cell;
    let (map_w, map_h) = (
        grid.keys.len() as i32 * cell,
        grid.queries.len() as i32 * cell,
    );
    let left = MARGIN + LAYER_LABEL_WIDTH + layout.query_label_width;
    let heads_top = top + TITLE_HEIGHT;
    for head in 0..heads(grid) as i32 {
        let x = left + head * (map_w + GAP);
        let style = label.pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(
            format!("head {}", head + 1),
            (x + map_w / 2, heads_top),
            style,
        ))?;
    }
    let maps_top = heads_top + HEAD_LABEL_HEIGHT;
    for (row, (layer, heads)) in grid.layers.iter().enumerate() {
        let y = maps_top + row as i32 * (map_h + GAP);
        let style = label.pos(Pos::new(HPos::Left, VPos::Center));
        root.draw(&Text::new(
            format!("layer {layer}"),
            (MARGIN, y + map_h / 2),
            style,
        ))?;
        for (q, query) in grid.queries.iter().enumerate() {
            let style = token.pos(Pos::new(HPos::Right, VPos::Center));
            let at = (left - 6, y + q as i32 * cell + cell / 2);
            root.draw(&Text::new(query.clone(), at, style))?;
        }
        for (h, probabilities) in heads.iter().enumerate() {
            let x = left + h as i32 * (map_w + GAP);
            draw_heatmap(root, probabilities, (x, y), cell)?;
        }
    }
    // Key tokens once under each column, turned to read downwards.
    let keys_top = maps_top + grid.layers.len() as i32 * (map_h + GAP) - GAP + 6;
    let turned = token
        .transform(FontTransform::Rotate90)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for head in 0..heads(grid) as i32 {
        let x = left + head * (map_w + GAP);
        for (k, key) in grid.keys.iter().enumerate() {
            let at = (x + k as i32 * cell + cell / 2, keys_top);
            root.draw(&Text::new(key.clone(), at, turned.clone()))?;
        }
    }
    Ok(())
}

/// One head's `[query][key]` probabilities as squares of side `cell` from `origin`.
fn draw_heatmap(
    root: &Area,
    probabilities: &[Vec<f32>],
    origin: (i32, i32),
    cell: i32,
) -> DrawResult {
    let (x0, y0) = origin;
    for (q, row) in probabilities.iter().enumerate() {
        for (k, &p) in row.iter().enumerate() {
            let (x, y) = (x0 + k as i32 * cell, y0 + q as i32 * cell);
            let color = ViridisRGB::get_color(p.clamp(0.0, 1.0));
            root.draw(&Rectangle::new(
                [(x, y), (x + cell, y + cell)],
                color.filled(),
            ))?;
        }
    }
    let rows = probabilities.len() as i32;
    let cols = probabilities.first().map_or(0, |r| r.len()) as i32;
    let frame = [(x0, y0), (x0 + cols * cell, y0 + rows * cell)];
    root.draw(&Rectangle::new(frame, GRID_BORDER.stroke_width(1)))?;
    Ok(())
}

/// The colour scale, 0 at the bottom and 1 at the top.
fn draw_color_bar(root: &Area, x: i32, y: i32) -> DrawResult {
    const HEIGHT: i32 = 200;
    const WIDTH: i32 = 18;
    for i in 0..HEIGHT {
        let p = 1.0 - i as f32 / (HEIGHT - 1) as f32;
        let color = ViridisRGB::get_color(p);
        root.draw(&Rectangle::new(
            [(x, y + i), (x + WIDTH, y + i + 1)],
            color.filled(),
        ))?;
    }
    root.draw(&Rectangle::new(
        [(x, y), (x + WIDTH, y + HEIGHT)],
        GRID_BORDER.stroke_width(1),
    ))?;
    let style = TextStyle::from(("sans-serif", LABEL_FONT).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    root.draw(&Text::new("1.0", (x + WIDTH + 6, y), style.clone()))?;
    root.draw(&Text::new(
        "0.5",
        (x + WIDTH + 6, y + HEIGHT / 2),
        style.clone(),
    ))?;
    root.draw(&Text::new("0.0", (x + WIDTH + 6, y + HEIGHT), style))?;
    let caption = TextStyle::from(("sans-serif", LABEL_FONT).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Bottom));
    root.draw(&Text::new("weight", (x - 10, y - 10), caption))?;
    Ok(())
}

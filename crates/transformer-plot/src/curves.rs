//! Training curves as a picture: `loss.png` in the run directory, redrawn at every checkpoint.

use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::{write_png_atomic, DrawResult};
use transformer::metrics::MetricRecord;

const SIZE: (u32, u32) = (1000, 700);
const BLEU_COLOR: RGBColor = RGBColor(0, 130, 60);

/// The series a picture shows, pulled out of metrics.jsonl records.
#[derive(Default)]
struct Curves {
    train_steps: Vec<(f64, f64)>,
    train_epochs: Vec<(f64, f64)>,
    valid_loss: Vec<(f64, f64)>,
    valid_bleu: Vec<(f64, f64)>,
}

impl Curves {
    fn from(metrics: &[MetricRecord]) -> Self {
        let mut curves = Self::default();
        for record in metrics {
            match record {
                MetricRecord::Step { step, loss, .. } => {
                    curves.train_steps.push((*step as f64, *loss))
                }
                MetricRecord::Epoch {
                    step,
                    train_loss,
                    valid_loss,
                    valid_bleu,
                    ..
                } => {
                    curves.train_epochs.push((*step as f64, *train_loss));
                    curves.validation(*step, *valid_loss, *valid_bleu);
                }
                MetricRecord::Validation {
                    step,
                    valid_loss,
                    valid_bleu,
                    ..
                } => curves.validation(*step, Some(*valid_loss), *valid_bleu),
                MetricRecord::Run { .. } => {}
            }
        }
        curves
    }
}

impl Curves {
    /// A validation's points at `step`, whether it came after an epoch or between epochs.
    fn validation(&mut self, step: usize, loss: Option<f64>, bleu: Option<f64>) {
        let x = step as f64;
        self.valid_loss.extend(loss.map(|loss| (x, loss)));
        self.valid_bleu.extend(bleu.map(|bleu| (x, bleu)));
    }
}

/// Draws training and validation loss (and validation BLEU when there is some) against the
/// step into a PNG at `path`, written to a temporary file first and renamed.
/// Returns false, writing nothing, when the records hold no loss to draw yet.
pub fn write_training_curves(metrics: &[MetricRecord], path: &Path) -> anyhow::Result<bool> {
    let curves = Curves::from(metrics);
    if curves.train_steps.is_empty() && curves.train_epochs.is_empty() {
        return Ok(false);
    }
    write_png_atomic(path, |tmp| draw(&curves, tmp))?;
    Ok(true)
}

fn draw(curves: &Curves, path: &Path) -> DrawResult {
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    if curves.valid_bleu.is_empty() {
        draw_losses(curves, &root)?;
    } else {
        let (top, bottom) = root.split_vertically(SIZE.1 * 3 / 5);
        draw_losses(curves, &top)?;
        draw_bleu(curves, &bottom)?;
    }
    root.present()?;
    Ok(())
}

fn last_step(curves: &Curves) -> f64 {
    curves
        .train_steps
        .iter()
        .chain(&curves.train_epochs)
        .map(|p| p.0)
        .fold(1.0, f64::max)
}

type StepChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Axes with the step along x and `y_desc` from 0 to `y_max`, mesh and labels drawn.
fn step_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    y_desc: &str,
    x_max: f64,
    y_max: f64,
) -> Result<StepChart<'a, DB>, Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc("step")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_desc(y_desc)
        .label_style(("sans-serif", 16))
        .draw()?;
    Ok(chart)
}

fn draw_losses<DB: DrawingBackend>(
    curves: &Curves,
    area: &DrawingArea<DB, plotters::coord::Shift>,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let all = curves
        .train_steps
        .iter()
        .chain(&curves.train_epochs)
        .chain(&curves.valid_loss);
    let top = all
        .map(|p| p.1)
        .filter(|v| v.is_finite())
        .fold(0.1, f64::max)
        * 1.05;
    let caption = "Loss (label-smoothed KL per target token)";
    let mut chart = step_chart(area, caption, "loss", last_step(curves), top)?;
    let series = [
        (&curves.train_steps, BLUE.mix(0.5), "train (logged steps)"),
        (&curves.train_epochs, BLUE.to_rgba(), "train (epoch mean)"),
        (&curves.valid_loss, RED.to_rgba(), "validation"),
    ];
    for (points, color, label) in series {
        if points.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 16))
        .draw()?;
    Ok(())
}

fn draw_bleu<DB: DrawingBackend>(
    curves: &Curves,
    area: &DrawingArea<DB, plotters::coord::Shift>,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let top = curves.valid_bleu.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    // The records do not say how validation decoded (the run's [decode] table does).
    let caption = "Validation BLEU (sacreBLEU 13a, decoded as the run's [decode] says)";
    let mut chart = step_chart(area, caption, "BLEU", last_step(curves), top)?;
    chart.draw_series(LineSeries::new(
        curves.valid_bleu.iter().copied(),
        BLEU_COLOR.stroke_width(2),
    ))?;
    chart.draw_series(
        curves
            .valid_bleu
            .iter()
            .map(|&p| Circle::new(p, 4, BLEU_COLOR.filled())),
    )?;
    Ok(())
}

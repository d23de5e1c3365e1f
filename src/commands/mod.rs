//! Glue per subcommand: arguments -> config -> device -> library call -> output.

mod infer_test;
mod train;
mod translate;

use crate::cli::{Command, DeviceArgs};
use crate::device::{select, DeviceRequest};

/// Runs one parsed command.
pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Train(args) => train::run(args),
        Command::Translate(args) => translate::run(args),
        Command::InferTest(args) => infer_test::run(args),
    }
}

/// Resolves `--device` and says on stderr which device was chosen and why.
fn device_from(args: &DeviceArgs) -> anyhow::Result<candle_core::Device> {
    let selected = select(args.device.parse::<DeviceRequest>()?)?;
    eprintln!("{}", selected.note);
    Ok(selected.device)
}

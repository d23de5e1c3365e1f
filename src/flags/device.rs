//! `--device`, which every command that runs a model takes.

use clap::Args;

use crate::device::DeviceRequest;

#[derive(Debug, Args)]
pub struct DeviceArgs {
    /// Where to run: auto (CUDA if built in and present, else CPU), cpu, cuda, or cuda:N
    #[arg(long, default_value = "auto", value_name = "DEVICE")]
    pub device: DeviceRequest,
}

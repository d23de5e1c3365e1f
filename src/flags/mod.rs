//! The flags several commands share: `--device`, how to decode, and the value parsers that
//! name the flag and the value they refuse.

mod decode;
mod device;
mod values;

pub use decode::{language_code, DecodeArgs, DecodeSettingsArgs, FLAGS, LANGUAGE_FLAGS};
pub use device::DeviceArgs;
pub use values::{at_least_one, finite, non_negative};

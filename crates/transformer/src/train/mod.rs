//! Training: the loop, the label-smoothing loss, the Noam schedule and Adam.

pub mod batch_feed;
pub mod clip;
mod data;
pub mod data_parallel;
pub mod events;
pub mod init_from;
pub mod loss;
pub mod optimizer;
mod outcome;
pub mod precision;
pub mod schedule;
pub mod state;
pub mod trainer;

pub use data::{TrainingData, ValidationData};
pub use events::{CheckpointKind, StepReport, StopReason};
pub use outcome::{finite_weights, Diverged, NonFiniteWeights, RunOutcome};
pub use state::{RunPosition, TrainingState, STATE_FORMAT};
pub use trainer::resume::ResumePoint;
pub use trainer::{TrainObserver, Trainer};

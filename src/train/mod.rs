//! Training: the loop, the label-smoothing loss, the Noam schedule and Adam.

pub mod clip;
pub mod events;
pub mod loss;
pub mod optimizer;
pub mod resume;
pub mod schedule;
pub mod state;
pub mod trainer;

pub use events::{CheckpointKind, MetricRecord, StepReport, StopReason};
pub use resume::ResumePoint;
pub use state::{RunPosition, TrainingState};
pub use trainer::{Diverged, RunOutcome, TrainObserver, Trainer, TrainingData, ValidationData};

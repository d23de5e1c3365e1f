//! Training: the loop, the label-smoothing loss, the Noam schedule and Adam.

pub mod events;
pub mod fused_loss;
pub mod loss;
pub mod optimizer;
pub mod schedule;
pub mod trainer;

pub use events::{CheckpointKind, MetricRecord, StepReport, TrainObserver};
pub use trainer::{Trainer, TrainingData, ValidationData};

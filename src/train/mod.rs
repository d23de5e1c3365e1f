//! Training: the loop, the label-smoothing loss, the Noam schedule and Adam.

pub mod fused_loss;
pub mod loss;
pub mod optimizer;
pub mod schedule;
pub mod trainer;

pub use trainer::{
    CheckpointKind, MetricRecord, StepReport, TrainObserver, Trainer, TrainingData, ValidationData,
};

//! Why a prediction cannot be made: what the profile lacks for the configuration.

/// Why a prediction cannot be made (the profile lacks what the configuration needs).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PredictError {
    /// The device has no peak for the precision.
    #[error("hardware profile `{profile}` gives no {precision} peak (device.peak_tflops.{precision})")]
    NoPeak {
        /// Profile name.
        profile: String,
        /// Precision asked for.
        precision: &'static str,
    },
    /// The profile has no link of the kind the topology names.
    #[error(
        "hardware profile `{profile}` has no link for `topology.interconnect = \"{interconnect}\"` (add it as \
         intra_node or network, or predict on a profile that has one)"
    )]
    NoLink {
        /// Profile name.
        profile: String,
        /// The interconnect named.
        interconnect: String,
    },
    /// The global batch does not split over the workers.
    #[error("global batch {batch} does not split evenly over {world} workers")]
    Batch {
        /// Global batch.
        batch: usize,
        /// World size.
        world: usize,
    },
    /// A calibrated profile reached the model without its fitted coefficients (it was not read through
    /// `crate::hardware::load`, which fits a version 1 profile once).
    #[error(
        "hardware profile `{profile}` is calibrated but holds no fitted coefficients (load it through the profile \
         loader, which fits a version 1 profile)"
    )]
    NotFitted {
        /// Profile name.
        profile: String,
    },
    /// The mesh cannot be laid over the model (its pipeline cannot be cut).
    #[error("the device mesh cannot be laid over the model: {why}")]
    Mesh {
        /// Why.
        why: String,
    },
    /// FP8 products asked for on a device without an FP8 peak.
    #[error(
        "`training.float8 = true`: hardware profile `{profile}` gives no FP8 peak (device.peak_tflops.fp8; \
         Ampere and older have no FP8 tensor cores); predict on a profile with one (h100, h200) or remove \
         `training.float8`"
    )]
    NoFp8 {
        /// Profile name.
        profile: String,
    },
}

//! Why a prediction cannot be made: what the profile lacks for the configuration, or a name in it the model
//! does not know.

/// Why a prediction cannot be made (the profile lacks what the configuration needs, or names what the model does
/// not know).
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
    /// A calibration names a class or kind the model does not know.
    #[error("hardware profile `{profile}`: {key} = \"{name}\" is not a name the model knows (known: {known})")]
    UnknownName {
        /// Profile name.
        profile: String,
        /// Where in the profile (`calibration.elementwise[3].op`).
        key: String,
        /// The name found.
        name: String,
        /// The names the model knows there, comma-separated.
        known: String,
    },
}

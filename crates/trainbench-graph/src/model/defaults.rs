//! Serde defaults shared by the `[model]` tables of several files: the class count and `true`.

/// Classes of a classifier unless `classes` says otherwise (ImageNet's).
pub(crate) fn d_classes() -> usize {
    1000
}

/// A switch that is on unless the spec turns it off.
pub(crate) fn d_true() -> bool {
    true
}

//! `trainbench calibrate --rounds N`: N complete profiles of one machine merged into one whose every measured
//! figure is the median over them. Profiles of one build list the same points in the same order, so the merge
//! walks them side by side: numbers become their median (integers that agree stay as they are), lists of equal
//! length are merged item by item, and text (the method, the time) is the first profile's.

use serde_json::Value;

use crate::hardware::wire::HardwareFile;

/// Why the profiles could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A profile does not turn into JSON.
    #[error("{0}")]
    Unwritable(#[source] serde_json::Error),
    /// The merged JSON is no profile.
    #[error("merging the calibrations: {0}")]
    NotAProfile(#[source] serde_json::Error),
}

/// The profile whose every number is the median of `profiles`' at the same place; the first one's where the
/// profiles differ in shape (a list of another length).
pub fn median(profiles: &[HardwareFile]) -> Result<HardwareFile, MergeError> {
    let values =
        profiles.iter().map(serde_json::to_value).collect::<Result<Vec<_>, _>>().map_err(MergeError::Unwritable)?;
    let refs: Vec<&Value> = values.iter().collect();
    serde_json::from_value(merge(&refs)).map_err(MergeError::NotAProfile)
}

fn merge(values: &[&Value]) -> Value {
    let Some(&first) = values.first() else {
        return Value::Null;
    };
    match first {
        Value::Number(_) => {
            if values.iter().all(|v| *v == first) {
                return first.clone();
            }
            let mut xs: Vec<f64> = values.iter().filter_map(|v| v.as_f64()).collect();
            if xs.len() != values.len() {
                return first.clone();
            }
            xs.sort_by(f64::total_cmp);
            let mid = xs.len() / 2;
            let m = if xs.len() % 2 == 1 { xs[mid] } else { (xs[mid - 1] + xs[mid]) / 2.0 };
            if values.iter().all(|v| v.is_u64()) {
                // Integers that differ (a count): the lower middle one, still an integer.
                return Value::from(xs[(xs.len() - 1) / 2] as u64);
            }
            serde_json::Number::from_f64(m).map_or_else(|| first.clone(), Value::Number)
        }
        Value::Array(items) => {
            let lists: Vec<&Vec<Value>> = values.iter().filter_map(|v| v.as_array()).collect();
            if lists.len() != values.len() || lists.iter().any(|l| l.len() != items.len()) {
                return first.clone();
            }
            Value::Array((0..items.len()).map(|i| merge(&lists.iter().map(|l| &l[i]).collect::<Vec<_>>())).collect())
        }
        Value::Object(fields) => {
            let merged = fields
                .iter()
                .map(|(key, value)| {
                    let same: Vec<&Value> = values.iter().filter_map(|v| v.get(key)).collect();
                    let merged = if same.len() == values.len() { merge(&same) } else { value.clone() };
                    (key.clone(), merged)
                })
                .collect();
            Value::Object(merged)
        }
        _ => first.clone(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn numbers_take_their_median_and_text_the_first() {
        let (a, b, c) = (
            json!({"method": "a", "x": 1.0, "n": 4, "points": [{"s": 3.0}, {"s": 1.0}], "uneven": [1.0]}),
            json!({"method": "b", "x": 9.0, "n": 4, "points": [{"s": 2.0}, {"s": 5.0}], "uneven": [1.0, 2.0]}),
            json!({"method": "c", "x": 2.0, "n": 4, "points": [{"s": 1.0}, {"s": 4.0}], "uneven": [3.0]}),
        );
        let m = merge(&[&a, &b, &c]);
        assert_eq!(m, json!({"method": "a", "x": 2.0, "n": 4, "points": [{"s": 2.0}, {"s": 4.0}], "uneven": [1.0]}));
    }

    #[test]
    fn a_profile_merged_with_itself_is_unchanged() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/hardware/a100.toml")).unwrap();
        let p: HardwareFile = toml::from_str(&text).unwrap();
        assert_eq!(median(&[p.clone(), p.clone(), p.clone()]).unwrap(), p);
    }
}

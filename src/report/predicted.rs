//! Predicted against measured: each configuration's measured median step time beside the prediction its results
//! recorded (the performance model on the hardware profile of the machine it ran on, `prediction` in the
//! result), the error, and PAI's data / compute / comm shares of both; the configurations without a prediction
//! and why. Computed where results are read; the report's "Predicted vs measured" section draws and tabulates it.

use super::model::{ConfigRow, Phase, ReportModel, median_of};
use crate::format;
use crate::result::prediction::{PredictionSection, RecordedPrediction};

/// Parts of the stacked share bars: PAI's three, plus the measured time no phase accounts for.
pub const SHARE_PARTS: [&str; 4] = ["data", "compute", "comm", "other"];

/// One configuration with both a measurement and a prediction.
#[derive(Debug, Clone, PartialEq)]
pub struct PredictedRow {
    /// Spec name.
    pub spec: String,
    /// Configuration.
    pub config: String,
    /// Median steady-state step time over the pooled repeats, seconds.
    pub measured_s: f64,
    /// Predicted serial step time, seconds.
    pub predicted_s: f64,
    /// Signed relative error, (predicted - measured) / measured.
    pub error: f64,
    /// Measured shares of the iteration (median over repeats) in [`SHARE_PARTS`] order: data; forward + backward
    /// + optimizer; comm; time outside the phases.
    pub measured_shares: [f64; 4],
    /// Predicted shares in [`SHARE_PARTS`] order (`other` is 0: the model accounts for the whole step).
    pub predicted_shares: [f64; 4],
    /// The profile: its name and whether its figures were calibrated or from a datasheet.
    pub profile: String,
}

/// The report's predicted-against-measured view.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PredictionTable {
    /// Configurations with a measurement and a prediction, in report order.
    pub rows: Vec<PredictedRow>,
    /// Configurations whose results say why they have no prediction (or measured nothing): `(config, why)`.
    pub absent: Vec<(String, String)>,
    /// Configurations whose results predate recorded predictions.
    pub older: usize,
}

impl PredictionTable {
    /// Whether the report has anything to say about predictions.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.absent.is_empty()
    }

    /// The rows of one spec.
    pub fn rows_of<'t>(&'t self, spec: &'t str) -> impl Iterator<Item = &'t PredictedRow> + 't {
        self.rows.iter().filter(move |r| r.spec == spec)
    }

    /// Median and largest absolute error over the rows; `None` without rows.
    pub fn summary(&self) -> Option<(f64, f64)> {
        let abs: Vec<f64> = self.rows.iter().map(|r| r.error.abs()).collect();
        let worst = abs.iter().copied().fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e))));
        median_of(abs).zip(worst)
    }

    /// The sentence under the table: the errors' median and worst case, and what is absent.
    pub fn summary_line(&self) -> String {
        let mut parts = Vec::new();
        if let Some((median, worst)) = self.summary() {
            let within = self.rows.iter().filter(|r| r.error.abs() <= 0.25).count();
            parts.push(format!(
                "Over {} configuration(s): median |error| {}, worst {}; {} of {} within 25%.",
                self.rows.len(),
                format::percent(median),
                format::percent(worst),
                within,
                self.rows.len()
            ));
        }
        if !self.absent.is_empty() {
            let list: Vec<String> = self.absent.iter().map(|(c, why)| format!("{c}: {why}")).collect();
            parts.push(format!("No prediction for {}.", list.join("; ")));
        }
        if self.older > 0 {
            parts.push(format!(
                "{} configuration(s) come from results written before predictions were recorded.",
                self.older
            ));
        }
        parts.join(" ")
    }
}

/// Column headings of the table, after the configuration.
pub const HEADINGS: [&str; 6] = [
    "measured step",
    "predicted step",
    "error",
    "measured data / compute / comm",
    "predicted data / compute / comm",
    "profile",
];

/// What the table's columns hold.
pub const NOTE: &str = "Measured: the median steady-state step time over the pooled repeats. Predicted: the serial \
    step (T_data + T_compute + T_comm, no overlap) the run recorded from the performance model on the hardware \
    profile of its machine (calibrated: measured by `trainbench calibrate` on it; datasheet: named with \
    `run --hardware`). Error: (predicted - measured) / measured. Shares: of the iteration, compute = forward + \
    backward + optimizer.";

impl<'a> ConfigRow<'a> {
    /// The first prediction the repeats recorded (repeats of one configuration are predicted alike).
    pub fn prediction(&self) -> Option<&'a RecordedPrediction> {
        self.runs.iter().find_map(|r| r.prediction.as_ref().and_then(PredictionSection::predicted))
    }

    /// Why the repeats have no prediction, when none has one and one says why.
    pub fn prediction_absent(&self) -> Option<&'a str> {
        if self.prediction().is_some() {
            return None;
        }
        self.runs.iter().find_map(|r| match &r.prediction {
            Some(PredictionSection::Absent { reason }) => Some(reason.as_str()),
            _ => None,
        })
    }

    /// Measured shares in [`SHARE_PARTS`] order (median over repeats); `None` when nothing was measured.
    pub fn measured_shares(&self) -> Option<[f64; 4]> {
        let s = |p: Phase| self.phase_share(p);
        let compute = s(Phase::Forward)? + s(Phase::Backward)? + s(Phase::Optimizer)?;
        Some([s(Phase::Data)?, compute, s(Phase::Comm)?, s(Phase::Other)?])
    }
}

fn profile_label(p: &RecordedPrediction) -> String {
    let kind = if p.profile.calibrated { "calibrated" } else { "datasheet" };
    format!("{} ({kind})", p.profile.name)
}

/// The table of a report.
pub fn table(model: &ReportModel<'_>) -> PredictionTable {
    let mut t = PredictionTable::default();
    for c in &model.configs {
        if c.runs.iter().all(|r| r.prediction.is_none()) {
            t.older += 1;
            continue;
        }
        let Some(p) = c.prediction() else {
            let why = c.prediction_absent().unwrap_or("no reason recorded");
            t.absent.push((c.config.clone(), why.to_string()));
            continue;
        };
        let (Some(measured), Some(shares)) = (c.median_step_s().filter(|m| *m > 0.0), c.measured_shares()) else {
            t.absent.push((c.config.clone(), format!("nothing measured ({})", c.outcome_summary())));
            continue;
        };
        let ps = &p.shares;
        t.rows.push(PredictedRow {
            spec: c.spec.clone(),
            config: c.config.clone(),
            measured_s: measured,
            predicted_s: p.step_time_s,
            error: (p.step_time_s - measured) / measured,
            measured_shares: shares,
            predicted_shares: [ps.data, ps.compute, ps.comm, 0.0],
            profile: profile_label(p),
        });
    }
    t
}

/// The shares of one bar as `data / compute / comm` percentages (the measured `other` is left out: it is what
/// makes them sum to less than 100%).
fn shares_cell(s: &[f64; 4]) -> String {
    format!("{:.0} / {:.0} / {:.0}%", s[0] * 100.0, s[1] * 100.0, s[2] * 100.0)
}

/// The cells of a row, in [`HEADINGS`] order.
pub fn cells(r: &PredictedRow) -> [String; 6] {
    [
        format::ms(r.measured_s),
        format::ms(r.predicted_s),
        format!("{:+.1}%", r.error * 100.0),
        shares_cell(&r.measured_shares),
        shares_cell(&r.predicted_shares),
        r.profile.clone(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(error: f64) -> PredictedRow {
        PredictedRow {
            spec: "s".into(),
            config: format!("c{error}"),
            measured_s: 1.0,
            predicted_s: 1.0 + error,
            error,
            measured_shares: [0.1, 0.8, 0.0, 0.1],
            predicted_shares: [0.2, 0.8, 0.0, 0.0],
            profile: "p (calibrated)".into(),
        }
    }

    #[test]
    fn summary_takes_absolute_errors() {
        let t = PredictionTable { rows: vec![row(-0.5), row(0.1), row(0.2)], absent: Vec::new(), older: 0 };
        assert_eq!(t.summary(), Some((0.2, 0.5)));
        let line = t.summary_line();
        assert!(line.contains("median |error| 20.0%, worst 50.0%; 2 of 3 within 25%"), "{line}");
        assert_eq!(PredictionTable::default().summary(), None);
    }

    #[test]
    fn cells_show_signed_error_and_shares() {
        let c = cells(&row(-0.25));
        assert_eq!(c[2], "-25.0%");
        assert_eq!(c[3], "10 / 80 / 0%");
        assert_eq!(c[4], "20 / 80 / 0%");
    }
}

//! One line of an MLPerf Training log: `:::MLLOG {json}` with the keys in the order the reference logger
//! (`mlperf_logging.mllog`) writes them (`namespace`, `time_ms`, `event_type`, `key`, `value`, `metadata`), and
//! its JSON spaced as Python's `json.dumps` spaces it (`", "`, `": "`). [`MllogLine::encode`] writes one,
//! [`parse_line`] reads one back.

use std::io;

use serde_json::Value;
use serde_json::ser::Formatter;

/// The prefix of every log line.
pub const PREFIX: &str = ":::MLLOG ";

/// What a line marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The start of an interval (`init_start`, `run_start`, `block_start`, `eval_start`).
    IntervalStart,
    /// The end of an interval.
    IntervalEnd,
    /// A single instant or a value (hyperparameters, `eval_accuracy`).
    PointInTime,
}

impl EventType {
    /// The name the log writes.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::IntervalStart => "INTERVAL_START",
            EventType::IntervalEnd => "INTERVAL_END",
            EventType::PointInTime => "POINT_IN_TIME",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "INTERVAL_START" => Some(EventType::IntervalStart),
            "INTERVAL_END" => Some(EventType::IntervalEnd),
            "POINT_IN_TIME" => Some(EventType::PointInTime),
            _ => None,
        }
    }
}

/// One `:::MLLOG` line.
#[derive(Debug, Clone, PartialEq)]
pub struct MllogLine {
    /// `namespace` (empty, as the reference logger's default).
    pub namespace: String,
    /// `time_ms`: milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// `event_type`.
    pub event_type: EventType,
    /// `key`: `run_start`, `global_batch_size`, ...
    pub key: String,
    /// `value` (`null` for most intervals).
    pub value: Value,
    /// `metadata`, in order: `file` and `lineno` first (the source line that logged it), then the event's own
    /// (`samples_count`, `epoch_num`, `status`).
    pub metadata: Vec<(String, Value)>,
}

/// Python's `json.dumps` spacing: `", "` between items, `": "` after keys.
struct PythonSpacing;

impl Formatter for PythonSpacing {
    fn begin_array_value<W: ?Sized + io::Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }
    fn begin_object_key<W: ?Sized + io::Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }
}

/// `value` as Python's `json.dumps` writes it (a non-finite number, which JSON cannot hold, as `null`).
fn python_json(value: &Value) -> String {
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, PythonSpacing);
    match serde::Serialize::serialize(value, &mut ser) {
        Ok(()) => String::from_utf8(buf).unwrap_or_else(|_| "null".into()),
        Err(_) => "null".into(),
    }
}

impl MllogLine {
    /// The line, without its newline.
    pub fn encode(&self) -> String {
        let metadata = self
            .metadata
            .iter()
            .map(|(k, v)| format!("{}: {}", python_json(&Value::String(k.clone())), python_json(v)))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "{PREFIX}{{\"namespace\": {}, \"time_ms\": {}, \"event_type\": \"{}\", \"key\": {}, \"value\": {}, \
             \"metadata\": {{{metadata}}}}}",
            python_json(&Value::String(self.namespace.clone())),
            self.time_ms,
            self.event_type.as_str(),
            python_json(&Value::String(self.key.clone())),
            python_json(&self.value),
        )
    }

    /// A metadata entry by name.
    pub fn meta(&self, name: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }
}

/// Why a `:::MLLOG` line could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LineError {
    /// The JSON after the prefix does not parse (a truncated line, most often).
    #[error("the JSON after `:::MLLOG` does not parse ({0})")]
    Json(String),
    /// The JSON is not an object with the fields every line has.
    #[error("the line lacks `{0}` or it has the wrong type")]
    Field(&'static str),
}

/// Read one line of a log: `Ok(None)` for a line that is not an MLLOG line (other output interleaved in a log,
/// as published logs hold), the line when it is one, an error when it starts like one but is malformed.
pub fn parse_line(text: &str) -> Result<Option<MllogLine>, LineError> {
    let Some(start) = text.find(":::MLLOG") else { return Ok(None) };
    let json = text[start + ":::MLLOG".len()..].trim();
    let doc: Value = serde_json::from_str(json).map_err(|e| LineError::Json(e.to_string()))?;
    let obj = doc.as_object().ok_or(LineError::Field("{...}"))?;
    let time_ms = match obj.get("time_ms") {
        Some(Value::Number(n)) => n.as_i64().or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f as i64)),
        _ => None,
    }
    .ok_or(LineError::Field("time_ms"))?;
    let event_type = obj
        .get("event_type")
        .and_then(Value::as_str)
        .and_then(EventType::parse)
        .ok_or(LineError::Field("event_type"))?;
    let key = obj.get("key").and_then(Value::as_str).ok_or(LineError::Field("key"))?.to_string();
    let namespace = obj.get("namespace").and_then(Value::as_str).unwrap_or("").to_string();
    let value = obj.get("value").cloned().unwrap_or(Value::Null);
    let metadata = match obj.get("metadata") {
        Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        None | Some(Value::Null) => Vec::new(),
        Some(_) => return Err(LineError::Field("metadata")),
    };
    Ok(Some(MllogLine { namespace, time_ms, event_type, key, value, metadata }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line() -> MllogLine {
        MllogLine {
            namespace: String::new(),
            time_ms: 1_700_000_000_123,
            event_type: EventType::PointInTime,
            key: "eval_accuracy".into(),
            value: json!(0.5),
            metadata: vec![
                ("file".into(), json!("src/mlperf/events.rs")),
                ("lineno".into(), json!(7)),
                ("samples_count".into(), json!(256)),
            ],
        }
    }

    #[test]
    fn a_line_is_written_as_the_reference_logger_writes_it() {
        assert_eq!(
            line().encode(),
            ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1700000000123, \"event_type\": \"POINT_IN_TIME\", \"key\": \
             \"eval_accuracy\", \"value\": 0.5, \"metadata\": {\"file\": \"src/mlperf/events.rs\", \"lineno\": 7, \
             \"samples_count\": 256}}"
        );
        let nested = MllogLine { value: json!({"a": [1, 2]}), ..line() };
        assert!(nested.encode().contains("\"value\": {\"a\": [1, 2]}"), "{}", nested.encode());
    }

    #[test]
    fn a_written_line_reads_back_and_other_lines_are_skipped() {
        let l = line();
        let back = parse_line(&format!("0: {}", l.encode())).unwrap().unwrap();
        assert_eq!(back.key, l.key);
        assert_eq!(back.time_ms, l.time_ms);
        assert_eq!(back.meta("samples_count"), Some(&json!(256)));
        assert_eq!(parse_line("step 10 loss 3.2").unwrap(), None);
    }

    #[test]
    fn a_truncated_or_incomplete_line_is_an_error() {
        let text = line().encode();
        assert!(matches!(parse_line(&text[..text.len() - 9]), Err(LineError::Json(_))));
        assert_eq!(parse_line(":::MLLOG {\"key\": \"x\"}"), Err(LineError::Field("time_ms")));
        assert_eq!(parse_line(":::MLLOG [1]"), Err(LineError::Field("{...}")));
    }
}

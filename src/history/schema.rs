//! The store's tables and queries, one text for SQLite and PostgreSQL: migrations numbered in this binary (the
//! `schema_version` table holds the store's number), and the statements both stores run, written with `?`
//! placeholders (PostgreSQL's `$n` are made by [`numbered`]) and `{blob}` for the binary column type.

/// Schema version this build writes and reads; a store with a higher one is refused, never modified.
pub const SCHEMA_VERSION: i64 = 1;

/// The migrations, in order: `(version it brings the store to, statements)`.
pub const MIGRATIONS: &[(i64, &[&str])] = &[(
    1,
    &[
        "CREATE TABLE runs (
            run_key TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            spec_name TEXT NOT NULL,
            config_key TEXT NOT NULL,
            config_label TEXT NOT NULL,
            machine_key TEXT NOT NULL,
            machine_label TEXT NOT NULL,
            repeat_index BIGINT NOT NULL,
            started_at TEXT NOT NULL,
            revision TEXT,
            software TEXT NOT NULL,
            source TEXT NOT NULL,
            step_count BIGINT NOT NULL,
            steps {blob} NOT NULL
        )",
        "CREATE INDEX runs_by_series ON runs (config_key, machine_key, started_at)",
        "CREATE TABLE run_metrics (
            run_key TEXT NOT NULL,
            metric TEXT NOT NULL,
            value DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (run_key, metric)
        )",
        "CREATE TABLE series (
            config_key TEXT NOT NULL,
            machine_key TEXT NOT NULL,
            metric TEXT NOT NULL,
            config_label TEXT NOT NULL,
            machine_label TEXT NOT NULL,
            PRIMARY KEY (config_key, machine_key, metric)
        )",
        "CREATE TABLE acks (
            series TEXT NOT NULL,
            at_run_key TEXT NOT NULL,
            why TEXT NOT NULL,
            PRIMARY KEY (series, at_run_key)
        )",
    ],
)];

/// Creates the version table of a new store.
pub const CREATE_VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)";
/// The store's version (no row: a store being created).
pub const SELECT_VERSION: &str = "SELECT MAX(version) FROM schema_version";
/// Records a migration.
pub const INSERT_VERSION: &str = "INSERT INTO schema_version (version) VALUES (?)";
/// Every table, dropped by `rebuild`.
pub const TABLES: &[&str] = &["acks", "series", "run_metrics", "runs", "schema_version"];

/// Adds a run unless its key is known.
pub const INSERT_RUN: &str = "INSERT INTO runs (run_key, run_id, spec_name, config_key, config_label, machine_key, \
     machine_label, repeat_index, started_at, revision, software, source, step_count, steps) \
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_key) DO NOTHING";
/// Adds one metric value of a run.
pub const INSERT_METRIC: &str =
    "INSERT INTO run_metrics (run_key, metric, value) VALUES (?, ?, ?) ON CONFLICT (run_key, metric) DO NOTHING";
/// Adds a series when it is new.
pub const INSERT_SERIES: &str = "INSERT INTO series (config_key, machine_key, metric, config_label, machine_label) \
     VALUES (?, ?, ?, ?, ?) ON CONFLICT (config_key, machine_key, metric) DO NOTHING";
/// Every series, in a fixed order.
pub const SELECT_SERIES: &str = "SELECT config_key, machine_key, metric, config_label, machine_label FROM series \
     ORDER BY config_label, config_key, machine_label, machine_key, metric";
/// The columns of a run, in [`crate::history::record::RunRecord`]'s order.
const RUN_COLUMNS: &str = "run_key, run_id, spec_name, config_key, config_label, machine_key, machine_label, \
     repeat_index, started_at, revision, software, source, step_count, steps";
/// The runs of one configuration on one machine, in time order.
pub fn select_runs() -> String {
    format!("SELECT {RUN_COLUMNS} FROM runs WHERE config_key = ? AND machine_key = ? ORDER BY started_at, run_key")
}
/// The metric values of the runs of one configuration on one machine.
pub const SELECT_METRICS: &str = "SELECT m.run_key, m.metric, m.value FROM run_metrics m \
     JOIN runs r ON r.run_key = m.run_key WHERE r.config_key = ? AND r.machine_key = ? ORDER BY m.run_key, m.metric";
/// The revision recorded with each run (carried over by `rebuild`).
pub const SELECT_REVISIONS: &str = "SELECT run_key, revision FROM runs ORDER BY run_key";
/// Adds an acknowledgement.
pub const INSERT_ACK: &str = "INSERT INTO acks (series, at_run_key, why) VALUES (?, ?, ?) ON CONFLICT (series, at_run_key) DO UPDATE SET why = excluded.why";
/// Every acknowledgement.
pub const SELECT_ACKS: &str = "SELECT series, at_run_key, why FROM acks ORDER BY series, at_run_key";

/// A statement with its `{blob}` column type spelled for a database (`BLOB`, `BYTEA`).
pub fn with_blob(sql: &str, blob: &str) -> String {
    sql.replace("{blob}", blob)
}

/// A statement with its `?` placeholders numbered `$1`, `$2`, ... (PostgreSQL's spelling). No statement here
/// has a `?` inside a string literal.
pub fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push_str(&format!("${n}"));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_in_order_and_migrations_reach_the_version() {
        assert_eq!(numbered("VALUES (?, ?, ?)"), "VALUES ($1, $2, $3)");
        assert_eq!(MIGRATIONS.last().map(|m| m.0), Some(SCHEMA_VERSION));
        assert!(with_blob(MIGRATIONS[0].1[0], "BYTEA").contains("steps BYTEA"));
    }
}

//! The team store: the same tables and statements on a PostgreSQL server, through the synchronous `postgres`
//! client. Connecting gives up after [`CONNECT_TIMEOUT_S`] (unless the URL sets `connect_timeout`); errors name
//! the URL without its password; migrations hold an advisory lock so that concurrent first users create the
//! schema once.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use postgres::types::ToSql;
use postgres::{Client, NoTls};

use super::record::RunRecord;
use super::schema;
use super::series::Metric;
use super::store::{Ack, CONNECT_TIMEOUT_S, SeriesHead, Store, StoreError};

/// Key of the advisory lock migrations hold.
const MIGRATION_LOCK: i64 = 0x7472_6169_6e62;

/// A history store on a PostgreSQL server.
pub struct PostgresStore {
    client: Client,
    shown: String,
}

/// `url` with its password replaced by `***` (in the user part of a URL, and a `password=` parameter).
pub fn redact(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..].find(['/', '?']).map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                out.replace_range(rest_start + colon + 1..rest_start + at, "***");
            }
        }
    }
    if let Some(i) = out.find("password=") {
        let start = i + "password=".len();
        let end = out[start..].find(['&', ' ']).map_or(out.len(), |j| start + j);
        out.replace_range(start..end, "***");
    }
    out
}

impl PostgresStore {
    /// Connect to the server at `url`, creating or migrating the schema when needed; a store of a newer schema
    /// is refused before anything is written.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let shown = redact(url);
        let unreachable =
            |timeout_s: u64, message: String| StoreError::Unreachable { url: shown.clone(), timeout_s, message };
        let mut config = postgres::Config::from_str(url).map_err(|e| unreachable(CONNECT_TIMEOUT_S, e.to_string()))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(CONNECT_TIMEOUT_S));
        }
        let timeout_s = config.get_connect_timeout().map_or(CONNECT_TIMEOUT_S, Duration::as_secs);
        let client = config.connect(NoTls).map_err(|e| unreachable(timeout_s, full_message(&e)))?;
        let mut store = Self { client, shown };
        match store.version()? {
            Some(found) if found > schema::SCHEMA_VERSION => {
                return Err(StoreError::Newer {
                    location: store.shown.clone(),
                    found,
                    supported: schema::SCHEMA_VERSION,
                });
            }
            Some(found) if found == schema::SCHEMA_VERSION => {}
            _ => store.migrate()?,
        }
        Ok(store)
    }

    fn fail(&self, e: postgres::Error) -> StoreError {
        StoreError::Database { location: self.shown.clone(), message: full_message(&e) }
    }

    fn version(&mut self) -> Result<Option<i64>, StoreError> {
        let exists = self.client.query_one("SELECT to_regclass('schema_version') IS NOT NULL", &[]);
        let exists: bool = exists.map_err(|e| self.fail(e))?.get(0);
        if !exists {
            return Ok(None);
        }
        let row = self.client.query_one(schema::SELECT_VERSION, &[]).map_err(|e| self.fail(e))?;
        Ok(row.get(0))
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let shown = self.shown.clone();
        let err = |e: postgres::Error| StoreError::Database { location: shown.clone(), message: full_message(&e) };
        let mut tx = self.client.transaction().map_err(err)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).map_err(err)?;
        tx.execute(schema::CREATE_VERSION_TABLE, &[]).map_err(err)?;
        let current: Option<i64> = tx.query_one(schema::SELECT_VERSION, &[]).map_err(err)?.get(0);
        let current = current.unwrap_or(0);
        if current > schema::SCHEMA_VERSION {
            return Err(StoreError::Newer {
                location: shown.clone(),
                found: current,
                supported: schema::SCHEMA_VERSION,
            });
        }
        for (version, statements) in schema::MIGRATIONS.iter().filter(|(v, _)| *v > current) {
            for statement in *statements {
                tx.execute(&schema::with_blob(statement, "BYTEA"), &[]).map_err(err)?;
            }
            tx.execute(&schema::numbered(schema::INSERT_VERSION), &[version]).map_err(err)?;
        }
        tx.commit().map_err(err)
    }

    fn query(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<postgres::Row>, StoreError> {
        let sql = schema::numbered(sql);
        self.client
            .query(&sql, params)
            .map_err(|e| StoreError::Database { location: self.shown.clone(), message: full_message(&e) })
    }
}

/// The client's message with the server's detail (`password authentication failed ...`), which its `Display`
/// leaves out.
fn full_message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => {
            let mut message = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(inner) = source {
                message.push_str(&format!(": {inner}"));
                source = inner.source();
            }
            message
        }
    }
}

impl Store for PostgresStore {
    fn location(&self) -> &str {
        &self.shown
    }

    fn insert_runs(&mut self, runs: &[RunRecord]) -> Result<usize, StoreError> {
        let shown = self.shown.clone();
        let err = |e: postgres::Error| StoreError::Database { location: shown.clone(), message: full_message(&e) };
        let mut ordered: Vec<&RunRecord> = runs.iter().collect();
        ordered.sort_by(|a, b| a.run_key.cmp(&b.run_key));
        let mut tx = self.client.transaction().map_err(err)?;
        let insert_run = tx.prepare(&schema::numbered(schema::INSERT_RUN)).map_err(err)?;
        let insert_metric = tx.prepare(&schema::numbered(schema::INSERT_METRIC)).map_err(err)?;
        let insert_series = tx.prepare(&schema::numbered(schema::INSERT_SERIES)).map_err(err)?;
        let mut added = 0;
        for run in ordered {
            let software = serde_json::to_string(&run.software).unwrap_or_default();
            let repeat = i64::from(run.repeat);
            let step_count = i64::try_from(run.step_count).unwrap_or(i64::MAX);
            let changed = tx
                .execute(
                    &insert_run,
                    &[
                        &run.run_key,
                        &run.run_id,
                        &run.spec_name,
                        &run.config_key,
                        &run.config_label,
                        &run.machine_key,
                        &run.machine_label,
                        &repeat,
                        &run.started_at,
                        &run.revision,
                        &software,
                        &run.source,
                        &step_count,
                        &run.steps,
                    ],
                )
                .map_err(err)?;
            if changed == 0 {
                continue;
            }
            added += 1;
            for (metric, value) in &run.metrics {
                tx.execute(&insert_metric, &[&run.run_key, &metric.name(), value]).map_err(err)?;
                tx.execute(
                    &insert_series,
                    &[&run.config_key, &run.machine_key, &metric.name(), &run.config_label, &run.machine_label],
                )
                .map_err(err)?;
            }
        }
        tx.commit().map_err(err)?;
        Ok(added)
    }

    fn series(&mut self) -> Result<Vec<SeriesHead>, StoreError> {
        Ok(self
            .query(schema::SELECT_SERIES, &[])?
            .iter()
            .map(|row| SeriesHead {
                config_key: row.get(0),
                machine_key: row.get(1),
                metric: row.get(2),
                config_label: row.get(3),
                machine_label: row.get(4),
            })
            .collect())
    }

    fn runs_of(&mut self, config_key: &str, machine_key: &str) -> Result<Vec<RunRecord>, StoreError> {
        let rows = self.query(&schema::select_runs(), &[&config_key, &machine_key])?;
        let mut runs: Vec<RunRecord> = rows
            .iter()
            .map(|row| {
                let software: String = row.get(10);
                RunRecord {
                    run_key: row.get(0),
                    run_id: row.get(1),
                    spec_name: row.get(2),
                    config_key: row.get(3),
                    config_label: row.get(4),
                    machine_key: row.get(5),
                    machine_label: row.get(6),
                    repeat: u32::try_from(row.get::<_, i64>(7)).unwrap_or(0),
                    started_at: row.get(8),
                    revision: row.get(9),
                    software: serde_json::from_str(&software).unwrap_or_default(),
                    source: row.get(11),
                    step_count: u64::try_from(row.get::<_, i64>(12)).unwrap_or(0),
                    steps: row.get(13),
                    metrics: BTreeMap::new(),
                }
            })
            .collect();
        let mut by_run: BTreeMap<String, BTreeMap<Metric, f64>> = BTreeMap::new();
        for row in self.query(schema::SELECT_METRICS, &[&config_key, &machine_key])? {
            if let Some(metric) = Metric::parse(row.get::<_, &str>(1)) {
                by_run.entry(row.get(0)).or_default().insert(metric, row.get(2));
            }
        }
        for run in &mut runs {
            run.metrics = by_run.remove(&run.run_key).unwrap_or_default();
        }
        Ok(runs)
    }

    fn revisions(&mut self) -> Result<Vec<(String, Option<String>)>, StoreError> {
        Ok(self.query(schema::SELECT_REVISIONS, &[])?.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    fn add_ack(&mut self, ack: &Ack) -> Result<(), StoreError> {
        self.query(schema::INSERT_ACK, &[&ack.series, &ack.at_run_key, &ack.why])?;
        Ok(())
    }

    fn acks(&mut self) -> Result<Vec<Ack>, StoreError> {
        Ok(self
            .query(schema::SELECT_ACKS, &[])?
            .iter()
            .map(|row| Ack { series: row.get(0), at_run_key: row.get(1), why: row.get(2) })
            .collect())
    }

    fn reset(&mut self) -> Result<(), StoreError> {
        let shown = self.shown.clone();
        let err = |e: postgres::Error| StoreError::Database { location: shown.clone(), message: full_message(&e) };
        let mut tx = self.client.transaction().map_err(err)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).map_err(err)?;
        for table in schema::TABLES {
            tx.execute(&format!("DROP TABLE IF EXISTS {table}"), &[]).map_err(err)?;
        }
        tx.commit().map_err(err)?;
        self.migrate()
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn the_password_never_shows() {
        assert_eq!(redact("postgres://tb:s3cret@db.example:5432/hist"), "postgres://tb:***@db.example:5432/hist");
        assert_eq!(redact("postgresql://tb@db/hist"), "postgresql://tb@db/hist");
        assert_eq!(
            redact("postgres://db/hist?user=tb&password=s3cret&x=1"),
            "postgres://db/hist?user=tb&password=***&x=1"
        );
    }
}

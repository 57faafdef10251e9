//! The embedded store: one SQLite file (SQLite compiled into trainbench), in WAL mode with a busy timeout so
//! that several `history record` processes can write at once; every write is one immediate transaction.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, TransactionBehavior, params};

use super::record::RunRecord;
use super::schema;
use super::series::Metric;
use super::store::{Ack, SeriesHead, Store, StoreError};

/// How long a writer waits for another's transaction before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// A history store in a SQLite file.
pub struct SqliteStore {
    connection: Connection,
    path: String,
}

impl SqliteStore {
    /// Open the store at `path`, creating the file (and its folder) or migrating its schema when needed. A store
    /// of a newer schema is refused before anything is written; a file that is not a database is named as such.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)
                .map_err(|e| StoreError::Database { location: shown.clone(), message: e.to_string() })?;
        }
        let connection = Connection::open(path).map_err(|e| classify(&shown, e))?;
        let mut store = Self { connection, path: shown };
        store.connection.busy_timeout(BUSY_TIMEOUT).map_err(|e| classify(&store.path, e))?;
        match store.version()? {
            Some(found) if found > schema::SCHEMA_VERSION => {
                return Err(StoreError::Newer {
                    location: store.path.clone(),
                    found,
                    supported: schema::SCHEMA_VERSION,
                });
            }
            Some(found) if found == schema::SCHEMA_VERSION => {}
            _ => {
                // Switching a new file to WAL needs it to itself: another process creating the same store may
                // answer "locked" at once, without the busy timeout, so the switch is tried again until it.
                let _mode: String =
                    retry_while_busy(|| store.connection.query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0)))
                        .map_err(|e| classify(&store.path, e))?;
                store.migrate()?;
            }
        }
        Ok(store)
    }

    fn fail(&self, e: rusqlite::Error) -> StoreError {
        classify(&self.path, e)
    }

    /// The schema version, reading only (`None`: a new store).
    fn version(&self) -> Result<Option<i64>, StoreError> {
        const HAS_TABLE: &str = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'";
        let has_table: i64 =
            retry_while_busy(|| self.connection.query_row(HAS_TABLE, [], |r| r.get(0))).map_err(|e| self.fail(e))?;
        if has_table == 0 {
            return Ok(None);
        }
        retry_while_busy(|| self.connection.query_row(schema::SELECT_VERSION, [], |r| r.get(0)))
            .map_err(|e| self.fail(e))
    }

    /// Bring the schema to this build's version, in one immediate transaction (a concurrent opener waits, then
    /// finds the work done).
    fn migrate(&mut self) -> Result<(), StoreError> {
        let path = self.path.clone();
        let tx = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| classify(&path, e))?;
        tx.execute(schema::CREATE_VERSION_TABLE, []).map_err(|e| classify(&path, e))?;
        let current: Option<i64> =
            tx.query_row(schema::SELECT_VERSION, [], |r| r.get(0)).map_err(|e| classify(&path, e))?;
        let current = current.unwrap_or(0);
        if current > schema::SCHEMA_VERSION {
            return Err(StoreError::Newer { location: path, found: current, supported: schema::SCHEMA_VERSION });
        }
        for (version, statements) in schema::MIGRATIONS.iter().filter(|(v, _)| *v > current) {
            for statement in *statements {
                tx.execute(&schema::with_blob(statement, "BLOB"), []).map_err(|e| classify(&path, e))?;
            }
            tx.execute(schema::INSERT_VERSION, [version]).map_err(|e| classify(&path, e))?;
        }
        tx.commit().map_err(|e| classify(&path, e))
    }
}

/// A SQLite error as a store error: a file that is not a database (or is damaged) is [`StoreError::Corrupt`].
/// `attempt` again while SQLite answers busy or locked, for up to [`BUSY_TIMEOUT`].
fn retry_while_busy<T>(mut attempt: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match attempt() {
            Err(e)
                if matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn classify(path: &str, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            StoreError::Corrupt { path: path.to_string(), message: e.to_string() }
        }
        _ => StoreError::Database { location: path.to_string(), message: e.to_string() },
    }
}

fn run_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RunRecord> {
    let software: String = row.get(10)?;
    let repeat: i64 = row.get(7)?;
    let step_count: i64 = row.get(12)?;
    Ok(RunRecord {
        run_key: row.get(0)?,
        run_id: row.get(1)?,
        spec_name: row.get(2)?,
        config_key: row.get(3)?,
        config_label: row.get(4)?,
        machine_key: row.get(5)?,
        machine_label: row.get(6)?,
        repeat: u32::try_from(repeat).unwrap_or(0),
        started_at: row.get(8)?,
        revision: row.get(9)?,
        software: serde_json::from_str(&software).unwrap_or_default(),
        source: row.get(11)?,
        step_count: u64::try_from(step_count).unwrap_or(0),
        steps: row.get(13)?,
        metrics: BTreeMap::new(),
    })
}

impl Store for SqliteStore {
    fn location(&self) -> &str {
        &self.path
    }

    fn insert_runs(&mut self, runs: &[RunRecord]) -> Result<usize, StoreError> {
        let path = self.path.clone();
        let err = |e| classify(&path, e);
        let tx = self.connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(err)?;
        let mut added = 0;
        {
            let mut insert_run = tx.prepare_cached(schema::INSERT_RUN).map_err(err)?;
            let mut insert_metric = tx.prepare_cached(schema::INSERT_METRIC).map_err(err)?;
            let mut insert_series = tx.prepare_cached(schema::INSERT_SERIES).map_err(err)?;
            for run in runs {
                let software = serde_json::to_string(&run.software).unwrap_or_default();
                let changed = insert_run
                    .execute(params![
                        run.run_key,
                        run.run_id,
                        run.spec_name,
                        run.config_key,
                        run.config_label,
                        run.machine_key,
                        run.machine_label,
                        i64::from(run.repeat),
                        run.started_at,
                        run.revision,
                        software,
                        run.source,
                        i64::try_from(run.step_count).unwrap_or(i64::MAX),
                        run.steps,
                    ])
                    .map_err(err)?;
                if changed == 0 {
                    continue;
                }
                added += 1;
                for (metric, value) in &run.metrics {
                    insert_metric.execute(params![run.run_key, metric.name(), value]).map_err(err)?;
                    insert_series
                        .execute(params![
                            run.config_key,
                            run.machine_key,
                            metric.name(),
                            run.config_label,
                            run.machine_label
                        ])
                        .map_err(err)?;
                }
            }
        }
        tx.commit().map_err(err)?;
        Ok(added)
    }

    fn series(&mut self) -> Result<Vec<SeriesHead>, StoreError> {
        let path = self.path.clone();
        let err = |e| classify(&path, e);
        let mut statement = self.connection.prepare_cached(schema::SELECT_SERIES).map_err(err)?;
        let rows = statement
            .query_map([], |row| {
                Ok(SeriesHead {
                    config_key: row.get(0)?,
                    machine_key: row.get(1)?,
                    metric: row.get(2)?,
                    config_label: row.get(3)?,
                    machine_label: row.get(4)?,
                })
            })
            .map_err(err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(err)
    }

    fn runs_of(&mut self, config_key: &str, machine_key: &str) -> Result<Vec<RunRecord>, StoreError> {
        let path = self.path.clone();
        let err = |e| classify(&path, e);
        let mut runs: Vec<RunRecord> = {
            let mut statement = self.connection.prepare_cached(&schema::select_runs()).map_err(err)?;
            let rows = statement.query_map(params![config_key, machine_key], run_from_row).map_err(err)?;
            rows.collect::<Result<_, _>>().map_err(err)?
        };
        let mut statement = self.connection.prepare_cached(schema::SELECT_METRICS).map_err(err)?;
        let rows = statement
            .query_map(params![config_key, machine_key], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?, row.get::<_, f64>(2)?))
            })
            .map_err(err)?;
        let mut by_run: BTreeMap<String, BTreeMap<Metric, f64>> = BTreeMap::new();
        for row in rows {
            let (run_key, metric, value) = row.map_err(err)?;
            if let Some(metric) = Metric::parse(&metric) {
                by_run.entry(run_key).or_default().insert(metric, value);
            }
        }
        for run in &mut runs {
            run.metrics = by_run.remove(&run.run_key).unwrap_or_default();
        }
        Ok(runs)
    }

    fn revisions(&mut self) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let path = self.path.clone();
        let err = |e| classify(&path, e);
        let mut statement = self.connection.prepare_cached(schema::SELECT_REVISIONS).map_err(err)?;
        let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?))).map_err(err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(err)
    }

    fn add_ack(&mut self, ack: &Ack) -> Result<(), StoreError> {
        let path = self.path.clone();
        let err = |e| classify(&path, e);
        let tx = self.connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(err)?;
        tx.execute(schema::INSERT_ACK, params![ack.series, ack.at_run_key, ack.why]).map_err(err)?;
        tx.commit().map_err(err)
    }

    fn acks(&mut self) -> Result<Vec<Ack>, StoreError> {
        let path = self.path.clone();
        let err = |e| classify(&path, e);
        let mut statement = self.connection.prepare_cached(schema::SELECT_ACKS).map_err(err)?;
        let rows = statement
            .query_map([], |row| Ok(Ack { series: row.get(0)?, at_run_key: row.get(1)?, why: row.get(2)? }))
            .map_err(err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(err)
    }

    fn reset(&mut self) -> Result<(), StoreError> {
        {
            let path = self.path.clone();
            let err = |e| classify(&path, e);
            let tx = self.connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(err)?;
            for table in schema::TABLES {
                tx.execute(&format!("DROP TABLE IF EXISTS {table}"), []).map_err(err)?;
            }
            tx.commit().map_err(err)?;
        }
        self.migrate()
    }
}

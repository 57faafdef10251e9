//! The results history: every recorded run of every configuration on every machine, in a store (embedded
//! SQLite, or PostgreSQL for a team), grouped into series (configuration x machine x metric) whose points are
//! recorded runs, repeats pooled. `trainbench history` ([`crate::commands::history`]) records, lists, detects
//! change points and gates on it; `docs/history.md` explains the identities.
//!
//! Files: [`series`] (what identifies a series and what a run contributes), [`record`] (a result as the store
//! keeps it), [`codec`] (the raw steps, compressed), [`store`] (the trait and opening a location), [`sqlite`] and
//! [`postgres`] (the two stores), [`schema`] (their versioned tables), [`points`] (runs grouped into points and
//! series), [`order`] (points in time or revision order), [`git`] (asking the repository), [`analysis`] (detection and the gate over the store),
//! [`recorder`] (`run --record`), [`page`] (the HTML page of `history report`).

pub mod analysis;
pub mod codec;
pub mod git;
pub mod order;
pub mod page;
pub mod points;
pub mod postgres;
pub mod record;
pub mod recorder;
pub mod schema;
pub mod series;
pub mod sqlite;
pub mod store;

/// Open (creating or migrating when needed) the store at `location` ([`store::location`] says which).
pub fn open(location: &str) -> Result<Box<dyn store::Store>, store::StoreError> {
    if store::is_postgres(location) {
        Ok(Box::new(postgres::PostgresStore::connect(location)?))
    } else {
        Ok(Box::new(sqlite::SqliteStore::open(std::path::Path::new(location))?))
    }
}

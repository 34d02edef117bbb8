//! What every PostgreSQL repository shares: reading a column as Satchel's
//! types, running a prepared query for all rows or the first, a read on a
//! pooled connection ([`read!`]), and bumping a conversation before a
//! write under it.

use deadpool_postgres::GenericClient;
use serde_json::Value;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::postgres::failure::PgFailure;
use crate::{StoreError, Timestamp};

/// A stored name or number this build cannot read.
#[derive(Debug, thiserror::Error)]
#[error("unreadable {what} `{value}`")]
pub(crate) struct Unreadable {
    pub(crate) what: &'static str,
    pub(crate) value: String,
}

impl From<Unreadable> for PgFailure {
    fn from(error: Unreadable) -> PgFailure {
        PgFailure::Store(StoreError::Database {
            path: std::path::PathBuf::new(),
            source: Box::new(error),
        })
    }
}

// ---------------------------------------------------------------- values

/// An unsigned count or size as the BIGINT it is stored as.
pub(crate) fn big(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A `usize` limit as a BIGINT.
pub(crate) fn limit(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(crate) fn unsigned(row: &Row, index: usize) -> Result<u64, PgFailure> {
    let value: i64 = row.try_get(index)?;
    u64::try_from(value).map_err(|_| {
        Unreadable {
            what: "count",
            value: value.to_string(),
        }
        .into()
    })
}

pub(crate) fn small(row: &Row, index: usize) -> Result<u32, PgFailure> {
    let value: i64 = row.try_get(index)?;
    u32::try_from(value).map_err(|_| {
        Unreadable {
            what: "number",
            value: value.to_string(),
        }
        .into()
    })
}

pub(crate) fn optional_small(row: &Row, index: usize) -> Result<Option<u32>, PgFailure> {
    let value: Option<i64> = row.try_get(index)?;
    Ok(value.and_then(|value| u32::try_from(value).ok()))
}

pub(crate) fn optional_unsigned(row: &Row, index: usize) -> Result<Option<u64>, PgFailure> {
    let value: Option<i64> = row.try_get(index)?;
    Ok(value.and_then(|value| u64::try_from(value).ok()))
}

pub(crate) fn timestamp(row: &Row, index: usize) -> Result<Timestamp, PgFailure> {
    Ok(Timestamp::from_millis(row.try_get(index)?))
}

pub(crate) fn optional_time(row: &Row, index: usize) -> Result<Option<Timestamp>, PgFailure> {
    Ok(row
        .try_get::<_, Option<i64>>(index)?
        .map(Timestamp::from_millis))
}

pub(crate) fn json(row: &Row, index: usize) -> Result<Value, PgFailure> {
    let text: String = row.try_get(index)?;
    Ok(serde_json::from_str(&text)?)
}
/// Runs a query (prepared once per connection) and maps every row.
pub(crate) async fn all<C, T>(
    client: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
    map: impl Fn(&Row) -> Result<T, PgFailure>,
) -> Result<Vec<T>, PgFailure>
where
    C: GenericClient + Sync,
{
    let statement = client.prepare_cached(sql).await?;
    client
        .query(&statement, params)
        .await?
        .iter()
        .map(map)
        .collect()
}

/// The first row of a query, mapped, if there is one.
pub(crate) async fn first<C, T>(
    client: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
    map: impl Fn(&Row) -> Result<T, PgFailure>,
) -> Result<Option<T>, PgFailure>
where
    C: GenericClient + Sync,
{
    let statement = client.prepare_cached(sql).await?;
    client
        .query_opt(&statement, params)
        .await?
        .as_ref()
        .map(map)
        .transpose()
}

/// Runs a read on a pooled connection.
macro_rules! read {
    ($store:expr, |$client:ident| $body:expr) => {{
        let store: &crate::postgres::PgStore = $store;
        let object = store.reader().await?;
        let $client = &object;
        let result: Result<_, crate::postgres::failure::PgFailure> = async { $body }.await;
        result.map_err(|failure| store.error(failure))
    }};
}
pub(crate) use read;

// ---------------------------------------------------------------- writes

/// Bumps a conversation's `updated_at` (and locks its row, so that
/// sequence numbers are taken one writer at a time); fails when it does
/// not exist.
pub(super) async fn touch_conversation<C: GenericClient + Sync>(
    tx: &C,
    id: &str,
    now: Timestamp,
) -> Result<(), PgFailure> {
    let statement = tx
        .prepare_cached(
            "UPDATE conversations SET updated_at = greatest(updated_at, $2) WHERE id = $1",
        )
        .await?;
    let changed = tx.execute(&statement, &[&id, &now.as_millis()]).await?;
    if changed == 0 {
        return Err(StoreError::NotFound {
            kind: "conversation",
            id: id.to_owned(),
        }
        .into());
    }
    Ok(())
}

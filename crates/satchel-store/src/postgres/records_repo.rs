//! [`RecordsStore`] on [`PgStore`]: a statement's step (the statement,
//! model calls, log entries, messages) in one transaction.

use async_trait::async_trait;

use crate::postgres::repo::{insert_log_entry, insert_message, insert_statement};
use crate::postgres::usage_repo::insert_llm_call;
use crate::postgres::{PgStore, transact};
use crate::{NewRecords, Recorded, RecordsStore, StoreError};

#[async_trait]
impl RecordsStore for PgStore {
    async fn append_records(&self, new: NewRecords) -> Result<Recorded, StoreError> {
        let mut new = self.redacted(new);
        transact!(self, |tx, ctx| {
            let statement = match new.statement.take() {
                Some(statement) => Some(insert_statement(&tx, &ctx, statement).await?),
                None => None,
            };
            if let Some(statement) = &statement {
                new.belong_to(&statement.id);
            }
            let NewRecords {
                llm_calls,
                log_entries,
                messages,
                ..
            } = new;
            let mut recorded = Recorded {
                statement,
                llm_call_ids: Vec::with_capacity(llm_calls.len()),
                log_entries: Vec::with_capacity(log_entries.len()),
                messages: Vec::with_capacity(messages.len()),
            };
            for call in llm_calls {
                recorded
                    .llm_call_ids
                    .push(insert_llm_call(&tx, &ctx, call).await?);
            }
            for entry in log_entries {
                recorded
                    .log_entries
                    .push(insert_log_entry(&tx, &ctx, entry).await?);
            }
            for message in messages {
                recorded
                    .messages
                    .push(insert_message(&tx, &ctx, message).await?);
            }
            Ok(recorded)
        })
    }
}

//! [`RecordsStore`] on [`SqliteStore`]: a statement's step (the statement,
//! model calls, log entries, messages) as one job on the writer.

use async_trait::async_trait;

use super::repo::{insert_log_entry, insert_message, insert_statement};
use super::usage_repo::insert_llm_call;
use super::{Redact, SqliteStore};
use crate::redact::Redactor;
use crate::{NewRecords, Recorded, RecordsStore, StoreError};

impl Redact for NewRecords {
    fn redact(self, redactor: &Redactor) -> NewRecords {
        NewRecords {
            statement: self.statement.redact(redactor),
            llm_calls: self.llm_calls.redact(redactor),
            log_entries: self.log_entries.redact(redactor),
            messages: self.messages.redact(redactor),
        }
    }
}

#[async_trait]
impl RecordsStore for SqliteStore {
    async fn append_records(&self, new: NewRecords) -> Result<Recorded, StoreError> {
        self.write(new, |tx, ctx, mut new| {
            let statement = new
                .statement
                .take()
                .map(|statement| insert_statement(tx, ctx, statement))
                .transpose()?;
            if let Some(statement) = &statement {
                new.belong_to(&statement.id);
            }
            let NewRecords {
                llm_calls,
                log_entries,
                messages,
                ..
            } = new;
            Ok(Recorded {
                statement,
                llm_call_ids: llm_calls
                    .into_iter()
                    .map(|call| insert_llm_call(tx, ctx, call))
                    .collect::<Result<_, _>>()?,
                log_entries: log_entries
                    .into_iter()
                    .map(|entry| insert_log_entry(tx, ctx, entry))
                    .collect::<Result<_, _>>()?,
                messages: messages
                    .into_iter()
                    .map(|message| insert_message(tx, ctx, message))
                    .collect::<Result<_, _>>()?,
            })
        })
        .await
    }
}

//! Resource subscriptions: a client hears when a resource of Satchel's
//! record changes (a conversation goes on, a memory is added).
//!
//! - 2025-11-25 sessions: `resources/subscribe` and `resources/unsubscribe`;
//!   one watcher task per session sends `notifications/resources/updated`
//!   through its peer, and ends with the session.
//! - 2026-07-28: the URIs in a `subscriptions/listen` filter are watched by
//!   the listen request itself ([`Watched`]).
//!
//! The record has no change feed, so watching is polling: every
//! [`POLL_INTERVAL`], each watched resource's fingerprint is compared with
//! the last one seen. A resource that is deleted counts as a change.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::Peer;

use crate::resources::RecordResources;

/// How often watched resources are checked.
pub(super) const POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Watched URIs and the fingerprint last seen for each (`None`: absent).
#[derive(Debug, Default)]
pub(super) struct Watched {
    seen: BTreeMap<String, Option<u64>>,
}

impl Watched {
    /// Starts watching `uri` from its current state.
    pub(super) async fn add(&mut self, record: &dyn RecordResources, uri: String) {
        let now = record.fingerprint(&uri).await.ok().flatten();
        self.seen.insert(uri, now);
    }

    pub(super) fn remove(&mut self, uri: &str) {
        self.seen.remove(uri);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.seen.len()
    }

    pub(super) fn contains(&self, uri: &str) -> bool {
        self.seen.contains_key(uri)
    }

    /// The URIs whose resource changed since the last look (a read that
    /// fails is no change: it is tried again next time).
    pub(super) async fn changed(&mut self, record: &dyn RecordResources) -> Vec<String> {
        let mut changed = Vec::new();
        for (uri, seen) in &mut self.seen {
            let Ok(now) = record.fingerprint(uri).await else {
                continue;
            };
            if now != *seen {
                *seen = now;
                changed.push(uri.clone());
            }
        }
        changed
    }
}

/// Most resources one session (or one listen request) watches: each is
/// read every [`POLL_INTERVAL`].
pub(super) const MAX_WATCHED: usize = 32;

/// A session's identity: the client's `initialize` parameters, held for as
/// long as its watcher runs (so the allocation cannot be reused by another
/// session meanwhile), compared by address.
type SessionInfo = Arc<rmcp::model::InitializeRequestParams>;

/// One session's watch.
struct SessionWatch {
    info: SessionInfo,
    watched: Arc<tokio::sync::Mutex<Watched>>,
}

/// The legacy sessions' subscriptions, by session.
#[derive(Default)]
pub(super) struct SessionSubscriptions {
    sessions: Mutex<Vec<SessionWatch>>,
}

impl SessionSubscriptions {
    fn sessions(&self) -> MutexGuard<'_, Vec<SessionWatch>> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn find(&self, info: &SessionInfo) -> Option<Arc<tokio::sync::Mutex<Watched>>> {
        self.sessions()
            .iter()
            .find(|session| Arc::ptr_eq(&session.info, info))
            .map(|session| session.watched.clone())
    }

    /// Adds `uri` to the session's watch, starting its watcher if needed.
    /// `Err` says why not (no session, or too many watched).
    pub(super) async fn subscribe(
        self: &Arc<Self>,
        peer: &Peer<RoleServer>,
        record: Arc<dyn RecordResources>,
        uri: String,
    ) -> Result<(), String> {
        let info = peer
            .peer_info()
            .ok_or("resources/subscribe needs a session begun with initialize")?;
        let (watched, start) = {
            let mut sessions = self.sessions();
            match sessions.iter().find(|s| Arc::ptr_eq(&s.info, &info)) {
                Some(session) => (session.watched.clone(), false),
                None => {
                    let watched = Arc::<tokio::sync::Mutex<Watched>>::default();
                    sessions.push(SessionWatch {
                        info: info.clone(),
                        watched: watched.clone(),
                    });
                    (watched, true)
                }
            }
        };
        {
            let mut watch = watched.lock().await;
            if watch.len() >= MAX_WATCHED && !watch.contains(&uri) {
                return Err(format!(
                    "a session watches at most {MAX_WATCHED} resources: unsubscribe from one first"
                ));
            }
            watch.add(record.as_ref(), uri).await;
        }
        if start {
            tokio::spawn(self.clone().watch(info, peer.clone(), record, watched));
        }
        Ok(())
    }

    /// Stops watching `uri` for the session.
    pub(super) async fn unsubscribe(&self, peer: &Peer<RoleServer>, uri: &str) {
        let watched = peer.peer_info().and_then(|info| self.find(&info));
        if let Some(watched) = watched {
            watched.lock().await.remove(uri);
        }
    }

    /// One session's watcher: tells the peer of changes until the session
    /// ends.
    async fn watch(
        self: Arc<Self>,
        info: SessionInfo,
        peer: Peer<RoleServer>,
        record: Arc<dyn RecordResources>,
        watched: Arc<tokio::sync::Mutex<Watched>>,
    ) {
        let mut ticks = tokio::time::interval(POLL_INTERVAL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if peer.is_transport_closed() {
                break;
            }
            let changed = watched.lock().await.changed(record.as_ref()).await;
            for uri in changed {
                let notice = ResourceUpdatedNotificationParam::new(uri);
                if peer.notify_resource_updated(notice).await.is_err() {
                    break;
                }
            }
        }
        self.sessions()
            .retain(|session| !Arc::ptr_eq(&session.info, &info));
    }
}

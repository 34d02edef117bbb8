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

use std::collections::{BTreeMap, HashMap};
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

/// The legacy sessions' subscriptions, by session.
#[derive(Default)]
pub(super) struct SessionSubscriptions {
    sessions: Mutex<HashMap<usize, Arc<tokio::sync::Mutex<Watched>>>>,
}

impl SessionSubscriptions {
    fn sessions(&self) -> MutexGuard<'_, HashMap<usize, Arc<tokio::sync::Mutex<Watched>>>> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds `uri` to the session's watch, starting its watcher if needed.
    pub(super) async fn subscribe(
        self: &Arc<Self>,
        peer: &Peer<RoleServer>,
        record: Arc<dyn RecordResources>,
        uri: String,
    ) {
        let key = session_key(peer);
        let (watched, start) = {
            let mut sessions = self.sessions();
            match sessions.get(&key) {
                Some(watched) => (watched.clone(), false),
                None => {
                    let watched = Arc::<tokio::sync::Mutex<Watched>>::default();
                    sessions.insert(key, watched.clone());
                    (watched, true)
                }
            }
        };
        watched.lock().await.add(record.as_ref(), uri).await;
        if start {
            tokio::spawn(self.clone().watch(key, peer.clone(), record, watched));
        }
    }

    /// Stops watching `uri` for the session.
    pub(super) async fn unsubscribe(&self, peer: &Peer<RoleServer>, uri: &str) {
        let watched = self.sessions().get(&session_key(peer)).cloned();
        if let Some(watched) = watched {
            watched.lock().await.remove(uri);
        }
    }

    /// One session's watcher: tells the peer of changes until the session
    /// ends.
    async fn watch(
        self: Arc<Self>,
        key: usize,
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
        self.sessions().remove(&key);
    }
}

/// Which session a peer belongs to: the address of the client's
/// `initialize` parameters, which the peer holds for the session's life.
fn session_key(peer: &Peer<RoleServer>) -> usize {
    peer.peer_info()
        .map_or(0, |info| Arc::as_ptr(&info) as usize)
}

//! The front ends' inbox and named values, on both backends.

use pretty_assertions::assert_eq;
use satchel_store::{FrontEndStore as _, OpenedStore};
use serde_json::json;

use crate::support::TestDb;

async fn inbox_keeps_each_item_once_until_it_is_handled(store: &OpenedStore) {
    let channel = "telegram:1";
    let kept = store
        .inbox_accept(
            channel,
            vec![(10, json!({"n": 10})), (11, json!({"n": 11}))],
        )
        .await
        .unwrap();
    assert_eq!(kept, [10, 11]);
    store.inbox_done(channel, 11).await.unwrap();
    // Delivered again with a new one: the pending one is still to handle,
    // the handled one is not, the new one is kept; payloads are not doubled.
    let kept = store
        .inbox_accept(
            channel,
            vec![
                (10, json!({"n": 10})),
                (11, json!({"n": 11})),
                (12, json!({"n": 12})),
            ],
        )
        .await
        .unwrap();
    assert_eq!(kept, [10, 12]);
    // Out of order (a webhook's parallel deliveries): both kept.
    assert_eq!(
        store
            .inbox_accept(channel, vec![(20, json!({}))])
            .await
            .unwrap(),
        [20]
    );
    assert_eq!(
        store
            .inbox_accept(channel, vec![(19, json!({}))])
            .await
            .unwrap(),
        [19]
    );
    let pending: Vec<i64> = store
        .inbox_pending(channel)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(pending, [10, 12, 19, 20]);
    assert_eq!(
        store.inbox_pending(channel).await.unwrap()[0].1,
        json!({"n": 10})
    );
    // A handled item delivered again is not taken back.
    assert!(
        store
            .inbox_accept(channel, vec![(11, json!({}))])
            .await
            .unwrap()
            .is_empty()
    );
    // Channels are apart.
    assert_eq!(
        store
            .inbox_accept("other", vec![(10, json!({}))])
            .await
            .unwrap(),
        [10]
    );
    assert_eq!(store.inbox_pending(channel).await.unwrap().len(), 4);

    assert_eq!(store.front_state("k").await.unwrap(), None);
    store.set_front_state("k", "one".into()).await.unwrap();
    store.set_front_state("k", "two".into()).await.unwrap();
    assert_eq!(
        store.front_state("k").await.unwrap().as_deref(),
        Some("two")
    );
}

#[tokio::test]
async fn the_inbox_on_sqlite() {
    let db = TestDb::sqlite();
    inbox_keeps_each_item_once_until_it_is_handled(&db.open().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_on_postgres() {
    let Some(db) = TestDb::postgres() else { return };
    inbox_keeps_each_item_once_until_it_is_handled(&db.open().await).await;
}

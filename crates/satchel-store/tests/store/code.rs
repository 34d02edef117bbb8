//! The `code` tool's traces and jobs: round trips, queries, restarts.

use std::time::Duration;

use crate::support::{START, manual_options};
use satchel_store::{CodeQuery, CodeStore, JobStatus, NewCodeExecution, NewCodeJob};

fn execution(n: u32, success: bool) -> NewCodeExecution {
    NewCodeExecution {
        language: "python".into(),
        runtime: "python3".into(),
        code: format!("print({n})"),
        stdout: if success {
            format!("{n}\n")
        } else {
            String::new()
        },
        stderr: if success {
            String::new()
        } else {
            "NameError: name 'x' is not defined".into()
        },
        exit_code: Some(if success { 0 } else { 1 }),
        duration_ms: u64::from(n) * 10,
        success,
        error_category: (!success).then(|| "reference".into()),
        error_message: (!success).then(|| "NameError: name 'x' is not defined".into()),
        sandbox: "landlock: writes to the temporary directory only, no network".into(),
        tool_call_id: Some(format!("call-{n}")),
        ..NewCodeExecution::default()
    }
}

backend_test!(executions_round_trip_and_filter, |db| async {
    let (options, clock) = manual_options();
    let store = db.open_with(options).await;
    for n in 0..5 {
        store
            .record_execution(execution(n, n % 2 == 0))
            .await
            .unwrap();
        clock.advance(Duration::from_secs(3600));
    }
    let all = store.code_executions(CodeQuery::default()).await.unwrap();
    assert_eq!(all.len(), 5);
    assert_eq!(all[0].code, "print(0)");
    assert_eq!(all[0].created_at, START);
    let failures = store
        .code_executions(CodeQuery {
            failed_only: true,
            ..CodeQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(
        failures.iter().map(|e| e.code.as_str()).collect::<Vec<_>>(),
        ["print(1)", "print(3)"]
    );
    assert_eq!(failures[0].error_category.as_deref(), Some("reference"));
    let since = START.as_millis() + 3 * 3_600_000;
    let recent = store
        .code_executions(CodeQuery {
            since: Some(satchel_store::Timestamp::from_millis(since)),
            ..CodeQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(recent.len(), 2);
    let last_one = store
        .code_executions(CodeQuery {
            limit: Some(1),
            ..CodeQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(last_one[0].code, "print(4)");
    store.close().await.unwrap();
});

backend_test!(
    jobs_move_through_their_states_and_survive_a_restart_as_failed,
    |db| async {
        let store = db.open().await;
        let job = store
            .create_job(NewCodeJob {
                task: "fizzbuzz".into(),
                generator: "model".into(),
                runner: "1@1".into(),
                ..NewCodeJob::default()
            })
            .await
            .unwrap();
        assert_eq!(job.status, JobStatus::Queued);
        let running = store
            .update_job(&job.id, JobStatus::Running, None, None)
            .await
            .unwrap()
            .unwrap();
        assert!(running.started_at.is_some());
        let done = store
            .update_job(&job.id, JobStatus::Done, Some("print('x')".into()), None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (done.status, done.result.as_deref()),
            (JobStatus::Done, Some("print('x')"))
        );
        assert!(done.finished_at.is_some() && done.started_at.is_some());

        let orphan = store
            .create_job(NewCodeJob {
                task: "slow".into(),
                generator: "opencode run".into(),
                runner: "2@2".into(),
                ..NewCodeJob::default()
            })
            .await
            .unwrap();
        store
            .update_job(&orphan.id, JobStatus::Running, None, None)
            .await
            .unwrap();
        store.close().await.unwrap();

        let reopened = db.open().await;
        let unfinished = reopened.unfinished_jobs().await.unwrap();
        let found: Vec<(&str, &str)> = unfinished
            .iter()
            .map(|j| (j.id.as_str(), j.runner.as_str()))
            .collect();
        assert_eq!(found, [(orphan.id.as_str(), "2@2")]);
        let reason = "Satchel restarted while the job ran".to_owned();
        let failed = reopened
            .update_job(&orphan.id, JobStatus::Failed, None, Some(reason.clone()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(failed.status, JobStatus::Failed);
        assert_eq!(failed.error, Some(reason));
        assert!(reopened.unfinished_jobs().await.unwrap().is_empty());
        assert_eq!(
            reopened.job(&job.id).await.unwrap().unwrap().status,
            JobStatus::Done
        );
        assert_eq!(reopened.job("nope").await.unwrap(), None);
        reopened.close().await.unwrap();
    }
);

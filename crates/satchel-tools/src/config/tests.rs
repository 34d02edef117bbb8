//! Tests of configuration: layering, failing closed, warnings.

use pretty_assertions::assert_eq;

use super::*;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn missing_files_mean_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings::load(&Settings::default_paths(dir.path(), Some(dir.path()))).unwrap();
    assert_eq!(settings, Settings::default());
    let (config, warnings) = ToolsConfig::from_settings(&settings);
    assert_eq!(
        format!("{config:?}"),
        format!("{:?}", ToolsConfig::default())
    );
    assert!(warnings.is_empty());
}

#[test]
fn project_wins_over_user_key_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let user = write(
        dir.path(),
        "user.json",
        r#"{"exec": {"stdoutLimitBytes": 100, "stderrLimitBytes": 50}}"#,
    );
    let project = write(
        dir.path(),
        "project.json",
        r#"{"exec": {"stdoutLimitBytes": 200}}"#,
    );
    let settings = Settings::load(&[user, project]).unwrap();
    let (config, warnings) = ToolsConfig::from_settings(&settings);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.runner.stdout.limit_bytes, 200);
    assert_eq!(config.runner.stderr.limit_bytes, 50);
}

#[test]
fn invalid_json_in_any_layer_is_an_error_with_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(
        dir.path(),
        "user.json",
        r#"{"exec": {"stdoutLimitBytes": 100}}"#,
    );
    let bad = write(
        dir.path(),
        "agent.json",
        "{\n  \"exec\": {\n    \"stdoutLimitBytes\": 1,,\n  }\n}",
    );
    let error = Settings::load(&[good, bad.clone()]).unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("{}:3:27: invalid JSON: ", bad.display())),
        "{message}"
    );
    let array = write(dir.path(), "array.json", "[]");
    let error = Settings::load(&[array]).unwrap_err().to_string();
    assert!(error.contains("must hold a JSON object"), "{error}");
}

#[test]
fn files_that_are_not_small_regular_files_are_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |path: &Path| {
        let started = std::time::Instant::now();
        let error = Settings::load(&[path.to_path_buf()]).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "{error}");
        assert!(
            matches!(&error, ConfigError::Unusable { path: p, .. } if p == path),
            "{error:?}"
        );
        error.to_string()
    };
    // A symlink to /dev/zero would never end.
    let zero = dir.path().join("zero.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    assert!(refused(&zero).contains("character device"));
    // A FIFO would block the reader until someone writes.
    let fifo = dir.path().join("fifo.json");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    assert!(refused(&fifo).contains("FIFO"));
    let directory = dir.path().join("dir.json");
    std::fs::create_dir(&directory).unwrap();
    assert!(refused(&directory).contains("directory"));
    let large = write(
        dir.path(),
        "large.json",
        &format!("{{\"systemPrompt\": \"{}\"}}", "x".repeat(2 << 20)),
    );
    assert!(refused(&large).contains("1048576-byte limit"));
    let dangling = dir.path().join("dangling.json");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    assert!(refused(&dangling).contains("does not exist"));
    // Exactly at the limit is fine; a missing file is no file.
    let padded = format!("{{}}{}", " ".repeat(MAX_CONFIG_BYTES as usize - 2));
    let at_limit = write(dir.path(), "limit.json", &padded);
    assert!(read_config_file(&at_limit).unwrap().is_some());
    assert_eq!(read_config_file(&dir.path().join("missing.json")), Ok(None));
}

#[test]
fn permissions_errors_name_file_line_column_and_the_nearest_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "agent.json",
        "{\n  \"permissions\": {\n    \"denny\": [\"bash(rm *)\"],\n    \"allow\": \"bash\",\n    \"ask\": [\"bash(oops\", 3],\n    \"mode\": \"trusted\",\n    \"zzzzzz\": 1\n  }\n}",
    );
    let error = Settings::load(std::slice::from_ref(&path)).unwrap_err();
    let file = path.display();
    let lines: Vec<String> = error.to_string().lines().map(str::to_owned).collect();
    assert_eq!(
        lines,
        [
            format!("{file}:3:5: `denny` is not a key of `permissions`; did you mean `deny`?"),
            format!(
                "{file}:4:5: `permissions.allow` must be a list of rules like [\"bash(rm *)\"], not a string"
            ),
            format!(
                "{file}:5:13: `permissions.ask[0]`: rule `bash(oops` opens a parenthesis it does not close"
            ),
            format!("{file}:5:26: `permissions.ask[1]` must be a rule (a string), not a number"),
            format!(
                "{file}:6:5: `permissions.mode` must be one of \"readonly\", \"workspace\", \"trust\", not \"trusted\""
            ),
            format!(
                "{file}:7:5: `zzzzzz` is not a key of `permissions`; its keys are `allow`, `ask`, `deny` and `mode`"
            ),
        ]
    );
    let not_object = write(dir.path(), "p.json", r#"{"permissions": ["bash"]}"#);
    let error = Settings::load(&[not_object]).unwrap_err().to_string();
    assert!(
        error.contains(":1:2: `permissions` must be an object"),
        "{error}"
    );
}

#[test]
fn unknown_keys_elsewhere_are_warnings_that_keep_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "agent.json",
        "{\n  \"toolCalling\": true,\n  \"maxTurn\": 3,\n  \"exec\": {\"stdoutLimitBytes\": 7, \"stdoutLimt\": 5, \"killGraceMs\": \"soon\"}\n}",
    );
    let settings = Settings::load(std::slice::from_ref(&path)).unwrap();
    let file = path.display();
    assert_eq!(
        settings.warnings,
        [
            format!(
                "{file}:2:3: `toolCalling` is not a key Satchel reads (did you mean `llm.toolCalling`?); ignored"
            ),
            format!(
                "{file}:3:3: `maxTurn` is not a key Satchel reads (did you mean `maxTurns`?); ignored"
            ),
        ]
    );
    let (config, warnings) = ToolsConfig::from_settings(&settings);
    assert_eq!(
        config.runner.stdout.limit_bytes, 7,
        "the rest of `exec` applies"
    );
    assert_eq!(config.runner.kill_grace, RunnerConfig::default().kill_grace);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let lines: Vec<&str> = warnings[0].lines().collect();
    assert_eq!(lines.len(), 2, "{warnings:?}");
    assert_eq!(
        lines[0],
        format!(
            "{file}:4:35: `exec.stdoutLimt`: unknown field `stdoutLimt` (did you mean `exec.stdoutLimitBytes`?); ignored, the rest of `exec` applies"
        )
    );
    assert!(
        lines[1].starts_with(&format!("{file}:4:52: `exec.killGraceMs`: invalid type")),
        "{}",
        lines[1]
    );
}

#[test]
fn positions_follow_the_last_duplicate_and_escaped_keys() {
    let layer = Layer::parse(
        Path::new("a.json"),
        "{\"a\": {\"b\": 1}, \"a\": {\"x\": [1, {\"c\\u0064\": [true]}], \"b\": 2}}".to_owned(),
    )
    .unwrap();
    let key = JsonStep::key;
    assert_eq!(layer.locate(&[key("a"), key("b")]), Some((1, 54)));
    assert_eq!(
        layer.locate(&[
            key("a"),
            key("x"),
            JsonStep::Index(1),
            key("cd"),
            JsonStep::Index(0)
        ]),
        Some((1, 45))
    );
    assert_eq!(
        layer.locate(&[key("a"), key("x"), JsonStep::Index(2)]),
        None
    );
    assert_eq!(layer.locate(&[key("nope")]), None);
}

#[test]
fn malformed_section_falls_back_to_defaults_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "agent.json", r#"{"exec": {"stdoutLimt": 5}}"#);
    let (config, warnings) = ToolsConfig::from_settings(&Settings::load(&[path]).unwrap());
    assert_eq!(
        format!("{config:?}"),
        format!("{:?}", ToolsConfig::default())
    );
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("unknown field `stdoutLimt`"),
        "{}",
        warnings[0]
    );
    let shape = write(dir.path(), "shape.json", r#"{"exec": "big"}"#);
    let (config, warnings) = ToolsConfig::from_settings(&Settings::load(&[shape]).unwrap());
    assert_eq!(
        format!("{config:?}"),
        format!("{:?}", ToolsConfig::default())
    );
    assert!(
        warnings[0].contains("using defaults for `exec`"),
        "{warnings:?}"
    );
}

#[test]
fn tool_result_max_length_is_a_top_level_key() {
    let dir = tempfile::tempdir().unwrap();
    let set = write(dir.path(), "set.json", r#"{"toolResultMaxLength": 80}"#);
    let (config, warnings) = ToolsConfig::from_settings(&Settings::load(&[set]).unwrap());
    assert_eq!(config.tool_result_max_length, 80);
    assert!(warnings.is_empty(), "{warnings:?}");
    let bad = write(dir.path(), "bad.json", r#"{"toolResultMaxLength": "long"}"#);
    let (config, warnings) = ToolsConfig::from_settings(&Settings::load(&[bad]).unwrap());
    assert_eq!(
        config.tool_result_max_length,
        DEFAULT_TOOL_RESULT_MAX_LENGTH
    );
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("toolResultMaxLength"),
        "{}",
        warnings[0]
    );
}

#[test]
fn spill_can_be_switched_off_or_moved() {
    let dir = tempfile::tempdir().unwrap();
    let off = write(dir.path(), "off.json", r#"{"exec": {"spill": false}}"#);
    assert_eq!(
        ToolsConfig::from_settings(&Settings::load(&[off]).unwrap())
            .0
            .runner
            .spill
            .dir,
        None
    );
    let moved = write(
        dir.path(),
        "moved.json",
        r#"{"exec": {"spillDir": "/var/tmp/x"}}"#,
    );
    let dir = ToolsConfig::from_settings(&Settings::load(&[moved]).unwrap())
        .0
        .runner
        .spill
        .dir;
    assert_eq!(dir, Some(PathBuf::from("/var/tmp/x")));
}

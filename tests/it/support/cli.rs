//! The built `aigw api`, run off the async runtime so that an in-process emulator keeps serving.

use std::process::Output;

/// Runs `aigw api --management-url {management_url} --token-file … {args}`, the file holding
/// `token`.
pub async fn aigw_api<S: AsRef<str>>(management_url: &str, token: &str, args: &[S]) -> Output {
    let token_file = tempfile::NamedTempFile::new().expect("token file");
    std::fs::write(token_file.path(), token).expect("token written");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_aigw"));
    command
        .arg("api")
        .args(["--management-url", management_url])
        .arg("--token-file")
        .arg(token_file.path())
        .args(args.iter().map(AsRef::as_ref));
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("aigw runs");
    drop(token_file);
    output
}

/// [`aigw_api`], which must succeed (else a panic with its stderr).
pub async fn aigw_api_ok<S: AsRef<str> + std::fmt::Debug>(
    management_url: &str,
    token: &str,
    args: &[S],
) -> Output {
    let output = aigw_api(management_url, token, args).await;
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

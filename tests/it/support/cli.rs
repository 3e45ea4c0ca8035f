//! The built `aigw api`, run off the async runtime so that an in-process emulator keeps serving.

use std::process::Output;

/// Runs `aigw api --management-url {management_url} --token-file … {args}`, the file holding
/// `token`.
pub async fn aigw_api<S: AsRef<str>>(management_url: &str, token: &str, args: &[S]) -> Output {
    against("api", management_url, token, args).await
}

/// Runs `aigw {subcommand} --management-url {management_url} --token-file … {args}`, the file
/// holding `token`.
pub async fn against<S: AsRef<str>>(
    subcommand: &str,
    management_url: &str,
    token: &str,
    args: &[S],
) -> Output {
    let token_file = tempfile::NamedTempFile::new().expect("token file");
    std::fs::write(token_file.path(), token).expect("token written");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_aigw"));
    command
        .arg(subcommand)
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

/// Runs `command` (the built `aigw`, from [`command`]) off the async runtime; its exit code, and
/// its stdout then stderr.
pub async fn run(mut command: std::process::Command) -> (Option<i32>, String) {
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("aigw runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), text)
}

/// The built `aigw`.
pub fn command() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_aigw"))
}

/// A process of the built `aigw` (an operator, an emulator), its stdout and stderr in `log`:
/// killed when dropped, its log printed if the test panics.
pub struct Process {
    pub child: std::process::Child,
    pub log: std::path::PathBuf,
}

impl Process {
    /// Starts `command` ([`command`] and its arguments) with the operator's debug logging into
    /// `log`, in plain text (`NO_COLOR`, which tracing's formatter honours).
    pub fn spawn(mut command: std::process::Command, log: std::path::PathBuf) -> Self {
        let child = command
            .env("RUST_LOG", "aigw=debug,info")
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::options().append(true).open(&log).unwrap())
            .spawn()
            .expect("failed to start aigw");
        Self { child, log }
    }

    /// The address an `aigw operator` started with `--metrics-addr 127.0.0.1:0` serves its
    /// metrics and probes on, read from its log once it says so. The kernel picks a free port
    /// at the bind: a port picked by the test and handed over could be taken in between (by
    /// another test's outgoing connection, for one).
    pub async fn probes_addr(&self) -> std::net::SocketAddr {
        self.said_addr("serving /metrics, /healthz and /readyz")
            .await
    }

    /// The `addr` of the first log line that says `message`, once there is one: where an
    /// `aigw` started on port 0 listens.
    pub async fn said_addr(&self, message: &str) -> std::net::SocketAddr {
        said_addr(&self.log, message, std::time::Duration::from_secs(30)).await
    }

    /// Sends it `signal` (`-TERM`, `-KILL`, `-STOP`, …) with `kill`.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let status = std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal} {pid} failed");
    }
}

/// The `addr` of the first line of the log file `log` that says `message`, once there is one
/// (within `limit`): where an `aigw` started on port 0 listens.
pub async fn said_addr(
    log: &std::path::Path,
    message: &str,
    limit: std::time::Duration,
) -> std::net::SocketAddr {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(addr) = addr_in(&text, message) {
            return addr;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no log line says {message:?} with its addr:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The `addr` of the first line of `log` that says `message`.
fn addr_in(log: &str, message: &str) -> Option<std::net::SocketAddr> {
    let line = log.lines().find(|l| l.contains(message))?;
    let value = line.split_once("addr=")?.1;
    value.split_whitespace().next()?.parse().ok()
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            eprintln!("--- log of {} ---\n{log}", self.log.display());
        }
    }
}

/// Runs the built `aigw` with `args` ([`run`]).
pub async fn aigw<I, S>(args: I) -> (Option<i32>, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut command = command();
    command.args(args);
    run(command).await
}

/// The text of the manifest `aigw export` wrote under `out` for the `kind` object that names
/// `slug`.
pub fn exported_manifest(out: &std::path::Path, kind: &str, slug: &str) -> String {
    let kind_line = format!("kind: {kind}");
    std::fs::read_dir(out)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .find(|t| t.contains(&kind_line) && t.contains(slug))
        .unwrap_or_else(|| panic!("no exported {kind} manifest names {slug}"))
}

/// `aigw plan` of the manifest `manifest` (written to a file of its own) against the management
/// API at `management_url`, once per output format: each format, its exit code, and its stdout
/// then stderr.
pub async fn plan_each_output(
    management_url: &str,
    token: &str,
    manifest: &str,
) -> Vec<(&'static str, Option<i32>, String)> {
    let file = tempfile::NamedTempFile::new().expect("manifest file");
    std::fs::write(file.path(), manifest).expect("manifest written");
    let path = file.path().to_str().unwrap();
    let mut plans = Vec::new();
    for output in ["human", "json"] {
        let args = ["-f", path, "--output", output];
        let out = against("plan", management_url, token, &args).await;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        plans.push((output, out.status.code(), text));
    }
    plans
}

//! `cargo xtask services`: make sure the databases the tests talk to accept connections.
//!
//! Each service is probed by a TCP connect to its port on 127.0.0.1. A service that is down is
//! started with its usual command (through `sh -c`), then given up to 60 seconds to come up.
//! With `CI=true` a service that is still unreachable is an error, otherwise a warning.

use std::{
    env, fs,
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use crate::util::{self, Result};

/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a started service gets to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Pause between two connection attempts while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// A local service the tests need.
struct Service {
    /// Name shown to the user.
    name: &'static str,
    /// Where it listens.
    addr: SocketAddr,
    /// Shell command that starts it when it is down.
    start: &'static str,
}

/// The services, in the order they are checked.
fn services() -> [Service; 3] {
    [
        Service {
            name: "postgresql",
            addr: SocketAddr::from(([127, 0, 0, 1], 5432)),
            start: "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
        },
        Service {
            name: "mariadb",
            addr: SocketAddr::from(([127, 0, 0, 1], 3306)),
            start: "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd",
        },
        Service {
            name: "redis",
            addr: SocketAddr::from(([127, 0, 0, 1], 6379)),
            start: "redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save \"\" \
                    --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log",
        },
    ]
}

/// What became of one service.
enum State {
    /// It accepted connections at once.
    Up,
    /// It was down, was started and now accepts connections.
    Started,
    /// It does not accept connections; the string says why.
    Unreachable(String),
}

/// Runs `cargo xtask services`.
pub(crate) fn run() -> Result {
    let mut unreachable = Vec::new();
    for service in services() {
        let state = ensure(&service);
        match &state {
            State::Up => println!("{:<10} {}: up", service.name, service.addr),
            State::Started => println!("{:<10} {}: started", service.name, service.addr),
            State::Unreachable(why) => {
                println!("{:<10} {}: unreachable ({why})", service.name, service.addr);
                unreachable.push(service.name);
            }
        }
    }
    if unreachable.is_empty() {
        return Ok(());
    }
    let names = unreachable.join(", ");
    if util::is_ci() {
        Err(format!("CI=true and these services are unreachable: {names}").into())
    } else {
        eprintln!(
            "warning: unreachable services: {names}; tests that need them will fail or skip \
             (with CI=true this is an error)"
        );
        Ok(())
    }
}

/// Probes `service`, starting it and waiting for it if it is down.
fn ensure(service: &Service) -> State {
    if accepts(service.addr) {
        return State::Up;
    }
    if let Err(why) = start(service) {
        return State::Unreachable(why);
    }
    let deadline = Instant::now()
        .checked_add(START_TIMEOUT)
        .unwrap_or_else(Instant::now);
    loop {
        if accepts(service.addr) {
            return State::Started;
        }
        if Instant::now() >= deadline {
            return State::Unreachable(format!(
                "started, but no connection within {}",
                util::secs(START_TIMEOUT)
            ));
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// Whether something accepts TCP connections at `addr`.
fn accepts(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).is_ok()
}

/// Runs the start command of `service`.
///
/// Its output goes to a log file, not to our stdout/stderr: a daemon that kept our pipes open
/// would keep whoever reads them (CI's log) waiting for ever. The log is shown afterwards.
fn start(service: &Service) -> std::result::Result<(), String> {
    println!(
        "{:<10} {}: down, starting: {}",
        service.name, service.addr, service.start
    );
    let log_path = log_path(service.name);
    let log = fs::File::create(&log_path)
        .map_err(|err| format!("cannot create {}: {err}", log_path.display()))?;
    let log_err = log
        .try_clone()
        .map_err(|err| format!("cannot reopen {}: {err}", log_path.display()))?;
    let status = Command::new("sh")
        .arg("-c")
        .arg(service.start)
        // A daemon should not keep the work tree as its working directory.
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .status();
    show_log(&log_path);
    let _ = fs::remove_file(&log_path);
    match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("start command failed ({status})")),
        Err(err) => Err(format!("cannot run sh: {err}")),
    }
}

/// Where the output of a start command goes.
fn log_path(name: &str) -> PathBuf {
    env::temp_dir().join(format!("xtask-services-{name}-{}.log", std::process::id()))
}

/// Prints what a start command wrote, indented, if anything.
fn show_log(path: &Path) {
    let Ok(text) = fs::read_to_string(path) else {
        return;
    };
    for line in text.lines() {
        println!("    | {line}");
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    /// A loopback address nothing listens on (for a moment, at least).
    fn free_addr() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    }

    #[test]
    fn up_service_is_up() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let service = Service {
            name: "fake",
            addr: listener.local_addr().unwrap(),
            start: "exit 1",
        };
        assert!(matches!(ensure(&service), State::Up));
    }

    #[test]
    fn failing_start_command_is_unreachable_at_once() {
        let service = Service {
            name: "fake",
            addr: free_addr(),
            start: "echo cannot start >&2; exit 3",
        };
        let started = Instant::now();
        let state = ensure(&service);
        assert!(matches!(&state, State::Unreachable(why) if why.contains("failed")));
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn started_service_is_waited_for() {
        let addr = free_addr();
        // The "service" comes up a second after the probe, while its start command runs.
        let server = thread::spawn(move || {
            thread::sleep(Duration::from_secs(1));
            let listener = TcpListener::bind(addr).unwrap();
            let _ = listener.accept();
        });
        let service = Service {
            name: "fake",
            addr,
            start: "sleep 2",
        };
        assert!(matches!(ensure(&service), State::Started));
        server.join().unwrap();
    }
}

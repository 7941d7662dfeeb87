//! With OTEL_EXPORTER_OTLP_ENDPOINT set, the command exports its spans and metrics over OTLP
//! (HTTP/protobuf) before it exits: a small collector here records what it is sent. Without
//! it, nothing is sent and the command behaves as before.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use support::cli;

/// The requests a collector received: path and body.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// An OTLP/HTTP collector that answers every request with an empty protobuf message (a
/// successful export) and records it.
fn collector() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let received: Received = Arc::default();
    let kept = Arc::clone(&received);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let kept = Arc::clone(&kept);
            std::thread::spawn(move || serve(stream, &kept));
        }
    });
    (address, received)
}

/// Answers the requests of one connection until it closes.
fn serve(stream: TcpStream, received: &Received) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        received.lock().unwrap().push((path, body));
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[test]
fn a_command_exports_its_spans_and_metrics_to_the_otlp_endpoint() {
    let (endpoint, received) = collector();
    cli()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env_remove("OTEL_SERVICE_NAME")
        .args(["--url", "memory:", "threads"])
        .assert()
        .success();
    let received = received.lock().unwrap();
    let traces: Vec<&Vec<u8>> = received
        .iter()
        .filter(|(path, _)| path == "/v1/traces")
        .map(|(_, body)| body)
        .collect();
    let metrics: Vec<&Vec<u8>> = received
        .iter()
        .filter(|(path, _)| path == "/v1/metrics")
        .map(|(_, body)| body)
        .collect();
    let paths: Vec<&str> = received.iter().map(|(path, _)| path.as_str()).collect();
    assert!(
        traces
            .iter()
            .any(|body| contains(body, "list_threads memory")
                && contains(body, "db.operation.name")
                && contains(body, "agent-memory")),
        "no store span exported: {paths:?}"
    );
    assert!(
        metrics
            .iter()
            .any(|body| contains(body, "db.client.operation.duration")),
        "no duration metric exported: {paths:?}"
    );
}

#[test]
fn without_an_endpoint_nothing_is_exported() {
    let (endpoint, received) = collector();
    // The endpoint is only in a variable the command does not read.
    cli()
        .env("UNRELATED_ENDPOINT", &endpoint)
        .args(["--url", "memory:", "threads"])
        .assert()
        .success();
    assert!(received.lock().unwrap().is_empty());
}

/// Issue 29 (10): the log lines on stderr had colour codes (`\x1b[2m…`) also when stderr was a
/// file or a pipe. They are plain text unless stderr is a terminal.
#[test]
fn log_lines_written_to_a_pipe_have_no_colour_codes() {
    let (endpoint, _received) = collector();
    let output = cli()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("RUST_LOG", "debug")
        .args(["--url", "memory:", "threads"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("DEBUG"), "no log line to check: {stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes in a pipe: {stderr}"
    );
}

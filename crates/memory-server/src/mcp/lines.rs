//! The stdio transport: newline-delimited JSON-RPC over a reader and a writer, in front of
//! rmcp, so that every line a client sends is answered.
//!
//! rmcp's own stdio transport drops what it cannot read without a word (a line that is not
//! JSON, nests too deep, or is longer than its 16 MiB cap), and a client waits forever for
//! the answer. Here each line is read with a bound ([`LineTransport::new`]'s `max_line_bytes`:
//! the server's body limit, the same as over HTTP) and checked by [`jsonrpc::read`]: a line
//! over the bound, not JSON, too deep, a batch or not a JSON-RPC message is answered with a
//! JSON-RPC error, under the request's id when it can be read, and the session goes on.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use super::jsonrpc::{self, ID_SCAN_BYTES, Read, Refusal};

/// One line as [`LineTransport::read_line`] found it.
enum Line {
    /// A whole line is in the buffer.
    Whole,
    /// The line was longer than the bound: its length and its first bytes.
    TooLong { len: usize, head: Vec<u8> },
    /// The client closed its end.
    End,
    /// Reading failed.
    Failed(std::io::Error),
}

/// Newline-delimited JSON-RPC over `R` and `W`, every line answered (see the module).
#[derive(Debug)]
pub struct LineTransport<R, W> {
    reader: BufReader<R>,
    /// The line read so far (of a line over the bound: its first [`ID_SCAN_BYTES`]).
    line: Vec<u8>,
    /// The length of the line read so far, once it passed the bound.
    over: Option<usize>,
    max_line_bytes: usize,
    writer: Arc<Mutex<W>>,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A transport reading requests from `reader` and writing answers to `writer`, one JSON
    /// text a line; a line longer than `max_line_bytes` is refused unread.
    pub fn new(reader: R, writer: W, max_line_bytes: usize) -> Self {
        Self {
            reader: BufReader::new(reader),
            line: Vec::new(),
            over: None,
            max_line_bytes,
            writer: Arc::new(Mutex::new(writer)),
        }
    }

    /// Reads up to the next newline without holding more than `max_line_bytes` of it.
    ///
    /// Cancellation-safe (rmcp polls `receive` in a `select!`): what was read stays in `line`
    /// and `over`, and the next call goes on with the same line.
    async fn read_line(&mut self) -> Line {
        loop {
            let available = match self.reader.fill_buf().await {
                Ok(available) => available,
                Err(e) => return Line::Failed(e),
            };
            if available.is_empty() {
                return Line::End;
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |at| at.saturating_add(1));
            let chunk = available.get(..take).unwrap_or_default();
            let content = chunk.strip_suffix(b"\n").unwrap_or(chunk);
            let len = self
                .over
                .unwrap_or(self.line.len())
                .saturating_add(content.len());
            if len > self.max_line_bytes {
                // Keep the head (the id is looked for there), drop the rest as it comes.
                self.line.truncate(ID_SCAN_BYTES);
                let room = ID_SCAN_BYTES.saturating_sub(self.line.len());
                self.line
                    .extend_from_slice(content.get(..room.min(content.len())).unwrap_or_default());
                self.over = Some(len);
            } else {
                self.line.extend_from_slice(content);
            }
            self.reader.consume(take);
            if newline.is_some() {
                return match self.over.take() {
                    Some(len) => Line::TooLong {
                        len,
                        head: std::mem::take(&mut self.line),
                    },
                    None => Line::Whole,
                };
            }
        }
    }

    /// Writes the error answer of `refusal`, whatever becomes of the `receive` that found it
    /// (a task of its own, so a cancelled `receive` cannot cut an answer in half).
    fn answer(&self, refusal: &Refusal) {
        tracing::debug!(code = refusal.code.0, reason = %refusal.message, "MCP request refused");
        let mut bytes = refusal.to_response().to_string().into_bytes();
        bytes.push(b'\n');
        let writer = Arc::clone(&self.writer);
        tokio::spawn(async move {
            if let Err(e) = write_line(&writer, &bytes).await {
                tracing::warn!(error = %e, "could not answer a refused MCP request");
            }
        });
    }
}

async fn write_line<W: AsyncWrite + Unpin>(writer: &Mutex<W>, bytes: &[u8]) -> std::io::Result<()> {
    let mut writer = writer.lock().await;
    writer.write_all(bytes).await?;
    writer.flush().await
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = Arc::clone(&self.writer);
        async move {
            let mut bytes = serde_json::to_vec(&item)?;
            bytes.push(b'\n');
            write_line(&writer, &bytes).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read_line().await {
                Line::Whole => {}
                Line::TooLong { len, head } => {
                    self.answer(&jsonrpc::too_large(Some(len), self.max_line_bytes, &head));
                    continue;
                }
                Line::End => return None,
                Line::Failed(e) => {
                    tracing::warn!(error = %e, "reading the MCP client's requests failed");
                    return None;
                }
            }
            let taken = std::mem::take(&mut self.line);
            let line = taken.strip_suffix(b"\r").unwrap_or(&taken);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match jsonrpc::read(line) {
                Ok(Read::Message(message)) => return Some(*message),
                Ok(Read::Ignored) => {}
                Err(refusal) => self.answer(&refusal),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.lock().await.flush().await
    }
}

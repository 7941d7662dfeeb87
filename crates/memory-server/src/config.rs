//! The server's configuration: one TOML file, then environment overrides.
//!
//! ```toml
//! listen = "127.0.0.1:8080"                 # default
//! store_url = "sqlite://agent-memory.db"    # default: $AGENT_MEMORY_URL, else the facade's default
//!
//! [limits]
//! max_body_bytes = 16777216                 # default 16 MiB; 413 above it
//! max_messages_per_append = 1000            # default 1000 (at most 10,000)
//!
//! [[tokens]]                                # each token: its SHA-256 (hex), never the token
//! sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! tenant = "acme"
//! user = "alice"                            # optional: the token can address only this user
//!
//! [http]                                    # connections ([`http`]): timeouts, cap, hosts
//! header_timeout_secs = 10
//!
//! [log]                                     # the log on stderr ([`log`])
//! format = "json"                           # "text" (default) | "json"
//! ```
//!
//! Environment overrides (each wins over the file):
//!
//! | variable | sets |
//! | --- | --- |
//! | `AGENT_MEMORY_SERVER_LISTEN` | `listen` |
//! | `AGENT_MEMORY_URL` | `store_url` |
//! | `AGENT_MEMORY_SERVER_MAX_BODY_BYTES` | `limits.max_body_bytes` |
//! | `AGENT_MEMORY_SERVER_MAX_MESSAGES_PER_APPEND` | `limits.max_messages_per_append` |
//! | `AGENT_MEMORY_SERVER_TOKENS` | more tokens, in plain text: `tenant[:user]=token`, comma-separated |
//! | `AGENT_MEMORY_SERVER_EMBEDDER`, `..._EMBEDDER_MODEL`, `..._EMBEDDER_BASE_URL`, `..._EMBEDDER_DIMENSIONS` | `embedder.kind`, `.model`, `.base_url`, `.dimensions` ([`crate::embedder`]) |
//! | `AGENT_MEMORY_SERVER_RETRIEVAL`, `..._TEXT_INDEX`, `..._TEXT_INDEX_DIR` | `memory.retrieval`, `.text_index`, `.text_index_dir` ([`crate::retrieval`]) |
//! | `AGENT_MEMORY_SERVER_FUSION`, `..._FUSION_DENSE_WEIGHT`, `..._FUSION_LEXICAL_WEIGHT`, `..._FUSION_RRF_K`, `..._FUSION_CANDIDATES` | `memory.fusion.method`, `.dense_weight`, `.lexical_weight`, `.rrf_k`, `.candidates` |
//! | `AGENT_MEMORY_SERVER_ALLOWED_HOSTS` | `http.allowed_hosts` (comma-separated) |
//! | `AGENT_MEMORY_SERVER_HEADER_TIMEOUT_SECS`, `..._BODY_TIMEOUT_SECS`, `..._IDLE_TIMEOUT_SECS`, `..._SHUTDOWN_TIMEOUT_SECS`, `..._MAX_CONNECTIONS` | `http.header_timeout_secs`, `.body_timeout_secs`, `.idle_timeout_secs`, `.shutdown_timeout_secs`, `.max_connections` ([`http`]) |
//! | `AGENT_MEMORY_LOG_FORMAT` | `log.format` ([`log`]) |
//!
//! With no token at all the server authenticates nobody: every request is the `default`
//! tenant. That is allowed only on a loopback listen address; [`ServerConfig::authenticator`]
//! refuses any other, and such a server answers only to loopback host names and
//! `http.allowed_hosts` ([`AllowedHosts`]).

pub mod http;
pub mod log;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;

use agent_memory::{MAX_BATCH_BYTES, MAX_BATCH_MESSAGES, TenantId, UserId};
use serde::Deserialize;

use crate::auth::{Authenticator, Principal, TokenEntry};
use crate::embedder::EmbedderConfig;
use crate::ops::{Ops, OpsLimits};
use crate::retrieval::MemoryConfig;

pub use http::{AllowedHosts, HttpConfig, Transport};
pub use log::{LOG_FORMAT_ENV, LogConfig, LogFormat};

/// The listen address when none is configured.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The request body limit when none is configured: 16 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// The largest body limit accepted: a full batch ([`MAX_BATCH_BYTES`]) plus 1 MiB of JSON
/// framing.
pub const MAX_BODY_BYTES: usize = MAX_BATCH_BYTES + 1024 * 1024;
pub use crate::config_error::{ConfigError, ENV_PREFIX};

/// A token as configured in the file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// The token's SHA-256, as 64 hex digits (`printf %s "$TOKEN" | sha256sum`).
    pub sha256: String,
    /// The tenant the token is bound to.
    pub tenant: String,
    /// The user the token is bound to, if any.
    #[serde(default)]
    pub user: Option<String>,
}

/// The request limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// The largest request body, in bytes (413 above it).
    pub max_body_bytes: usize,
    /// The most messages one append may carry.
    pub max_messages_per_append: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_messages_per_append: OpsLimits::default().max_messages_per_append,
        }
    }
}

/// The `[mcp]` table: the MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// Whether `agent-memory serve` serves MCP at `/mcp` (streamable HTTP) beside the HTTP
    /// API (default `true`; `agent-memory mcp` over stdio ignores it).
    pub enabled: bool,
    /// The server's name in the MCP handshake (default `agent-memory`).
    pub name: Option<String>,
    /// The instructions given to MCP clients (default
    /// [`DEFAULT_INSTRUCTIONS`](crate::mcp::DEFAULT_INSTRUCTIONS)).
    pub instructions: Option<String>,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            name: None,
            instructions: None,
        }
    }
}

/// The whole configuration.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Where to listen (`host:port`, an IP address; port 0 picks a free port).
    pub listen: String,
    /// The store URL ([`agent_memory::open`]); `None`: `AGENT_MEMORY_URL`, else
    /// [`agent_memory::DEFAULT_URL`].
    pub store_url: Option<String>,
    /// The request limits.
    pub limits: LimitsConfig,
    /// The tokens from the file (digests).
    pub tokens: Vec<TokenConfig>,
    /// The embedder of the vector memory (`[embedder]`, [`crate::embedder`]).
    pub embedder: EmbedderConfig,
    /// The blocks of the server's `Memory` (`[memory]`).
    pub memory: MemoryConfig,
    /// The MCP server (`[mcp]`).
    pub mcp: McpConfig,
    /// Connections: timeouts, the connection cap, the allowed hosts (`[http]`).
    pub http: HttpConfig,
    /// The log on stderr (`[log]`).
    pub log: LogConfig,
    /// Tokens in plain text, from `AGENT_MEMORY_SERVER_TOKENS` (never from the file).
    #[serde(skip)]
    pub plain_tokens: Vec<(String, Principal)>,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("listen", &self.listen)
            .field(
                "store_url",
                &self.store_url.as_deref().map(agent_memory::redact_url),
            )
            .field("limits", &self.limits)
            .field("embedder", &self.embedder.kind)
            .field("mcp", &self.mcp.enabled)
            .field("http", &self.http)
            .field("log", &self.log.format)
            .field(
                "tokens",
                &self.tokens.len().saturating_add(self.plain_tokens.len()),
            )
            .finish()
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN.to_owned(),
            store_url: None,
            limits: LimitsConfig::default(),
            tokens: Vec::new(),
            embedder: EmbedderConfig::default(),
            memory: MemoryConfig::default(),
            mcp: McpConfig::default(),
            http: HttpConfig::default(),
            log: LogConfig::default(),
            plain_tokens: Vec::new(),
        }
    }
}

fn principal(tenant: &str, user: Option<&str>) -> Result<Principal, ConfigError> {
    let tenant = TenantId::new(tenant)
        .map_err(|e| ConfigError(format!("a token's tenant is invalid: {e}")))?;
    let user = user
        .map(UserId::new)
        .transpose()
        .map_err(|e| ConfigError(format!("a token's user is invalid: {e}")))?;
    Ok(Principal { tenant, user })
}

fn parse_hex_digest(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim().as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let text = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

impl ServerConfig {
    /// Parses a TOML document.
    ///
    /// # Errors
    /// A [`ConfigError`] naming what is wrong (unknown keys are errors).
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError(format!("the configuration is invalid: {e}")))
    }

    /// Reads and parses the TOML file at `path`.
    ///
    /// # Errors
    /// A [`ConfigError`] when the file cannot be read or is invalid.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError(format!(
                "could not read the configuration file {}: {e}",
                path.display()
            ))
        })?;
        Self::from_toml(&text)
    }

    /// The file at `path` (or the defaults), then the process environment's overrides.
    ///
    /// # Errors
    /// As [`from_file`](Self::from_file) and [`apply_env`](Self::apply_env).
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let mut config = match path {
            Some(path) => Self::from_file(path)?,
            None => Self::default(),
        };
        config.apply_env(|name| std::env::var(name).ok())?;
        Ok(config)
    }

    /// Applies the overrides `env` returns (see the module's table).
    ///
    /// # Errors
    /// A [`ConfigError`] for a number that does not parse or a malformed token list.
    pub fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let var =
            |suffix: &str| env(&format!("{ENV_PREFIX}{suffix}")).filter(|v| !v.trim().is_empty());
        if let Some(listen) = var("LISTEN") {
            self.listen = listen.trim().to_owned();
        }
        if let Some(url) = env(agent_memory::URL_ENV).filter(|v| !v.trim().is_empty()) {
            self.store_url = Some(url.trim().to_owned());
        }
        let number = |name: &str, value: String| {
            value
                .trim()
                .parse::<usize>()
                .map_err(|_| ConfigError(format!("{ENV_PREFIX}{name} must be a whole number")))
        };
        if let Some(v) = var("MAX_BODY_BYTES") {
            self.limits.max_body_bytes = number("MAX_BODY_BYTES", v)?;
        }
        if let Some(v) = var("MAX_MESSAGES_PER_APPEND") {
            self.limits.max_messages_per_append = number("MAX_MESSAGES_PER_APPEND", v)?;
        }
        self.embedder.apply_env(|suffix| var(suffix))?;
        self.memory.apply_env(|suffix| var(suffix))?;
        self.http.apply_env(|suffix| var(suffix))?;
        self.log.apply_env(&env)?;
        if let Some(list) = var("TOKENS") {
            for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let (who, token) = item.split_once('=').ok_or_else(|| {
                    ConfigError(format!(
                        "{ENV_PREFIX}TOKENS holds an entry that is not `tenant[:user]=token`"
                    ))
                })?;
                if token.trim().is_empty() {
                    return Err(ConfigError(format!(
                        "{ENV_PREFIX}TOKENS holds an empty token"
                    )));
                }
                let (tenant, user) = match who.split_once(':') {
                    Some((tenant, user)) => (tenant, Some(user)),
                    None => (who, None),
                };
                self.plain_tokens.push((
                    token.trim().to_owned(),
                    principal(tenant.trim(), user.map(str::trim))?,
                ));
            }
        }
        Ok(())
    }

    /// The server's searchable memory over `stores` (dense, lexical or hybrid, see
    /// [`crate::retrieval`]), or `None` when memory is not searched; the API key is read from
    /// the process environment.
    ///
    /// # Errors
    /// A [`ConfigError`] for an embedder that cannot be built or retrieval settings that
    /// cannot be used (e.g. `text_index = "store"` on a store without one).
    pub async fn vector_memory(
        &self,
        stores: &agent_memory::Stores,
    ) -> Result<Option<crate::embedder::VectorMemory>, ConfigError> {
        let embedder = self
            .embedder
            .embedder(|name| std::env::var(name).ok())
            .await?;
        self.memory.memory(embedder, stores).await
    }

    /// Opens the store and the searchable memory this configuration names, as operations
    /// within `limits` (the memory settings are checked before the store is opened). For the
    /// servers, whose errors each say these two failures their own way.
    ///
    /// # Errors
    /// A [`ConfigError`] as [`vector_memory`](Self::vector_memory), or the store's error when
    /// it cannot be opened.
    pub(crate) async fn open_ops<E>(&self, limits: OpsLimits) -> Result<Ops, E>
    where
        E: From<ConfigError> + From<agent_memory::Error>,
    {
        let embedder = self
            .embedder
            .embedder(|name| std::env::var(name).ok())
            .await?;
        self.memory.validate(embedder.is_some())?;
        let stores = agent_memory::open(self.store_url()).await?;
        let vector = self.memory.memory(embedder, &stores).await?;
        let ops = Ops::new(stores, limits);
        Ok(match vector {
            Some(memory) => ops.with_vector_memory(memory),
            None => ops,
        })
    }

    /// The listen address.
    ///
    /// # Errors
    /// A [`ConfigError`] when `listen` is not `ip:port`.
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        self.listen.parse().map_err(|_| {
            ConfigError(format!(
                "the listen address `{}` is not an IP address and port, such as 127.0.0.1:8080",
                self.listen
            ))
        })
    }

    /// The store URL to open: `store_url`, else [`agent_memory::DEFAULT_URL`].
    pub fn store_url(&self) -> &str {
        self.store_url
            .as_deref()
            .unwrap_or(agent_memory::DEFAULT_URL)
    }

    /// The limits the operations enforce.
    ///
    /// # Errors
    /// A [`ConfigError`] for a limit of zero or above its maximum.
    pub fn ops_limits(&self) -> Result<OpsLimits, ConfigError> {
        let max = self.limits.max_messages_per_append;
        if max == 0 || max > MAX_BATCH_MESSAGES {
            return Err(ConfigError(format!(
                "limits.max_messages_per_append must be between 1 and {MAX_BATCH_MESSAGES}"
            )));
        }
        Ok(OpsLimits {
            max_messages_per_append: max,
        })
    }

    /// The connection settings of `[http]`, checked.
    ///
    /// # Errors
    /// As [`HttpConfig::transport`].
    pub fn transport(&self) -> Result<Transport, ConfigError> {
        self.http.transport()
    }

    /// The host names a server without tokens answers to: the loopback names, the listen
    /// IP and `http.allowed_hosts`.
    ///
    /// # Errors
    /// A [`ConfigError`] for a listen address that does not parse or an entry that is not a
    /// host.
    pub fn allowed_hosts(&self) -> Result<AllowedHosts, ConfigError> {
        AllowedHosts::with_extra(self.listen_addr()?, &self.http.allowed_hosts)
    }

    /// The body limit.
    ///
    /// # Errors
    /// A [`ConfigError`] for a limit under 1 KiB or above [`MAX_BODY_BYTES`].
    pub fn max_body_bytes(&self) -> Result<usize, ConfigError> {
        let max = self.limits.max_body_bytes;
        if !(1024..=MAX_BODY_BYTES).contains(&max) {
            return Err(ConfigError(format!(
                "limits.max_body_bytes must be between 1024 and {MAX_BODY_BYTES}"
            )));
        }
        Ok(max)
    }

    /// How requests are authenticated: the configured tokens, or, with none, every request
    /// as the `default` tenant, which only a loopback listen address allows.
    ///
    /// # Errors
    /// A [`ConfigError`] for a digest that is not 64 hex digits, an invalid tenant or user, one
    /// token given to two tenants (or to two users of one tenant), or no token on a listen
    /// address that is not loopback.
    pub fn authenticator(&self) -> Result<Authenticator, ConfigError> {
        let mut entries = Vec::new();
        for token in &self.tokens {
            let digest = parse_hex_digest(&token.sha256).ok_or_else(|| {
                ConfigError(format!(
                    "the token of tenant `{}` has a sha256 that is not 64 hex digits",
                    token.tenant
                ))
            })?;
            entries.push(TokenEntry::from_digest(
                digest,
                principal(&token.tenant, token.user.as_deref())?,
            ));
        }
        for (secret, principal) in &self.plain_tokens {
            entries.push(TokenEntry::from_secret(secret, principal.clone()));
        }
        if !entries.is_empty() {
            check_no_shared_token(&entries)?;
            return Ok(Authenticator::Tokens(entries));
        }
        let addr = self.listen_addr()?;
        if !addr.ip().is_loopback() {
            return Err(ConfigError(format!(
                "no token is configured, so the server only listens on a loopback address, not {addr}; configure [[tokens]] or {ENV_PREFIX}TOKENS"
            )));
        }
        let tenant = TenantId::new(agent_memory::scope::DEFAULT_TENANT)
            .map_err(|e| ConfigError(e.to_string()))?;
        Ok(Authenticator::Open(Principal::tenant(tenant)))
    }
}

/// Refuses one token given to two principals: the first would win every request, so the
/// other tenant's (or user's) writes would silently land in the first. The error names the
/// two, never the token or its digest.
fn check_no_shared_token(entries: &[TokenEntry]) -> Result<(), ConfigError> {
    let mut seen: HashMap<[u8; 32], &Principal> = HashMap::with_capacity(entries.len());
    for entry in entries {
        let principal = entry.principal();
        match seen.get(entry.digest()) {
            Some(first) if *first != principal => {
                let who = |p: &Principal| match &p.user {
                    Some(user) => format!("tenant `{}` (user `{}`)", p.tenant, user),
                    None => format!("tenant `{}`", p.tenant),
                };
                return Err(ConfigError(format!(
                    "one token is configured for two principals, {} and {}; give each its own token",
                    who(first),
                    who(principal)
                )));
            }
            Some(_) => {}
            None => {
                seen.insert(*entry.digest(), principal);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::sha256;

    fn hex(bytes: [u8; 32]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn defaults_listen_on_loopback_without_tokens() {
        let config = ServerConfig::from_toml("").unwrap();
        assert_eq!(config.listen, DEFAULT_LISTEN);
        assert!(matches!(
            config.authenticator().unwrap(),
            Authenticator::Open(_)
        ));
        assert_eq!(config.max_body_bytes().unwrap(), DEFAULT_MAX_BODY_BYTES);
    }

    #[test]
    fn no_tokens_on_a_public_address_is_refused() {
        let config = ServerConfig::from_toml("listen = \"0.0.0.0:8080\"").unwrap();
        let err = config.authenticator().unwrap_err();
        assert!(err.0.contains("loopback"), "{err}");
    }

    #[test]
    fn file_tokens_and_env_tokens_authenticate() {
        let text = format!(
            "listen = \"0.0.0.0:9000\"\n[limits]\nmax_messages_per_append = 5\n[[tokens]]\nsha256 = \"{}\"\ntenant = \"acme\"\nuser = \"alice\"\n",
            hex(sha256("file-token"))
        );
        let mut config = ServerConfig::from_toml(&text).unwrap();
        config
            .apply_env(|name| match name {
                "AGENT_MEMORY_SERVER_TOKENS" => Some("beta=env-token, gamma:gus=other".to_owned()),
                "AGENT_MEMORY_SERVER_LISTEN" => Some("127.0.0.1:0".to_owned()),
                _ => None,
            })
            .unwrap();
        assert_eq!(config.listen, "127.0.0.1:0");
        assert_eq!(config.ops_limits().unwrap().max_messages_per_append, 5);
        let auth = config.authenticator().unwrap();
        let alice = auth.authenticate(Some("Bearer file-token")).unwrap();
        assert_eq!(alice.tenant.as_str(), "acme");
        assert_eq!(alice.user.unwrap().as_str(), "alice");
        assert_eq!(
            auth.authenticate(Some("Bearer env-token"))
                .unwrap()
                .tenant
                .as_str(),
            "beta"
        );
        assert_eq!(
            auth.authenticate(Some("Bearer other"))
                .unwrap()
                .user
                .unwrap()
                .as_str(),
            "gus"
        );
        assert!(!format!("{config:?}").contains("env-token"));
    }

    #[test]
    fn one_token_for_two_tenants_is_refused_without_naming_it() {
        let digest = hex(sha256("shared-secret"));
        let text = format!(
            "[[tokens]]\nsha256 = \"{digest}\"\ntenant = \"acme\"\n[[tokens]]\nsha256 = \"{}\"\ntenant = \"beta\"\n",
            digest.to_uppercase()
        );
        let config = ServerConfig::from_toml(&text).unwrap();
        let err = config.authenticator().unwrap_err().0;
        assert!(err.contains("`acme`") && err.contains("`beta`"), "{err}");
        assert!(!err.to_lowercase().contains(&digest), "{err}");
        // A plain token from the environment that is also a file token of another tenant.
        let mut config = ServerConfig::from_toml(&format!(
            "[[tokens]]\nsha256 = \"{digest}\"\ntenant = \"acme\"\n"
        ))
        .unwrap();
        config
            .apply_env(|n| {
                (n == "AGENT_MEMORY_SERVER_TOKENS").then(|| "acme:bob=shared-secret".to_owned())
            })
            .unwrap();
        let err = config.authenticator().unwrap_err().0;
        assert!(err.contains("user `bob`"), "{err}");
        assert!(!err.contains("shared-secret"), "{err}");
        // Two plain tokens, the same secret, two tenants.
        let mut config = ServerConfig::default();
        config
            .apply_env(|n| {
                (n == "AGENT_MEMORY_SERVER_TOKENS")
                    .then(|| "one=same-token,two=same-token".to_owned())
            })
            .unwrap();
        let err = config.authenticator().unwrap_err().0;
        assert!(err.contains("`one`") && err.contains("`two`"), "{err}");
        assert!(!err.contains("same-token"), "{err}");
        // The same token listed twice for the same tenant is harmless.
        let mut config = ServerConfig::default();
        config
            .apply_env(|n| (n == "AGENT_MEMORY_SERVER_TOKENS").then(|| "one=t1,one=t1".to_owned()))
            .unwrap();
        assert!(config.authenticator().is_ok());
    }

    #[test]
    fn the_log_format_is_a_key_the_environment_overrides() {
        assert_eq!(ServerConfig::default().log.format, LogFormat::Text);
        let mut config = ServerConfig::from_toml("[log]\nformat = \"json\"\n").unwrap();
        assert_eq!(config.log.format, LogFormat::Json);
        config.apply_env(|_| None).unwrap();
        assert_eq!(
            config.log.format,
            LogFormat::Json,
            "no variable: the file's"
        );
        config
            .apply_env(|n| (n == "AGENT_MEMORY_LOG_FORMAT").then(|| " ".to_owned()))
            .unwrap();
        assert_eq!(
            config.log.format,
            LogFormat::Json,
            "an empty variable is none"
        );
        config
            .apply_env(|n| (n == "AGENT_MEMORY_LOG_FORMAT").then(|| "Text".to_owned()))
            .unwrap();
        assert_eq!(config.log.format, LogFormat::Text, "the variable wins");
        let mut config = ServerConfig::default();
        config
            .apply_env(|n| (n == LOG_FORMAT_ENV).then(|| "json".to_owned()))
            .unwrap();
        assert_eq!(config.log.format, LogFormat::Json);
        let err = config
            .apply_env(|n| (n == LOG_FORMAT_ENV).then(|| "yaml".to_owned()))
            .unwrap_err();
        assert!(err.0.contains("`text` or `json`"), "{err}");
        for bad in ["[log]\nformat = \"yaml\"\n", "[log]\nlevel = \"info\"\n"] {
            assert!(ServerConfig::from_toml(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_values_are_sentences() {
        assert!(ServerConfig::from_toml("nope = 1").is_err());
        let config =
            ServerConfig::from_toml("[[tokens]]\nsha256 = \"xyz\"\ntenant = \"a\"").unwrap();
        assert!(config.authenticator().unwrap_err().0.contains("64 hex"));
        let mut config = ServerConfig::default();
        assert!(
            config
                .apply_env(|n| (n == "AGENT_MEMORY_SERVER_TOKENS").then(|| "no-equals".to_owned()))
                .is_err()
        );
        let err = config
            .apply_env(|n| (n == "AGENT_MEMORY_SERVER_MAX_BODY_BYTES").then(|| "x".to_owned()))
            .unwrap_err();
        assert!(err.0.contains("whole number"));
    }
}

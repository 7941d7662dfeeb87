//! Server URLs a fault test rewrites: where a URL points, and the same URL through a
//! [`CutProxy`].

use std::net::{SocketAddr, ToSocketAddrs};

use super::proxy::CutProxy;

/// The address of the host and port of `scheme://[user[:password]@]host[:port][/path][?query]`;
/// without a port, the scheme's default (Redis 6379, PostgreSQL 5432, MySQL and MariaDB 3306).
///
/// # Panics
/// When the host does not resolve, or a URL without a port has a scheme of none of those.
pub fn server_addr(url: &str) -> SocketAddr {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let host_port = rest.split(['/', '?']).next().unwrap();
    let host_port = if host_port.contains(':') {
        host_port.to_owned()
    } else {
        let port = match scheme {
            "redis" | "rediss" => 6379,
            "postgres" | "postgresql" => 5432,
            "mysql" | "mariadb" => 3306,
            other => panic!("no default port for the scheme {other:?} of {host_port}"),
        };
        format!("{host_port}:{port}")
    };
    host_port
        .to_socket_addrs()
        .unwrap_or_else(|e| panic!("resolve {host_port}: {e}"))
        .next()
        .unwrap()
}

/// `url` with its host and port replaced by `proxy`'s address (user, password, path and query
/// kept).
pub fn via_proxy(url: &str, proxy: &CutProxy) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, rest) = rest.rsplit_once('@').map_or(("", rest), |(u, r)| (u, r));
    let tail = rest.find(['/', '?']).map_or("", |i| &rest[i..]);
    let at = if user.is_empty() { "" } else { "@" };
    format!("{scheme}://{user}{at}{}{tail}", proxy.addr())
}

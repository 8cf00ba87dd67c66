//! A capture target: the `host:port` a program's profiler service listens on.

use std::fmt;
use std::net::Ipv6Addr;

use crate::error::{Error, ErrorKind};
use crate::limits::MAX_TARGET_CHARS;

/// Where a program's `ProfilerService` listens: a host (a DNS name, an IPv4 address or a
/// bracketed IPv6 address) and a port.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    host: String,
    port: u16,
}

impl Target {
    /// Parses `host:port` (`[v6addr]:port` for an IPv6 address).
    ///
    /// ```
    /// use xlens_capture::Target;
    /// let t = Target::parse("localhost:9012")?;
    /// assert_eq!((t.host(), t.port()), ("localhost", 9012));
    /// assert_eq!(t.host_name(), "localhost_9012");
    /// assert_eq!(Target::parse("[::1]:80")?.to_string(), "[::1]:80");
    /// assert!(Target::parse("localhost").is_err());
    /// assert!(Target::parse("localhost:0").is_err());
    /// # Ok::<(), xlens_capture::Error>(())
    /// ```
    pub fn parse(text: &str) -> Result<Target, Error> {
        let bad = |why: &str| Error::new(None, ErrorKind::BadTarget { text: text.to_owned(), why: why.to_owned() });
        if text.chars().count() > MAX_TARGET_CHARS {
            return Err(bad(&format!("longer than {MAX_TARGET_CHARS} characters")));
        }
        let Some((host, port)) = text.rsplit_once(':') else {
            return Err(bad("no port (write host:port, e.g. localhost:9012)"));
        };
        let port: u16 = match port.parse() {
            Ok(0) | Err(_) => return Err(bad(&format!("{port:?} is not a port (1 to 65535)"))),
            Ok(p) => p,
        };
        if host.is_empty() {
            return Err(bad("no host (write host:port, e.g. localhost:9012)"));
        }
        if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            if inner.parse::<Ipv6Addr>().is_err() {
                return Err(bad(&format!("{inner:?} is not an IPv6 address")));
            }
        } else if host.contains(':') {
            return Err(bad("an IPv6 address goes in brackets ([::1]:9012)"));
        } else if let Some(c) = host.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))) {
            return Err(bad(&format!("{c:?} cannot be in a host name")));
        }
        Ok(Target { host: host.to_owned(), port })
    }

    /// The host, as given (an IPv6 address keeps its brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The host name of the target's file in the run (`<host_name>.xplane.pb`), as XProf's
    /// client names it: the target with `:` (and anything else a file name should not hold)
    /// made `_`, so that two programs on one machine are two hosts (`localhost_9012`).
    pub fn host_name(&self) -> String {
        self.to_string()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') { c } else { '_' })
            .collect()
    }

    /// The URI a gRPC channel connects to (plain HTTP/2: profiler servers listen without TLS).
    pub(crate) fn uri(&self) -> String {
        format!("http://{self}")
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl std::str::FromStr for Target {
    type Err = Error;

    fn from_str(s: &str) -> Result<Target, Error> {
        Target::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_print_back() {
        for text in ["localhost:1", "10.0.0.7:65535", "tpu-host-3.internal:8466", "[::1]:9012", "[fe80::1]:80"] {
            assert_eq!(Target::parse(text).unwrap().to_string(), text);
        }
    }

    #[test]
    fn mistakes_say_what_is_wrong() {
        let why = |text: &str| Target::parse(text).unwrap_err().to_string();
        assert!(why("localhost").contains("no port"), "{}", why("localhost"));
        assert!(why(":9012").contains("no host"));
        assert!(why("localhost:0").contains("not a port"));
        assert!(why("localhost:70000").contains("not a port"));
        assert!(why("localhost:-1").contains("not a port"));
        assert!(why("::1:9012").contains("brackets"));
        assert!(why("[zz]:9012").contains("not an IPv6"));
        assert!(why("a/b:1").contains("cannot be in a host name"));
        assert!(why(&format!("{}:1", "a".repeat(400))).contains("longer than"));
    }

    #[test]
    fn host_names_are_file_names() {
        assert_eq!(Target::parse("localhost:9012").unwrap().host_name(), "localhost_9012");
        assert_eq!(Target::parse("10.0.0.7:80").unwrap().host_name(), "10.0.0.7_80");
        assert_eq!(Target::parse("[::1]:80").unwrap().host_name(), "___1__80");
    }
}

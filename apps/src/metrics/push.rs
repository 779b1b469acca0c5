//! Pushes to a Prometheus Pushgateway (docs/metrics.md, "Push"): the Pushgateway HTTP API's
//! `PUT {URL}/metrics/job/{job}/instance/{instance}` with the text exposition (format 0.0.4)
//! replaces the group's metrics; `DELETE` of the same URL removes the group.
//!
//! HTTP is `ureq` (blocking, plain HTTP, no TLS). A failure is reported on stderr once per
//! kind (connection refused, HTTP 400, ...), not once per push: a gateway that is down must
//! not flood a benchmark's stderr, nor stop it.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::Duration;

use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// A checked `--push` URL: `http://host:port[/path]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushUrl {
    /// `http://host:port` plus the path, without a trailing `/`.
    base: String,
}

impl PushUrl {
    /// Parse `--push URL`; the error is one line saying what to give.
    pub fn parse(url: &str) -> Result<Self, String> {
        let want = "give http://HOST:PORT[/PATH], e.g. http://127.0.0.1:9091";
        let Some(rest) = url.strip_prefix("http://") else {
            return Err(format!(
                "--push {url}: not an http:// URL (plain HTTP only, no TLS): {want}"
            ));
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let Some((host, port)) = authority.rsplit_once(':') else {
            return Err(format!("--push {url}: no port: {want}"));
        };
        if host.is_empty() || host.contains(['@', '?', '#', ' ']) {
            return Err(format!("--push {url}: no host: {want}"));
        }
        if port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(format!(
                "--push {url}: port {port:?} is not 1 .. 65535: {want}"
            ));
        }
        if path.contains(['?', '#', ' ']) {
            return Err(format!(
                "--push {url}: a query or fragment in the path: {want}"
            ));
        }
        Ok(Self {
            base: format!("http://{authority}{}", path.trim_end_matches('/')),
        })
    }

    /// The group's URL: `{URL}/metrics/job/{job}/instance/{instance}`.
    pub fn group(&self, job: &str, instance: &str) -> String {
        format!(
            "{}/metrics/job/{}/instance/{}",
            self.base,
            escape(job),
            escape(instance)
        )
    }
}

/// Percent-encode a path segment (RFC 3986 unreserved characters stay).
fn escape(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Pushes one group.
#[derive(Debug)]
pub struct Pusher {
    group: String,
    agent: ureq::Agent,
    /// The kinds of failure already reported.
    reported: HashSet<String>,
    /// Pushes that failed.
    pub failures: u64,
}

impl Pusher {
    /// Push to `url`'s group `job`/`instance`.
    pub fn new(url: &PushUrl, job: &str, instance: &str) -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(2)))
            .http_status_as_error(false)
            .build();
        Self {
            group: url.group(job, instance),
            agent: config.into(),
            reported: HashSet::new(),
            failures: 0,
        }
    }

    /// The group's URL.
    pub fn url(&self) -> &str {
        &self.group
    }

    /// `PUT` the exposition `body`. On failure, the error line; it goes to stderr the first
    /// time its kind fails, or every time with `always_report` (the final push).
    pub fn put(&mut self, body: &str, always_report: bool) -> Result<(), String> {
        let r = self
            .agent
            .put(&self.group)
            .header("Content-Type", CONTENT_TYPE)
            .send(body);
        self.outcome("push", r, always_report)
    }

    /// `DELETE` the group.
    pub fn delete(&mut self) -> Result<(), String> {
        let r = self.agent.delete(&self.group).call();
        self.outcome("delete", r, true)
    }

    fn outcome(
        &mut self,
        what: &str,
        r: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
        always_report: bool,
    ) -> Result<(), String> {
        let (kind, detail) = match r {
            Ok(resp) if resp.status().is_success() => return Ok(()),
            Ok(mut resp) => {
                let status = resp.status();
                let body = resp.body_mut().read_to_string().unwrap_or_default();
                let body = body.split_whitespace().collect::<Vec<_>>().join(" ");
                (
                    format!("HTTP {}", status.as_u16()),
                    format!(
                        "HTTP {status}: {}",
                        body.chars().take(200).collect::<String>()
                    ),
                )
            }
            Err(e) => {
                let d = e.to_string().replace('\n', " ");
                (kind_of(&e), d)
            }
        };
        self.failures += 1;
        let line = format!("telemetry: {what} to {} failed: {detail}", self.group);
        if always_report || self.reported.insert(format!("{what} {kind}")) {
            eprintln!("{line}");
        }
        Err(line)
    }
}

/// A failure's kind: what "the same failure again" means for the once-per-kind report.
fn kind_of(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) => format!("io {:?}", io.kind()),
        ureq::Error::Timeout(_) => "timeout".to_owned(),
        ureq::Error::HostNotFound => "host not found".to_owned(),
        ureq::Error::ConnectionFailed => "connection failed".to_owned(),
        other => format!("{:?}", std::mem::discriminant(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_urls_are_http_host_port_path() {
        let u = PushUrl::parse("http://127.0.0.1:9091").unwrap();
        assert_eq!(
            u.group("mrc-perf", "h/1"),
            "http://127.0.0.1:9091/metrics/job/mrc-perf/instance/h%2F1"
        );
        let u = PushUrl::parse("http://gw:80/prefix/").unwrap();
        assert_eq!(
            u.group("j", "i"),
            "http://gw:80/prefix/metrics/job/j/instance/i"
        );
        for bad in [
            "ftp://x",
            "https://x:1",
            "http://x",
            "http://:9091",
            "http://x:0",
            "http://x:99999",
            "http://x:1/a?b",
            "x:9091",
        ] {
            let e = PushUrl::parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("--push {bad}: ")), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn a_gateway_that_is_down_is_reported_once_per_kind() {
        // A port nobody listens on: bind one, note it, close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let u = PushUrl::parse(&format!("http://127.0.0.1:{port}")).unwrap();
        let mut p = Pusher::new(&u, "j", "i");
        for _ in 0..3 {
            assert!(p.put("x 1\n", false).is_err());
        }
        assert_eq!(p.failures, 3);
        assert_eq!(p.reported.len(), 1, "{:?}", p.reported);
    }
}

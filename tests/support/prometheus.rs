//! A real Prometheus (and Pushgateway) for the telemetry tests: Debian's `prometheus` and
//! `prometheus-pushgateway`, started on 127.0.0.1 on a free port with a temporary config and
//! data directory, queried through the HTTP API (`/api/v1/query`, `/api/v1/query_range`,
//! `/api/v1/targets`) with a tiny HTTP/1.0 client, killed and deleted on drop.

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Where Debian installs the server, `promtool` and the Pushgateway.
pub const PROMETHEUS: &str = "/usr/bin/prometheus";
/// Prometheus's command-line tool (`check metrics`, `check rules`, `test rules`).
pub const PROMTOOL: &str = "/usr/bin/promtool";
/// The Pushgateway.
pub const PUSHGATEWAY: &str = "/usr/bin/prometheus-pushgateway";

/// The path of `bin` if it is installed, else a skip of `test` (or a failure under
/// `MRC_REQUIRE_ALL=1`) and `None`.
pub fn tool(test: &str, bin: &str) -> Option<PathBuf> {
    let p = Path::new(bin);
    if p.is_file() {
        Some(p.to_owned())
    } else {
        crate::skip(
            test,
            &format!("{bin} is missing: apt-get install prometheus prometheus-pushgateway"),
        );
        None
    }
}

/// `GET path` on `addr` (HTTP/1.0, so the body ends at close): the status code and the body.
pub fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    http_send(addr, "GET", path, "")
}

/// A tool's own `/metrics` endpoint (`HOST:PORT`): the exposition text (the test fails on
/// anything but a 200).
pub fn scrape(addr: &str) -> String {
    let (status, body) = http_get(addr, "/metrics").expect("the metrics endpoint answers");
    assert_eq!(status, 200, "{body}");
    body
}

/// The values of every sample of `name` (exactly: labels follow) in exposition `text` whose
/// labels contain every one of `labels` (e.g. `host="h1"`).
pub fn values(text: &str, name: &str, labels: &[&str]) -> Vec<f64> {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .filter(|l| labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect()
}

/// What rank `r` of a multi-process run wrote to its textfile `path` (`--metrics-textfile`):
/// the exposition, the payload bytes its own host received (`mrc_port_rcv_data_bytes_total`
/// with `host="hR"`, all planes), and whether every `mrc_port_*` sample is its own host's.
/// A missing file panics, naming it, with `context` (the run's output).
pub fn rank_textfile(path: &Path, r: usize, context: &str) -> (String, f64, bool) {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}\n{context}", path.display()));
    let host = format!("host=\"h{r}\"");
    let rx = values(&text, "mrc_port_rcv_data_bytes_total", &[&host])
        .iter()
        .sum();
    let alone = text
        .lines()
        .filter(|l| l.starts_with("mrc_port_"))
        .all(|l| l.contains(&host));
    (text, rx, alone)
}

/// `method path` with `body` on `addr` (HTTP/1.0, e.g. a `PUT` of exposition text to a
/// Pushgateway): the status code and the answer's body.
pub fn http_send(
    addr: &str,
    method: &str,
    path: &str,
    body: &str,
) -> std::io::Result<(u16, String)> {
    let mut c = TcpStream::connect(addr)?;
    c.set_read_timeout(Some(Duration::from_secs(20)))?;
    write!(
        c,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut s = String::new();
    c.read_to_string(&mut s)?;
    let status = s
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let answer = s.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    Ok((status, answer))
}

/// Percent-encodes a query parameter (RFC 3986 unreserved characters pass).
pub fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A temporary directory, deleted on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(crate::unique(tag));
        std::fs::create_dir_all(&d).expect("a temporary directory");
        Self(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server process, killed and reaped on drop; its output goes to a log in its directory.
#[derive(Debug)]
struct Server {
    child: Child,
    log: PathBuf,
}

impl Server {
    fn spawn(bin: &Path, args: &[String], dir: &Path) -> Self {
        let log = dir.join("server.log");
        let out = std::fs::File::create(&log).expect("a log file");
        let child = Command::new(bin)
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        Self { child, log }
    }

    /// Waits for `GET path` on `addr` to answer 200 (the server's log in the panic otherwise).
    fn wait_ready(&mut self, addr: &str, path: &str) {
        let deadline = Instant::now() + Duration::from_mins(1);
        loop {
            if matches!(http_get(addr, path), Ok((200, _))) {
                return;
            }
            let exited = self.child.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() > deadline {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                panic!("{addr}{path} never answered 200 ({exited:?}); its log:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Prometheus server on 127.0.0.1 scraping the targets it was given every 100 ms.
#[derive(Debug)]
pub struct Prometheus {
    // Declared first: the server is killed before its directory is deleted.
    server: Server,
    _dir: TempDir,
    addr: String,
}

/// What a [`Prometheus`] scrapes.
#[derive(Debug, Clone)]
pub enum Target {
    /// `HOST:PORT` serving `/metrics`, scraped as they are (job `mrc`).
    Static(Vec<String>),
    /// A Pushgateway (`HOST:PORT`), with `honor_labels: true` so the pushed `job` and
    /// `instance` stay (job `pushgateway`).
    Pushgateway(String),
}

impl Prometheus {
    /// Starts one (`None`, after a skip of `test`, when `prometheus` is not installed) scraping
    /// `targets` every 100 ms, and waits for `/-/ready`.
    pub fn start(test: &str, targets: &[Target]) -> Option<Self> {
        let bin = tool(test, PROMETHEUS)?;
        let dir = TempDir::new("prom");
        let mut cfg = String::from(
            "global:\n  scrape_interval: 100ms\n  scrape_timeout: 100ms\n  evaluation_interval: 100ms\nscrape_configs:\n",
        );
        for (i, t) in targets.iter().enumerate() {
            match t {
                Target::Static(addrs) => {
                    let list = addrs
                        .iter()
                        .map(|a| format!("'{a}'"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let _ = write!(
                        cfg,
                        "  - job_name: mrc{i}\n    static_configs:\n      - targets: [{list}]\n"
                    );
                }
                Target::Pushgateway(a) => {
                    let _ = write!(
                        cfg,
                        "  - job_name: pushgateway{i}\n    honor_labels: true\n    static_configs:\n      - targets: ['{a}']\n"
                    );
                }
            }
        }
        std::fs::write(dir.0.join("prometheus.yml"), cfg).expect("the config");
        let addr = format!("127.0.0.1:{}", crate::free_port());
        let args = [
            format!("--config.file={}", dir.0.join("prometheus.yml").display()),
            format!("--storage.tsdb.path={}", dir.0.join("data").display()),
            format!("--web.listen-address={addr}"),
            "--web.enable-lifecycle".into(),
            "--log.level=warn".into(),
        ];
        let mut server = Server::spawn(&bin, &args, &dir.0);
        server.wait_ready(&addr, "/-/ready");
        let p = Self {
            server,
            _dir: dir,
            addr,
        };
        // Service discovery hands targets to the scrapers at most every 5 s: wait until it
        // has, so a run started now is scraped from its start.
        let n: usize = targets
            .iter()
            .map(|t| match t {
                Target::Static(a) => a.len(),
                Target::Pushgateway(_) => 1,
            })
            .sum();
        let deadline = Instant::now() + Duration::from_secs(30);
        while p.targets_up().len() < n {
            assert!(
                Instant::now() < deadline,
                "prometheus never took its {n} targets: {:?}\n{}",
                p.targets_up(),
                p.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(p)
    }

    /// `HOST:PORT` of its HTTP API.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The server's log so far (for a failure message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.server.log).unwrap_or_default()
    }

    /// `GET /api/v1/{path}`: the `data` of a `success` answer, or the error it gave.
    pub fn api(&self, path: &str) -> Result<Value, String> {
        let (status, body) =
            http_get(&self.addr, &format!("/api/v1/{path}")).map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("{status}: {e}: {body}"))?;
        if v["status"] == "success" {
            Ok(v["data"].clone())
        } else {
            Err(format!("{status}: {}: {}", v["errorType"], v["error"]))
        }
    }

    /// An instant query now: the `data` (`resultType`, `result`).
    pub fn query(&self, expr: &str) -> Result<Value, String> {
        self.api(&format!("query?query={}", urlencode(expr)))
    }

    /// An instant query evaluated at `time` (Unix seconds).
    pub fn query_at(&self, expr: &str, time: f64) -> Result<Value, String> {
        self.api(&format!("query?query={}&time={time:.3}", urlencode(expr)))
    }

    /// A range query from `start` to `end` (Unix seconds) every `step` seconds.
    pub fn query_range(
        &self,
        expr: &str,
        start: f64,
        end: f64,
        step: f64,
    ) -> Result<Value, String> {
        self.api(&format!(
            "query_range?query={}&start={start:.3}&end={end:.3}&step={step}",
            urlencode(expr)
        ))
    }

    /// Every active target's scrape URL and whether its last scrape succeeded.
    pub fn targets_up(&self) -> Vec<(String, bool)> {
        let data = self.api("targets?state=active").expect("the targets API");
        data["activeTargets"]
            .as_array()
            .map(|ts| {
                ts.iter()
                    .map(|t| {
                        (
                            t["scrapeUrl"].as_str().unwrap_or("").to_owned(),
                            t["health"] == "up",
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits (at most `limit`) until every target is up.
    pub fn wait_targets_up(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let t = self.targets_up();
            if !t.is_empty() && t.iter().all(|(_, up)| *up) {
                return;
            }
            assert!(Instant::now() < deadline, "targets not up: {t:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The `(labels, value)` pairs of an instant vector result.
pub fn vector(data: &Value) -> Vec<(Value, f64)> {
    data["result"]
        .as_array()
        .map(|r| {
            r.iter()
                .map(|s| {
                    let v = s["value"][1]
                        .as_str()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(f64::NAN);
                    (s["metric"].clone(), v)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A Pushgateway on 127.0.0.1, killed and deleted on drop.
#[derive(Debug)]
pub struct Pushgateway {
    server: Server,
    _dir: TempDir,
    addr: String,
}

impl Pushgateway {
    /// Starts one (`None`, after a skip of `test`, when it is not installed) and waits for
    /// `/-/ready`.
    pub fn start(test: &str) -> Option<Self> {
        let bin = tool(test, PUSHGATEWAY)?;
        let dir = TempDir::new("pushgw");
        let addr = format!("127.0.0.1:{}", crate::free_port());
        let args = [
            format!("--web.listen-address={addr}"),
            "--log.level=warn".into(),
        ];
        let mut server = Server::spawn(&bin, &args, &dir.0);
        server.wait_ready(&addr, "/-/ready");
        Some(Self {
            server,
            _dir: dir,
            addr,
        })
    }

    /// `HOST:PORT`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Its base URL, as `--push` takes it.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Everything it holds, in the exposition format (`/metrics`).
    pub fn metrics(&self) -> String {
        let (status, body) = http_get(&self.addr, "/metrics").expect("the Pushgateway answers");
        assert_eq!(status, 200, "{body}");
        body
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.server.log).unwrap_or_default()
    }
}

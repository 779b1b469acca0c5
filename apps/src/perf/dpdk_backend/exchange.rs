//! The out-of-band exchange of `--backend dpdk` (perftest's TCP socket exchange): one line
//! of text per message, the parameters both sides must agree on, and the records each side
//! sends back at the end.

use std::io::{BufRead as _, BufReader, ErrorKind, Write as _};
use std::net::TcpStream;
use std::time::Duration as StdDuration;

use anyhow::{Context as _, bail};
use mrc_transport::Instant;
use mrc_transport::verbs::Qpn;
use serde_json::{Value, json};

use crate::perf::app::QpRecord;
use crate::perf::settings::Settings;

/// How long the exchange waits for the peer.
pub(super) const EXCHANGE_TIMEOUT: StdDuration = StdDuration::from_mins(1);
/// The line channel to the peer.
#[derive(Debug)]
pub(super) struct Peer {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Peer {
    pub(super) fn new(stream: TcpStream) -> anyhow::Result<Self> {
        stream.set_read_timeout(Some(EXCHANGE_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    pub(super) fn send(&mut self, line: &str) -> anyhow::Result<()> {
        writeln!(self.writer, "{line}").context("the peer closed the exchange")?;
        Ok(())
    }

    /// The next line, which must start with `word`; the rest of it.
    pub(super) fn expect(&mut self, word: &str) -> anyhow::Result<String> {
        self.expect_within(word, Some(EXCHANGE_TIMEOUT))
    }

    /// [`Peer::expect`], waiting at most `wait` for the line (`None`: as long as it takes).
    pub(super) fn expect_within(
        &mut self,
        word: &str,
        wait: Option<StdDuration>,
    ) -> anyhow::Result<String> {
        let socket = self.reader.get_ref();
        socket.set_read_timeout(wait)?;
        let mut line = String::new();
        let read = self.reader.read_line(&mut line);
        let n = match read {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                let waited = wait.unwrap_or_default();
                bail!("the peer sent no {word} in {waited:?} (is it still running?)")
            }
            Err(e) => return Err(e).with_context(|| format!("waiting for the peer's {word}")),
        };
        if n == 0 {
            bail!("the peer closed the exchange before {word}");
        }
        let line = line.trim_end();
        if let Some(why) = line.strip_prefix("MISMATCH ") {
            // The two command lines disagree: this one is as much to change as the peer's.
            crate::bail_usage!("the peer refused: {why}");
        }
        if let Some(why) = line.strip_prefix("ERR ") {
            bail!("the peer refused: {why}");
        }
        line.strip_prefix(word)
            .map(|r| r.trim_start().to_owned())
            .ok_or_else(|| anyhow::anyhow!("expected {word} from the peer, got {line:?}"))
    }
}

/// What both sides must agree on.
pub(crate) fn parameters(s: &Settings, planes: usize) -> Value {
    json!({
        "test": s.test.name(),
        "-s": s.sizes,
        "-n": s.iters,
        "-D": s.duration.map(|d| d.0),
        "-q": s.qps,
        "-b": s.bidirectional,
        "-t": s.tx_depth,
        "-r": s.rx_depth,
        "-Q": s.cq_mod,
        "--cc": s.cc.name(),
        "--evs": s.evs,
        "planes": planes,
        "--check": s.check,
        "traffic": s.pattern.to_string(),
        "-m": s.perftest.mtu,
    })
}

/// The parameters that differ, as `name: client X, server Y`.
pub fn mismatches(client: &Value, server: &Value) -> Vec<String> {
    let (Some(c), Some(s)) = (client.as_object(), server.as_object()) else {
        return vec!["unreadable parameters".to_owned()];
    };
    c.iter()
        .filter(|(k, v)| s.get(*k) != Some(v))
        .map(|(k, v)| {
            format!(
                "{k}: client {v}, server {}",
                s.get(k).unwrap_or(&Value::Null)
            )
        })
        .collect()
}

pub(crate) fn record_json(r: &QpRecord) -> Value {
    json!({
        "posted": r.posted,
        "completed": r.completed,
        "received": r.received,
        "post_times": r.post_times.iter().map(|t| t.0).collect::<Vec<_>>(),
        "completions": r.completions.iter().map(|(n, t)| [*n, t.0]).collect::<Vec<_>>(),
        "first_post": r.first_post.map(|t| t.0),
        "last_completion": r.last_completion.map(|t| t.0),
        "rtts_ns": r.rtts_ns,
    })
}

pub(crate) fn record_from(v: &Value) -> QpRecord {
    let u = |k: &str| v[k].as_u64().unwrap_or(0);
    let t = |k: &str| v[k].as_u64().map(Instant);
    let list = |k: &str| -> Vec<u64> {
        v[k].as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default()
    };
    QpRecord {
        qpn: Qpn(0),
        posted: u("posted"),
        completed: u("completed"),
        received: u("received"),
        post_times: list("post_times").into_iter().map(Instant).collect(),
        completions: v["completions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| Some((p[0].as_u64()?, Instant(p[1].as_u64()?))))
                    .collect()
            })
            .unwrap_or_default(),
        first_post: t("first_post"),
        last_completion: t("last_completion"),
        rtts_ns: list("rtts_ns"),
    }
}

pub(super) fn connect_with_retry(addr: &str) -> std::io::Result<TcpStream> {
    let deadline = std::time::Instant::now() + StdDuration::from_secs(5);
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return Ok(s),
            Err(e) if std::time::Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(StdDuration::from_millis(100)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mismatches_name_both_values() {
        let c = json!({"-s": [4096], "-n": 5});
        let s = json!({"-s": [65536], "-n": 5});
        assert_eq!(mismatches(&c, &s), ["-s: client [4096], server [65536]"]);
        assert!(mismatches(&c, &c).is_empty());
    }

    #[test]
    fn a_peer_that_stays_silent_is_named_after_the_wait_and_a_line_within_it_is_read() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut far = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let mut peer = Peer::new(listener.accept().unwrap().0).unwrap();
        let e = peer
            .expect_within("DONE", Some(StdDuration::from_millis(50)))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the peer sent no DONE in 50ms (is it still running?)"
        );
        writeln!(far, "DONE {{}}").unwrap();
        assert_eq!(peer.expect_within("DONE", None).unwrap(), "{}");
    }

    #[test]
    fn records_cross_the_exchange() {
        let r = QpRecord {
            qpn: Qpn(0),
            posted: 3,
            completed: 2,
            received: 1,
            post_times: vec![Instant(5), Instant(9)],
            completions: vec![(2, Instant(20))],
            first_post: Some(Instant(5)),
            last_completion: Some(Instant(20)),
            rtts_ns: vec![7],
        };
        let back = record_from(&record_json(&r));
        assert_eq!(back.post_times, r.post_times);
        assert_eq!(back.completions, r.completions);
        assert_eq!((back.posted, back.completed, back.received), (3, 2, 1));
        assert_eq!(
            (back.first_post, back.last_completion),
            (r.first_post, r.last_completion)
        );
    }
}

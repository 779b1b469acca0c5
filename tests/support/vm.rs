//! The kernel VM: Debian's kernel in QEMU under virtme-ng (`scripts/kernel-vm.sh`), booted at
//! most once per test binary, and the agent inside it (`tests/vm/agent.py`) that runs commands
//! for the tests. The guest shares this machine's filesystem (read-only, but for the shared
//! directory [`Vm::share`], the same path on both sides), so a binary built here runs there.
//!
//! The VM lives as long as the test process: when the process ends, whichever way, the socket
//! closes, the agent kills what it started and powers the guest off, and the boot script
//! removes its directory. Its host links (TAPs on bridges `br<K>` in a network namespace of
//! its own, [`Vm::netns`]) carry a split fabric's host links (`mrc-fabric linux --part`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Host links the VM is booted with: the small plan's 4 hosts × 2 planes.
pub const LINKS: u32 = 8;

/// How long a boot may take before the tests give up (an emulated boot takes 20–70 s on a
/// 2-core machine, idle to loaded).
const BOOT_LIMIT: Duration = Duration::from_mins(5);
/// How a boot that QEMU did not survive is reported (and recognised, to boot again).
const STOPPED_BOOTING: &str = "the kernel VM stopped while booting";

/// What a command run in the guest did.
#[derive(Debug, Clone)]
pub struct GuestOutput {
    /// Its exit status (`None` if it was killed by a signal).
    pub rc: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl GuestOutput {
    pub fn success(&self) -> bool {
        self.rc == Some(0)
    }

    fn from(v: &Value) -> Self {
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        Self {
            rc: v["rc"]
                .as_i64()
                .and_then(|r| i32::try_from(r).ok())
                .filter(|r| *r >= 0),
            stdout: s("stdout"),
            stderr: s("stderr"),
        }
    }
}

type Waiters = Arc<Mutex<HashMap<u64, mpsc::Sender<Value>>>>;
type Said = Arc<Mutex<Vec<String>>>;

/// A booted VM and the connection to its agent.
#[derive(Debug)]
pub struct Vm {
    writer: Mutex<UnixStream>,
    waiting: Waiters,
    next_id: AtomicU64,
    boot: Mutex<Child>,
    said: Said,
    share: PathBuf,
    /// Held by the one fabric at a time whose host links the VM carries.
    links: Mutex<()>,
    /// The guest's kernel release.
    pub kernel: String,
}

static VM: OnceLock<Result<Vm, String>> = OnceLock::new();

impl Vm {
    /// The VM of this test process, booted by the first caller (the others wait for it); the
    /// reason if it cannot start, in one line.
    pub fn get() -> Result<&'static Self, String> {
        VM.get_or_init(Self::boot).as_ref().map_err(Clone::clone)
    }

    /// Why the VM cannot start here (`scripts/kernel-vm.sh check`, with `env` added), in one
    /// line; `None` if it can.
    pub fn cannot_start(env: &[(&str, &str)]) -> Option<String> {
        let script = crate::workspace().join("scripts/kernel-vm.sh");
        let check = Command::new("bash")
            .arg(&script)
            .arg("check")
            .envs(env.iter().copied())
            .output();
        match check {
            Err(e) => Some(format!("cannot run {}: {e}", script.display())),
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(format!(
                "the kernel VM cannot start: {}",
                String::from_utf8_lossy(&o.stdout).trim()
            )),
        }
    }

    /// Boots the VM; once more if QEMU died while the guest booted (its multi-threaded TCG
    /// can abort there: `iotlb_to_section: Assertion ... failed`, seen once in a few dozen
    /// boots on a loaded machine; the emulator's fault, not the test's).
    fn boot() -> Result<Self, String> {
        match Self::boot_once() {
            Err(first) if first.starts_with(STOPPED_BOOTING) => {
                eprintln!("kernel VM: {first}; booting it again");
                Self::boot_once().map_err(|second| format!("{second} (the boot before: {first})"))
            }
            done => done,
        }
    }

    fn boot_once() -> Result<Self, String> {
        let script = crate::workspace().join("scripts/kernel-vm.sh");
        if let Some(why) = Self::cannot_start(&[]) {
            return Err(why);
        }
        let dir = std::env::temp_dir().join(crate::unique("mrc-vm-"));
        let share = dir.join("share");
        std::fs::create_dir_all(&share).map_err(|e| format!("{}: {e}", share.display()))?;
        let sock = dir.join("ctl.sock");
        let started = Instant::now();
        let mut child = Command::new("bash")
            .arg(&script)
            .arg("boot")
            .arg(&dir)
            .arg(LINKS.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        // What QEMU and the guest say on stderr, the last lines kept for an error message.
        let said: Said = Arc::default();
        if let Some(err) = child.stderr.take() {
            let said = Arc::clone(&said);
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    if line.contains("QEMU waiting for connection") {
                        continue;
                    }
                    if let Ok(mut s) = said.lock() {
                        if s.len() == 20 {
                            s.remove(0);
                        }
                        s.push(line);
                    }
                }
            });
        }
        // QEMU listens on the socket and waits for this connection before it starts the guest.
        let stream = loop {
            if let Ok(s) = UnixStream::connect(&sock) {
                break s;
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "the kernel VM did not start ({status}): {}",
                    said_of(&said)
                ));
            }
            if started.elapsed() > BOOT_LIMIT {
                let _ = child.kill();
                return Err(format!(
                    "QEMU did not listen on {} in {BOOT_LIMIT:?}",
                    sock.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = tx.send(reader.read_line(&mut line).map(|_| (line, reader)));
        });
        let (ready, reader) = match rx.recv_timeout(BOOT_LIMIT.saturating_sub(started.elapsed())) {
            Ok(Ok((line, reader))) if !line.is_empty() => (line, reader),
            Ok(_) => {
                let _ = child.wait();
                return Err(format!("{STOPPED_BOOTING}: {}", said_of(&said)));
            }
            Err(_) => {
                let _ = child.kill();
                return Err(format!("the kernel VM did not boot in {BOOT_LIMIT:?}"));
            }
        };
        let ready: Value = serde_json::from_str(&ready)
            .map_err(|e| format!("the VM's agent said {ready:?}: {e}"))?;
        if ready["ready"] != true {
            return Err(format!(
                "the VM's agent could not start: {}",
                ready["error"]
            ));
        }
        let links = ready["links"].as_u64().unwrap_or(0);
        if links != u64::from(LINKS) {
            return Err(format!("the VM has {links} host links, not {LINKS}"));
        }
        let kernel = ready["kernel"].as_str().unwrap_or("?").to_owned();
        eprintln!(
            "kernel VM: Linux {kernel} booted in {:.1} s (emulated)",
            started.elapsed().as_secs_f64()
        );
        let waiting: Waiters = Arc::default();
        let answers = Arc::clone(&waiting);
        std::thread::spawn(move || {
            for line in reader.lines() {
                let Ok(line) = line else { break };
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let id = v["id"].as_u64().unwrap_or(u64::MAX);
                let waiter = answers.lock().ok().and_then(|mut w| w.remove(&id));
                if let Some(w) = waiter {
                    let _ = w.send(v);
                }
            }
            // The VM is gone: every request still waiting gets its answer's absence.
            if let Ok(mut w) = answers.lock() {
                w.clear();
            }
        });
        Ok(Self {
            writer: Mutex::new(stream),
            waiting,
            next_id: AtomicU64::new(1),
            boot: Mutex::new(child),
            said,
            share,
            links: Mutex::new(()),
            kernel,
        })
    }

    /// Sends `req` and waits at most `limit` for its answer.
    fn ask(&self, mut req: Value, limit: Duration) -> Result<Value, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        req["id"] = json!(id);
        let (tx, rx) = mpsc::channel();
        self.waiting
            .lock()
            .map_err(|e| e.to_string())?
            .insert(id, tx);
        let mut line = req.to_string();
        line.push('\n');
        self.writer
            .lock()
            .map_err(|e| e.to_string())?
            .write_all(line.as_bytes())
            .map_err(|e| format!("the kernel VM is gone: {e}"))?;
        let what = req["argv"].to_string();
        let answer = rx.recv_timeout(limit).map_err(|e| match e {
            mpsc::RecvTimeoutError::Timeout => {
                format!("the kernel VM did not answer {what} in {limit:?}")
            }
            mpsc::RecvTimeoutError::Disconnected => {
                format!(
                    "the kernel VM stopped during {what}: {}",
                    self.boot_stderr()
                )
            }
        })?;
        if let Some(e) = answer["error"].as_str() {
            return Err(format!("the VM's agent: {what}: {e}"));
        }
        Ok(answer)
    }

    fn boot_stderr(&self) -> String {
        said_of(&self.said)
    }

    /// Runs `argv` in the guest (in its root namespace, with `env` added) to its end, waiting
    /// at most `limit`.
    pub fn run(
        &self,
        argv: &[&str],
        env: &[(&str, &str)],
        stdin: Option<&str>,
        limit: Duration,
    ) -> Result<GuestOutput, String> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let answer = self.ask(
            json!({
                "op": "run",
                "argv": argv,
                "env": env_map(env),
                "stdin": stdin,
                "cwd": cwd,
            }),
            limit,
        )?;
        Ok(GuestOutput::from(&answer))
    }

    /// Starts `argv` in the guest and returns once it printed a line containing `ready` (on
    /// stdout or stderr), with its handle; an error with what it said if it ended first.
    pub fn spawn(
        &self,
        argv: &[&str],
        env: &[(&str, &str)],
        ready: &str,
        limit: Duration,
    ) -> Result<u64, String> {
        let answer = self.ask(
            json!({"op": "spawn", "argv": argv, "env": env_map(env), "ready": ready}),
            limit,
        )?;
        let handle = answer["handle"].as_u64().ok_or("no handle")?;
        let said = answer["said"].as_str().unwrap_or_default();
        if !said.contains(ready) {
            let _ = self.kill(handle);
            return Err(format!("{argv:?} ended before saying {ready:?}: {said}"));
        }
        Ok(handle)
    }

    /// Waits at most `limit` for a spawned command to end.
    pub fn wait(&self, handle: u64, limit: Duration) -> Result<GuestOutput, String> {
        let answer = self.ask(json!({"op": "wait", "handle": handle}), limit)?;
        Ok(GuestOutput::from(&answer))
    }

    /// Kills a spawned command (if still running) and reaps it.
    pub fn kill(&self, handle: u64) -> Result<GuestOutput, String> {
        let answer = self.ask(
            json!({"op": "kill", "handle": handle}),
            Duration::from_mins(1),
        )?;
        Ok(GuestOutput::from(&answer))
    }

    /// The VM's host links, for one fabric at a time: held while a fabric uses them (tests of
    /// one binary that build fabrics at once take turns).
    pub fn host_links(&self) -> std::sync::MutexGuard<'_, ()> {
        self.links
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A directory both sides read and write, at the same path.
    pub fn share(&self) -> &Path {
        &self.share
    }

    /// The network namespace of the VM's host-link bridges (`br<K>`, on the TAP of the guest's
    /// link `K`), for `nsenter --net=`.
    pub fn netns(&self) -> Result<String, String> {
        let pid = self.boot.lock().map_err(|e| e.to_string())?.id();
        Ok(format!("/proc/{pid}/ns/net"))
    }
}

fn env_map(env: &[(&str, &str)]) -> Value {
    Value::Object(
        env.iter()
            .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
            .collect(),
    )
}

fn said_of(said: &Said) -> String {
    // The reading thread may still be taking the last lines of a process that just ended.
    std::thread::sleep(Duration::from_millis(100));
    said.lock()
        .map_or_else(|e| e.to_string(), |s| s.join(" / "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vm_that_cannot_start_says_what_is_missing_in_one_line() {
        let why = Vm::cannot_start(&[("MRC_VM_KERNEL", "/nonexistent/vmlinux")])
            .expect("no kernel image: the VM cannot start");
        assert!(why.starts_with("the kernel VM cannot start: no "), "{why}");
        assert_eq!(why.lines().count(), 1, "{why}");
        assert!(why.contains("install"), "says what to do: {why}");
    }
}

//! mrc-coll on DPDK ports, one rank per process, on one machine: `mrc-coll switch` holds the
//! memif server side of every rank's port (one per plane) and forwards between them; the
//! ranks start under Open MPI's `mpirun` (or meet over the TCP rendezvous), run the collective
//! over their own NIC threads and check every element (`-c 1`).
//!
//! - `mpirun -np 4 mrc-coll all_reduce --backend dpdk --memif NAME`: with the binary of this
//!   build (mpirun's ranks, TCP rendezvous) and with one built with the `mpi` feature (MPI
//!   bootstrap: rank, size, barrier and the exchange of QP attributes through Open MPI);
//! - the rooted collectives (broadcast, reduce, gather, scatter) over mpirun from every root,
//!   and hypercube;
//! - two ranks started by hand with `--tcp-rank`/`--tcp-ranks` (all_gather);
//! - the refusals a user can act on (no ranks, no ports, a root or a rank count they do not
//!   have): one line, exit 2, before any rank waits for another.
//!
//! Needs DPDK, two CPUs and (for the mpirun tests) Open MPI: otherwise skipped with a message,
//! or failed under `MRC_REQUIRE_ALL=1`. Processes are killed if a test ends first; memif
//! sockets are abstract (nothing on disk); DPDK runtime directories are removed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use mrc_tests::{DpdkRuntimeDirs, Proc, assert_refused, free_port, skip, unique};
use serde_json::Value;

const COLL: &str = env!("CARGO_BIN_EXE_mrc-coll");
const LIMIT: Duration = Duration::from_mins(4);

/// One run at a time: each is five busy processes on a small machine.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    mrc_tests::one_at_a_time(&SERIAL)
}

/// `None` when this machine can run DPDK processes (else why not).
fn dpdk_missing() -> Option<&'static str> {
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        return Some("one CPU: the ranks' NIC threads and the switch need two");
    }
    mrc_dpdk::DPDK_VERSION
        .is_none()
        .then_some("this build has no DPDK (install libdpdk-dev)")
}

/// What a process printed, stdout then stderr.
fn text(o: &Output) -> String {
    let (out, err) = mrc_tests::text(o);
    format!("{out}\n{err}")
}

/// One run of the switch and `ranks` ranks: the switch's control address and the rendezvous
/// address are fresh; `launch` starts the ranks; every rank and the switch must succeed.
struct Run {
    name: String,
    switch_addr: String,
    tcp_addr: String,
    json: PathBuf,
    _dirs: DpdkRuntimeDirs,
}

impl Run {
    fn new(tag: &str) -> Self {
        let name = unique(&format!("mrccoll-{tag}-"));
        Self {
            switch_addr: format!("127.0.0.1:{}", free_port()),
            tcp_addr: format!("127.0.0.1:{}", free_port()),
            json: std::env::temp_dir().join(format!("{name}.json")),
            _dirs: DpdkRuntimeDirs(name.clone()),
            name,
        }
    }

    /// The arguments every rank takes.
    fn rank_args(&self) -> Vec<String> {
        [
            "--backend",
            "dpdk",
            "--memif",
            &self.name,
            "--switch",
            &self.switch_addr,
            "--tcp-addr",
            &self.tcp_addr,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    }

    fn switch(&self, ranks: usize) -> Proc {
        Proc::spawn(
            Command::new(COLL)
                .args([
                    "switch",
                    "--ranks",
                    &ranks.to_string(),
                    "--memif",
                    &self.name,
                ])
                .args(["--switch", &self.switch_addr]),
            "mrc-coll switch",
        )
    }

    /// Waits for the switch and the ranks (`n` of them, in `ranks` processes); the ranks'
    /// table as JSON (rank 0 wrote it).
    fn finish(&self, switch: &mut Proc, ranks: &mut [Proc], n: usize) -> (String, Vec<Value>) {
        let outs: Vec<Output> = ranks.iter_mut().map(|r| r.finish(LIMIT)).collect();
        let sw = switch.finish(LIMIT);
        let all: String = outs.iter().map(text).collect::<Vec<_>>().join("\n---\n");
        for o in &outs {
            assert!(
                o.status.success(),
                "a rank failed:\n{all}\nswitch:\n{}",
                text(&sw)
            );
        }
        assert!(sw.status.success(), "switch:\n{}\nranks:\n{all}", text(&sw));
        let sw_out = text(&sw);
        assert!(
            sw_out.contains(&format!("{n} of {n} ranks stopped")),
            "{sw_out}"
        );
        let doc = std::fs::read_to_string(&self.json).expect("rank 0 wrote the JSON");
        let _ = std::fs::remove_file(&self.json);
        (
            all,
            serde_json::from_str::<Vec<Value>>(&doc).expect("the JSON table"),
        )
    }
}

/// Every line of the table measured, checked and right, at every size asked.
fn assert_exact(rows: &[Value], sizes: &[u64], all: &str) {
    let got: Vec<u64> = rows
        .iter()
        .map(|r| r["size"].as_u64().expect("size"))
        .collect();
    assert_eq!(got, sizes, "{all}");
    for r in rows {
        for place in ["out_of_place", "in_place"] {
            let l = &r[place];
            assert!(l.is_object(), "{place} not measured: {r}\n{all}");
            assert_eq!(l["wrong"], 0, "{place} wrong elements: {r}\n{all}");
            assert!(l["time_us"].as_f64().is_some_and(|t| t > 0.0), "{r}");
        }
    }
}

/// `mpirun -np 4 BIN all_reduce --backend dpdk ...` with the switch; the table's rows. Every
/// rank also writes its counters to a textfile (`--metrics-textfile`), checked here: each
/// rank's own engine counters and the table's lines, one file per rank.
fn mpirun_all_reduce(bin: &Path, tag: &str) -> (String, Vec<Value>) {
    let dir = mrc_tests::prometheus::TempDir::new("coll-textfile");
    let d = dir.0.to_str().unwrap().to_owned();
    let (all, rows) = mpirun_coll(
        bin,
        tag,
        "all_reduce",
        &[
            "-b",
            "8",
            "-e",
            "256K",
            "-f",
            "8",
            "-n",
            "3",
            "-w",
            "1",
            "-c",
            "1",
            "--metrics-textfile",
            &d,
        ],
    );
    assert_rank_textfiles(&dir.0, 4, &all);
    (all, rows)
}

/// Rank r's DIR/mrc-coll-rR.prom: its engine counters under `host="hR"` (it received data),
/// no other rank's, and every line of the table with no wrong element.
fn assert_rank_textfiles(dir: &Path, ranks: usize, all: &str) {
    use mrc_tests::prometheus::values;
    for r in 0..ranks {
        let path = dir.join(format!("mrc-coll-r{r}.prom"));
        let (text, rx, alone) = mrc_tests::prometheus::rank_textfile(&path, r, all);
        assert!(rx > 0.0, "rank {r} received nothing:\n{text}");
        assert!(
            alone,
            "rank {r}'s file holds another rank's counters:\n{text}"
        );
        for size in SIZES {
            for place in ["out", "in"] {
                let lb = [format!("size=\"{size}\""), format!("place=\"{place}\"")];
                let lb: Vec<&str> = lb.iter().map(String::as_str).collect();
                let busbw = values(&text, "mrc_coll_busbw_bytes_per_second", &lb);
                assert!(
                    busbw.len() == 1 && busbw[0] > 0.0,
                    "rank {r}, {size} B {place}: {busbw:?}\n{text}"
                );
                assert_eq!(
                    values(&text, "mrc_coll_wrong_elements_total", &lb),
                    [0.0],
                    "rank {r}, {size} B {place}"
                );
            }
        }
    }
}

/// `mpirun -np 4 BIN COLL --backend dpdk ARGS` with the switch; the table's rows.
fn mpirun_coll(bin: &Path, tag: &str, coll: &str, args: &[&str]) -> (String, Vec<Value>) {
    let run = Run::new(tag);
    let mut switch = run.switch(4);
    let mut mpirun = mrc_tests::mpirun();
    mpirun
        .args(["-np", "4"])
        .arg(bin)
        .arg(coll)
        .args(run.rank_args())
        .args(args)
        .arg("-J")
        .arg(&run.json);
    let mut ranks = [Proc::spawn(&mut mpirun, "mpirun")];
    run.finish(&mut switch, &mut ranks, 4)
}

const SIZES: [u64; 6] = [8, 64, 512, 4096, 32768, 262_144];

#[test]
fn mpirun_all_reduce_over_memif_planes_checks_every_element() {
    let _one = serial();
    let test = "mpirun_all_reduce_over_memif_planes_checks_every_element";
    if let Some(why) = dpdk_missing() {
        return skip(test, why);
    }
    if let Some(why) = mrc_tests::mpirun_missing() {
        return skip(test, why);
    }
    let (all, rows) = mpirun_all_reduce(Path::new(COLL), "mpi");
    assert_exact(&rows, &SIZES, &all);
    assert!(all.contains("# Bootstrap: mpirun's ranks"), "{all}");
    assert!(all.contains("# Avg bus bandwidth"), "{all}");
}

#[test]
fn mpirun_rooted_collectives_from_every_root_check_every_element() {
    let _one = serial();
    let test = "mpirun_rooted_collectives_from_every_root_check_every_element";
    if let Some(why) = dpdk_missing() {
        return skip(test, why);
    }
    if let Some(why) = mrc_tests::mpirun_missing() {
        return skip(test, why);
    }
    for coll in ["broadcast", "reduce", "gather", "scatter"] {
        let args = [
            "-b", "1K", "-e", "64K", "-f", "64", "-n", "1", "-w", "0", "-d", "int32",
        ];
        let (all, rows) = mpirun_coll(Path::new(COLL), coll, coll, &args);
        // Sizes 1 KiB and 64 KiB from each root in turn (-r -1).
        let sizes: Vec<u64> = [1024, 65536].repeat(4);
        assert_exact(&rows, &sizes, &all);
        let roots: Vec<i64> = rows
            .iter()
            .map(|r| r["root"].as_i64().expect("root"))
            .collect();
        assert_eq!(roots, [0, 0, 1, 1, 2, 2, 3, 3], "{coll}\n{all}");
        assert!(
            all.contains("# Out of bounds values : 0 OK"),
            "{coll}\n{all}"
        );
    }
}

#[test]
fn mpirun_hypercube_checks_every_element() {
    let _one = serial();
    let test = "mpirun_hypercube_checks_every_element";
    if let Some(why) = dpdk_missing() {
        return skip(test, why);
    }
    if let Some(why) = mrc_tests::mpirun_missing() {
        return skip(test, why);
    }
    let args = ["-b", "1K", "-e", "256K", "-f", "16", "-n", "1", "-w", "0"];
    let (all, rows) = mpirun_coll(Path::new(COLL), "hypercube", "hypercube", &args);
    assert_exact(&rows, &[1024, 16384, 262_144], &all);
}

/// `mrc-coll` built with the `mpi` feature, in its own target directory.
fn mpi_build() -> Result<PathBuf, String> {
    mrc_tests::mpi_build(env!("CARGO_MANIFEST_DIR"), env!("CARGO")).map(|d| d.join("mrc-coll"))
}

#[test]
fn mpirun_with_the_mpi_bootstrap_checks_every_element() {
    let _one = serial();
    let test = "mpirun_with_the_mpi_bootstrap_checks_every_element";
    if let Some(why) = dpdk_missing() {
        return skip(test, why);
    }
    if let Some(why) = mrc_tests::mpirun_missing() {
        return skip(test, why);
    }
    let bin = match mpi_build() {
        Ok(b) => b,
        Err(why) => return skip(test, &why),
    };
    let (all, rows) = mpirun_all_reduce(&bin, "rsmpi");
    assert_exact(&rows, &SIZES, &all);
    assert!(all.contains("# Bootstrap: MPI (mpirun)"), "{all}");
}

#[test]
fn two_ranks_meet_over_the_tcp_rendezvous() {
    let _one = serial();
    let test = "two_ranks_meet_over_the_tcp_rendezvous";
    if let Some(why) = dpdk_missing() {
        return skip(test, why);
    }
    let run = Run::new("tcp");
    let mut switch = run.switch(2);
    let mut ranks: Vec<Proc> = (0..2)
        .map(|r| {
            let mut c = Command::new(COLL);
            c.arg("all_gather")
                .args(run.rank_args())
                .args(["--tcp-rank", &r.to_string(), "--tcp-ranks", "2"])
                .args([
                    "-b", "1K", "-e", "64K", "-f", "8", "-n", "2", "-w", "1", "-d", "int32",
                ]);
            if r == 0 {
                c.arg("-J").arg(&run.json);
            }
            Proc::spawn(&mut c, &format!("rank {r}"))
        })
        .collect();
    let (all, rows) = run.finish(&mut switch, &mut ranks, 2);
    assert_exact(&rows, &[1024, 8192, 65536], &all);
    assert!(all.contains("# Bootstrap: TCP rendezvous"), "{all}");
}

#[test]
fn a_rank_without_peers_or_ports_says_what_to_give() {
    // Refusals: one line, exit 2, before any rank waits for another.
    let line = assert_refused(
        COLL,
        &["all_reduce", "--backend", "dpdk", "--memif", "x"],
        "under mpirun",
    );
    assert!(line.contains("--tcp-rank"), "{line}");
    let line = assert_refused(
        COLL,
        &[
            "all_reduce",
            "--backend",
            "dpdk",
            "--tcp-rank",
            "0",
            "--tcp-ranks",
            "2",
        ],
        "--memif NAME",
    );
    assert!(line.contains("--eal"), "{line}");
    let rank0 = [
        "--backend",
        "dpdk",
        "--memif",
        "x",
        "--tcp-rank",
        "0",
        "--tcp-ranks",
        "2",
    ];
    let with = |extra: &[&'static str]| {
        let mut v = vec!["broadcast"];
        v.extend_from_slice(&rank0);
        v.extend_from_slice(extra);
        v
    };
    assert_refused(COLL, &with(&["-r", "2"]), "-r 2: 2 ranks have roots 0 to 1");
    assert_refused(COLL, &with(&["--ranks", "4"]), "--ranks 4");
    assert_refused(COLL, &with(&["--planes", "0"]), "--planes 0");
    assert_refused(
        COLL,
        &[
            "gather",
            "--backend",
            "dpdk",
            "--memif",
            "x",
            "--tcp-rank",
            "2",
            "--tcp-ranks",
            "2",
        ],
        "--tcp-rank 2",
    );
}

//! mrc-perf read the way perftest's users read ib_write_bw and ib_write_lat: a parser written
//! to perftest's own strings (its result headers, rules, units and address lines, from
//! perftest_parameters.h and perftest_communication.h) takes mrc-perf's stdout, and what it
//! reads is checked against mrc-perf's JSON and per-EV table; perftest's flags keep their
//! meaning, and those MRC cannot honour are refused in one line.

use std::collections::BTreeSet;
use std::net::Ipv6Addr;
use std::process::Command;
use std::time::Duration;

use mrc_tests::{DpdkRuntimeDirs, Proc, assert_refused, free_port, text, unique};

const BIN: &str = env!("CARGO_BIN_EXE_mrc-perf");

// perftest's strings (perftest 4.x, as Debian 12 ships it).
const RESULT_LINE: &str =
    "---------------------------------------------------------------------------------------";
const RESULT_FMT: &str =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
const RESULT_FMT_G: &str =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
const RESULT_FMT_LAT: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
const RESULT_EXT_CPU_UTIL: &str = "    CPU_Util[%]";

/// One result row as a perftest parser reads it: the numbers under the header, in order.
#[derive(Debug)]
struct Table {
    /// `MB/sec` or `Gb/sec` (BW tests; empty for latency).
    unit: &'static str,
    cpu_util: bool,
    rows: Vec<Vec<f64>>,
}

/// The first result table of `stdout` whose header is one of perftest's: the rule, the
/// header (with `CPU_Util[%]` or not), the rows up to the next rule.
fn perftest_table(stdout: &str) -> Table {
    let lines: Vec<&str> = stdout.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let (base, cpu_util) = match l.strip_suffix(RESULT_EXT_CPU_UTIL) {
            Some(b) => (b, true),
            None => (*l, false),
        };
        let unit = match base {
            RESULT_FMT => "MB/sec",
            RESULT_FMT_G => "Gb/sec",
            RESULT_FMT_LAT => "",
            _ => continue,
        };
        assert_eq!(
            lines[i - 1],
            RESULT_LINE,
            "perftest's rule above the header"
        );
        let rows = lines[i + 1..]
            .iter()
            .take_while(|r| **r != RESULT_LINE)
            .map(|r| {
                r.split_whitespace()
                    .map(|w| w.parse().unwrap_or_else(|_| panic!("a number: {r:?}")))
                    .collect()
            })
            .collect();
        return Table {
            unit,
            cpu_util,
            rows,
        };
    }
    panic!("no perftest result header in:\n{stdout}");
}

/// One QP end of perftest's address lines.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Address {
    lid: u64,
    qpn: u64,
    psn: u64,
    rkey: u64,
    vaddr: u64,
    gid: Ipv6Addr,
}

/// C's `%#x` back: `0x1f` or, for zero, `0000`.
fn hex(w: &str) -> u64 {
    u64::from_str_radix(w.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("hex {w:?}"))
}

/// perftest's ` local address: LID … QPN … PSN … RKey … VAddr …` lines, each followed by
/// its ` GID: d:d:…` line (16 bytes in decimal): `(local, remote)`.
fn addresses(stdout: &str) -> (Vec<Address>, Vec<Address>) {
    let (mut local, mut remote) = (Vec::new(), Vec::new());
    let mut lines = stdout.lines();
    while let Some(l) = lines.next() {
        let (list, rest) = if let Some(r) = l.strip_prefix(" local address: ") {
            (&mut local, r)
        } else if let Some(r) = l.strip_prefix(" remote address: ") {
            (&mut remote, r)
        } else {
            continue;
        };
        let w: Vec<&str> = rest.split_whitespace().collect();
        let keys: Vec<&str> = w.iter().step_by(2).copied().collect();
        assert_eq!(keys, ["LID", "QPN", "PSN", "RKey", "VAddr"], "{l}");
        let gid_line = lines.next().expect("a GID line");
        let bytes: Vec<u8> = gid_line
            .strip_prefix(" GID: ")
            .unwrap_or_else(|| panic!("a GID line: {gid_line:?}"))
            .split(':')
            .map(|b| b.parse().expect("a decimal byte"))
            .collect();
        let gid: [u8; 16] = bytes.try_into().expect("16 bytes");
        list.push(Address {
            lid: hex(w[1]),
            qpn: hex(w[3]),
            psn: hex(w[5]),
            rkey: hex(w[7]),
            vaddr: hex(w[9]),
            gid: Ipv6Addr::from(gid),
        });
    }
    (local, remote)
}

/// The QPNs of a host in mrc-perf's per-EV table (`h0`, `h2`...).
fn ev_table_qpns(stdout: &str, host: &str) -> BTreeSet<u64> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with(" Per EV"))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.first() == Some(&host)).then(|| hex(w[1]))
        })
        .collect()
}

use mrc_tests::TempFile;

/// `mrc-perf ARGS --no-live`: its stdout, after asserting it succeeded.
fn perf(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .arg("--no-live")
        .output()
        .expect("mrc-perf runs");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{args:?}:\n{stdout}\n{stderr}");
    stdout
}

#[test]
fn write_bw_reads_as_ib_write_bw_output() {
    let f = TempFile::new("perftest-bw");
    let out = perf(&[
        "write_bw",
        "-n",
        "200",
        "-s",
        "8192",
        "-q",
        "2",
        "--all-evs",
        "--out_json_file",
        f.path(),
    ]);
    assert!(out.contains("                    RDMA_Write BW Test\n"));
    assert!(out.contains(" Connection type : RC\t\tUsing SRQ      : OFF\n"));
    let t = perftest_table(&out);
    assert_eq!((t.unit, t.cpu_util, t.rows.len()), ("MB/sec", false, 1));
    let [bytes, iters, peak, avg, rate] = t.rows[0][..] else {
        panic!("perftest's five columns: {:?}", t.rows[0]);
    };
    assert_eq!((bytes, iters), (8192.0, 200.0));
    // perftest's MB is 2^20 bytes: bytes over the elapsed time, as the JSON counts them.
    let r = &f.json()["results"];
    let elapsed_s = r["elapsed_ns"].as_f64().unwrap() / 1e9;
    let total = r["bytes"].as_f64().unwrap();
    assert_eq!(total, 8192.0 * 200.0 * 2.0);
    let mb_per_s = total / elapsed_s / f64::from(1 << 20);
    assert!(
        (mb_per_s - avg).abs() <= 0.006 + 1e-6 * avg,
        "{mb_per_s} vs {avg}"
    );
    assert!(peak >= avg);
    assert!((r["messages"].as_f64().unwrap() / elapsed_s / 1e6 - rate).abs() < 1e-5);

    // The address lines: one per QP and side, the QPNs those the engines report, the
    // buffers where the layout puts them (QP i's peer writes at BASE + (qps + i) x size).
    let (local, remote) = addresses(&out);
    assert_eq!((local.len(), remote.len()), (2, 2));
    assert_eq!(
        local.iter().map(|a| a.qpn).collect::<BTreeSet<_>>(),
        ev_table_qpns(&out, "h0")
    );
    assert_eq!(
        remote.iter().map(|a| a.qpn).collect::<BTreeSet<_>>(),
        ev_table_qpns(&out, "h2")
    );
    for (i, a) in local.iter().chain(&remote).enumerate() {
        assert_eq!((a.lid, a.psn), (0, 0), "RoCE's LID; the simulator's PSNs");
        assert_eq!(a.vaddr, 0x1000_0000 + (2 + i as u64 % 2) * 8192);
    }
    assert_ne!(local[0].gid, remote[0].gid);
    assert_eq!(local[0].gid, local[1].gid, "one NIC, one GID");
    assert_ne!(local[0].rkey, remote[0].rkey);
}

#[test]
fn gbits_and_cpu_util_columns_on_the_nic_threads() {
    let out = perf(&[
        "write_bw",
        "--backend",
        "mem",
        "--report_gbits",
        "--cpu_util",
        "-n",
        "200",
        "-s",
        "16384",
        "--all-evs",
    ]);
    let t = perftest_table(&out);
    assert_eq!((t.unit, t.cpu_util), ("Gb/sec", true));
    let [bytes, iters, _, avg, _, cpu] = t.rows[0][..] else {
        panic!("perftest's five columns and CPU_Util: {:?}", t.rows[0]);
    };
    assert_eq!((bytes, iters), (16384.0, 200.0));
    assert!(avg > 0.0);
    // The share of a core each NIC thread used: it polled, so some, and at most all of it.
    assert!(cpu > 0.0 && cpu <= 100.5, "CPU_Util {cpu}");
    let (local, remote) = addresses(&out);
    assert_eq!(local[0].gid, "fd00:6d72:63::1".parse::<Ipv6Addr>().unwrap());
    assert_eq!(
        remote[0].gid,
        "fd00:6d72:63::2".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!((local[0].psn, remote[0].psn), (100, 200));
    assert_eq!(
        BTreeSet::from([local[0].qpn]),
        ev_table_qpns(&out, "h0"),
        "NIC 0's QP"
    );
    assert_eq!(BTreeSet::from([remote[0].qpn]), ev_table_qpns(&out, "h1"));
}

#[test]
fn write_lat_prints_perftest_latency_header_and_honours_mtu() {
    let out = perf(&["write_lat", "-n", "100", "-m", "1024", "-s", "64"]);
    assert!(out.contains("                    RDMA_Write Latency Test\n"));
    assert!(out.contains(" Mtu             : 1024[B]\n"));
    let t = perftest_table(&out);
    assert_eq!(t.rows[0].len(), 9, "{:?}", t.rows[0]);
    let [_, _, min, max, typ, _, _, p99, p999] = t.rows[0][..] else {
        unreachable!()
    };
    assert!(min <= typ && typ <= p99 && p99 <= p999 && p999 <= max);

    // -m is the payload per packet: 8 KiB messages go as 1 KiB packets.
    let f = TempFile::new("perftest-mtu");
    perf(&[
        "write_bw",
        "-m",
        "1024",
        "-s",
        "8192",
        "-n",
        "50",
        "--out_json_file",
        f.path(),
    ]);
    let sent: u64 = f.json()["qps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["host"] == 0)
        .map(|q| q["data_packets_sent"].as_u64().unwrap())
        .sum();
    assert_eq!(sent, 50 * 8);
}

#[test]
fn output_prints_only_the_figure() {
    for (args, key) in [
        (&["write_bw", "--output=bandwidth"][..], "BW_average"),
        (&["write_bw", "--output", "message_rate"], "MsgRate"),
        (&["write_lat", "--output=latency"], "t_avg"),
    ] {
        let f = TempFile::new("perftest-output");
        let mut a = args.to_vec();
        a.extend(["-n", "100", "--out_json_file", f.path()]);
        let out = perf(&a);
        assert_eq!(out.lines().count(), 1, "{args:?}: one line:\n{out}");
        let v: f64 = out.trim().parse().expect("a number");
        assert_eq!(out.trim().split('.').nth(1).map(str::len), Some(6), "%lf");
        let want = f.json()["results"][key].as_f64().unwrap();
        assert!(
            (v - want).abs() <= 1e-6 * want.max(1.0),
            "{args:?}: {v} vs {want}"
        );
    }
}

#[test]
fn no_peak_report_both_and_write_with_imm() {
    let out = perf(&[
        "write_bw",
        "--write_with_imm",
        "-b",
        "--report-both",
        "-N",
        "-n",
        "100",
        "-s",
        "4096",
    ]);
    assert!(
        out.contains("RDMA_Write_imm Bidirectional BW Test"),
        "{out}"
    );
    assert!(out.contains(" RX depth        : 512\n"));
    let total = perftest_table(&out).rows[0].clone();
    assert_eq!(total[2], 0.0, "-N: no peak");
    // perftest's sections: a rule, " Local results: ", a rule and the header, the row.
    let mut sum = 0.0;
    for name in [" Local results: ", " Remote results: "] {
        let at = out.find(&format!("\n{name}\n")).expect(name);
        let t = perftest_table(&out[at..]);
        assert_eq!(t.rows.len(), 1, "{name}");
        assert_eq!(
            (t.rows[0][0], t.rows[0][1], t.rows[0][2]),
            (4096.0, 100.0, 0.0)
        );
        sum += t.rows[0][3];
    }
    assert!(
        (sum - total[3]).abs() < 0.02,
        "the directions add up: {sum} vs {}",
        total[3]
    );
}

#[test]
fn accepted_flags_change_nothing_perftest_would() {
    let base = perf(&["write_bw", "-n", "50", "-s", "4096"]);
    let with = perf(&[
        "write_bw", "-n", "50", "-s", "4096", "-F", "-c", "RC", "-d", "mrc-sim", "-i", "1", "-x",
        "0", "-I", "0", "-l", "1",
    ]);
    assert!(with.contains(" GID index       : 0\n"));
    let row = |o: &str| perftest_table(o).rows[0].clone();
    assert_eq!(row(&base), row(&with), "the simulator is deterministic");
}

#[test]
fn refusals_are_one_line_naming_what_to_change() {
    for (args, names) in [
        (&["-c", "UC"][..], "MRC is RC-only"),
        (&["-c", "UD"], "MRC is RC-only"),
        (&["-c", "XRC"], "MRC is RC-only"),
        (&["-c", "DC"], "MRC is RC-only"),
        (&["-c", "SRD"], "MRC is RC-only"),
        (&["-c", "IB"], "-c IB"),
        (&["-d", "mlx5_0"], "mrc-sim"),
        (&["--backend", "mem", "-d", "mrc-dpdk"], "mrc-mem"),
        (&["-i", "2"], "-i 2"),
        (&["-x", "1"], "-x 1"),
        (&["-m", "9000"], "-m 9000"),
        (&["-I", "220"], "inline"),
        (&["-l", "16"], "post lists"),
        (&["--output=gbits"], "--output=gbits"),
        (&["--output=latency"], "write_lat"),
        (&["write_lat", "--output=message_rate"], "BW tests"),
        (&["--cpu_util"], "--backend mem or dpdk"),
    ] {
        assert_refused(BIN, args, names);
    }
}

#[test]
fn dpdk_sides_print_each_others_addresses() {
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        return mrc_tests::skip("perf_perftest", "one CPU: two DPDK processes need two");
    }
    let socket = format!("/{}.sock", unique("mrc-perftest-memif"));
    let (sp, cp) = (unique("mrc-perftest-s"), unique("mrc-perftest-c"));
    let (_sd, _cd) = (DpdkRuntimeDirs(sp.clone()), DpdkRuntimeDirs(cp.clone()));
    let port = free_port().to_string();
    let common = [
        "write_bw",
        "-n",
        "200",
        "-s",
        "8192",
        "-q",
        "2",
        "--all-evs",
    ];
    let run = |extra: &[&str], eal: &str| {
        let mut args: Vec<&str> = common.to_vec();
        args.extend(extra);
        args.extend(["--backend", "dpdk", "-p", &port, "--eal", eal]);
        Proc::spawn(Command::new(BIN).args(&args), "mrc-perf")
    };
    let mut server = run(&[], &mrc_tests::memif_eal(&sp, "server", &socket));
    let mut client = run(
        &["127.0.0.1", "--cpu_util"],
        &mrc_tests::memif_eal(&cp, "client", &socket),
    );
    let c = client.finish(Duration::from_mins(2));
    let s = server.finish(Duration::from_mins(1));
    let ((cout, cerr), (sout, serr)) = (text(&c), text(&s));
    if cerr.contains("DPDK is not available") || serr.contains("DPDK is not available") {
        return mrc_tests::skip("perf_perftest", "this build has no DPDK");
    }
    assert!(
        c.status.success(),
        "client:\n{cout}\n{cerr}\nserver:\n{serr}"
    );
    assert!(s.status.success(), "server:\n{sout}\n{serr}");
    let (c_local, c_remote) = addresses(&cout);
    let (s_local, s_remote) = addresses(&sout);
    assert_eq!(c_local.len(), 2);
    assert_eq!(c_local, s_remote, "the client's QPs as the server saw them");
    assert_eq!(c_remote, s_local, "the server's QPs as the client saw them");
    assert_eq!(
        c_local.iter().map(|a| a.qpn).collect::<BTreeSet<_>>(),
        ev_table_qpns(&cout, "h0")
    );
    let t = perftest_table(&cout);
    assert!(t.cpu_util);
    let cpu = t.rows[0][5];
    assert!(cpu > 0.0 && cpu <= 100.5, "CPU_Util {cpu}");
    assert!(sout.contains(" Data ex. method : Ethernet\n"));
}

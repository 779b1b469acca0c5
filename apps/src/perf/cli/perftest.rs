//! perftest's remaining options, each with perftest's meaning where MRC has one and a
//! one-line refusal naming what to change where it has none (never a silent no-op where
//! perftest would change what it does):
//!
//! | option | here |
//! |---|---|
//! | `-c RC` | accepted; `UC`, `UD`, `XRC`, `DC`, `SRD` refused: MRC is RC-only |
//! | `-d DEV` | the device of the run: `mrc-sim`, `mrc-mem` or `mrc-dpdk` (`--backend`) |
//! | `-i 1` | the device's one port (it spans every plane) |
//! | `-x 0` | the NIC's one GID, its IPv6 address |
//! | `-m MTU` | payload bytes per packet: 256, 512, 1024, 2048, 4096 |
//! | `-I 0`, `-l 1` | no inline sends, no post lists (anything else refused) |
//! | `-N` | no BW peak (0, as perftest prints it) |
//! | `-F` | accepted: times come from the OS clock, there is no CPU-frequency warning |
//! | `--report-both` | with `-b`, each direction's table after the sum |
//! | `--output=bandwidth\|message_rate\|latency` | only that figure on stdout |
//! | `--write_with_imm` | `write_bw` becomes `write_imm_bw` |
//! | `--cpu_util` | the NIC thread's CPU, `CPU_Util[%]` (mem, dpdk) |

use super::Args;
use crate::bail_usage;
use crate::perf::settings::{BackendKind, OutputFigure, PerftestOpts, TestKind};

/// perftest's MTUs (`-m`): the InfiniBand path MTUs, payload bytes per packet.
pub const MTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];

impl Args {
    /// `--write_with_imm`: perftest's `ib_write_bw --write_with_imm` is our `write_imm_bw`;
    /// `write_lat` already pings with Write-with-Immediate (docs/mrc-perf.md).
    pub(super) const fn with_write_with_imm(&self, test: TestKind) -> TestKind {
        match (self.write_with_imm, test) {
            (true, TestKind::WriteBw) => TestKind::WriteImmBw,
            (_, t) => t,
        }
    }

    /// Check perftest's remaining options against what this run can honour.
    pub(super) fn perftest_opts(
        &self,
        test: TestKind,
        backend: BackendKind,
    ) -> anyhow::Result<PerftestOpts> {
        if let Some(c) = &self.connection {
            match c.to_ascii_uppercase().as_str() {
                "RC" => {}
                "UC" | "UD" | "XRC" | "DC" | "SRD" => bail_usage!(
                    "-c {c}: MRC is RC-only (reliable connected QPs); drop -c or use -c RC"
                ),
                _ => bail_usage!(
                    "-c {c}: perftest's connection types are RC, UC, UD, XRC, DC, SRD; MRC is RC-only (-c RC)"
                ),
            }
        }
        if let Some(d) = &self.ib_dev {
            let mine = backend.device();
            if d != mine {
                bail_usage!(
                    "-d {d}: this run's device is {mine}; the devices are mrc-sim, mrc-mem and mrc-dpdk, chosen with --backend sim|mem|dpdk (DPDK ports with --eal)"
                );
            }
        }
        if let Some(p) = self.ib_port
            && p != 1
        {
            bail_usage!(
                "-i {p}: an MRC device has one port, 1, which spans every plane (planes are --planes, or one --eal port each)"
            );
        }
        if let Some(x) = self.gid_index
            && x != 0
        {
            bail_usage!("-x {x}: an MRC NIC has one GID, index 0 (its IPv6 address)");
        }
        if let Some(m) = self.mtu
            && !MTUS.contains(&m)
        {
            bail_usage!(
                "-m {m}: the MTU (payload bytes per packet) is one of 256, 512, 1024, 2048, 4096, as in perftest"
            );
        }
        if let Some(i) = self.inline_size
            && i != 0
        {
            bail_usage!(
                "-I {i}: the software NIC has no inline sends (it reads every payload from the registered buffer); drop -I or use -I 0"
            );
        }
        if let Some(l) = self.post_list
            && l != 1
        {
            bail_usage!(
                "-l {l}: post lists are not implemented (every send is posted on its own); drop -l or use -l 1"
            );
        }
        let output = self
            .output
            .as_deref()
            .map(|o| output_figure(o, test))
            .transpose()?;
        if self.cpu_util && backend == BackendKind::Sim {
            bail_usage!(
                "--cpu_util measures the NIC thread's CPU; the simulator runs in virtual time and has none: use --backend mem or dpdk"
            );
        }
        Ok(PerftestOpts {
            mtu: self.mtu,
            no_peak: self.no_peak,
            output,
            cpu_util: self.cpu_util,
            report_both: self.report_both,
            gid_index: self.gid_index,
        })
    }
}

/// `--output`: perftest's verbosity levels, each for its kind of test.
fn output_figure(o: &str, test: TestKind) -> anyhow::Result<OutputFigure> {
    let f = match o {
        "bandwidth" => OutputFigure::Bandwidth,
        "message_rate" => OutputFigure::MessageRate,
        "latency" => OutputFigure::Latency,
        _ => bail_usage!("--output={o}: bandwidth, message_rate or latency"),
    };
    match (test.is_bw(), f) {
        (true, OutputFigure::Latency) => {
            bail_usage!(
                "--output=latency is for write_lat; a BW test prints bandwidth or message_rate"
            )
        }
        (false, OutputFigure::Bandwidth | OutputFigure::MessageRate) => {
            bail_usage!("--output={o} is for BW tests; write_lat prints latency")
        }
        _ => Ok(f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool;

    use super::super::parse;

    #[test]
    fn perftest_flags_keep_their_meaning() {
        let s = parse(&[
            "-c",
            "RC",
            "-d",
            "mrc-sim",
            "-i",
            "1",
            "-x",
            "0",
            "-m",
            "1024",
            "-I",
            "0",
            "-l",
            "1",
            "-N",
            "-F",
            "--report-both",
            "-b",
        ])
        .unwrap();
        let p = s.perftest;
        assert_eq!((p.mtu, p.no_peak, p.report_both), (Some(1024), true, true));
        assert_eq!(p.gid_index, Some(0));
        assert_eq!(
            parse(&["--output=message_rate"]).unwrap().perftest.output,
            Some(OutputFigure::MessageRate)
        );
        assert_eq!(
            parse(&["write_lat", "--output", "latency"])
                .unwrap()
                .perftest
                .output,
            Some(OutputFigure::Latency)
        );
        let imm = parse(&["write_bw", "--write_with_imm"]).unwrap();
        assert_eq!(imm.test, TestKind::WriteImmBw);
        let lat = parse(&["write_lat", "--write_with_imm"]).unwrap();
        assert_eq!(lat.test, TestKind::WriteLat);
        let mem = parse(&["--backend", "mem", "-d", "mrc-mem", "--cpu_util"]).unwrap();
        assert!(mem.perftest.cpu_util);
        assert_eq!(parse(&[]).unwrap().perftest, PerftestOpts::default());
    }

    #[test]
    fn flags_without_an_mrc_meaning_are_refused_by_name() {
        for (args, names) in [
            (&["-c", "UD"][..], "MRC is RC-only"),
            (&["-c", "uc"], "MRC is RC-only"),
            (&["-c", "XRC"], "MRC is RC-only"),
            (&["-c", "foo"], "-c foo"),
            (&["-d", "mlx5_0"], "mrc-sim"),
            (&["--backend", "mem", "-d", "mrc-sim"], "mrc-mem"),
            (&["-i", "2"], "-i 2"),
            (&["-x", "3"], "-x 3"),
            (&["-m", "1500"], "-m 1500"),
            (&["-I", "64"], "inline"),
            (&["-l", "8"], "post lists"),
            (&["--output=fast"], "--output=fast"),
            (&["--output=latency"], "write_lat"),
            (&["write_lat", "--output=bandwidth"], "BW tests"),
            (&["--cpu_util"], "--backend mem or dpdk"),
        ] {
            let e = parse(args).unwrap_err();
            assert!(tool::is_usage(&e), "{args:?}: a usage error");
            let line = tool::one_line(&e);
            assert!(line.contains(names), "{args:?}: {line}");
            assert!(!line.contains('\n'));
        }
    }
}

//! An application written once against `Verbs` and driven by completions: a ping-pong of
//! Write-with-Immediate messages between two hosts, each side answering the other's message.

mod common;

use common::{Conn, ConnOpts, Net, NetBuilder, connect, drain_cq, pattern, region};
use mrc_transport::app::{Application, Verbs};
use mrc_transport::verbs::{
    MrKeys, RecvWr, SendOpcode, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use mrc_transport::{Duration, Instant};

const SRC: u64 = 0x100_0000;
const DST: u64 = 0x200_0000;
const MSG: u32 = 10_000;

/// Sends a message, waits for the peer's, sends the next: `rounds` times.
struct PingPong {
    qpn: mrc_transport::verbs::Qpn,
    src: MrKeys,
    peer_rkey: u32,
    initiator: bool,
    rounds: u32,
    sent: u32,
    received: Vec<u32>,
}

impl PingPong {
    fn send(&mut self, verbs: &mut dyn Verbs) {
        let sge = [Sge {
            addr: SRC,
            length: MSG,
            lkey: self.src.lkey,
        }];
        // The message carries its round number in its first byte and in the immediate.
        verbs
            .mr_write(self.src.lkey, SRC, &[self.sent as u8])
            .unwrap();
        verbs
            .post_send(
                self.qpn,
                &SendWr {
                    wr_id: u64::from(self.sent),
                    opcode: SendOpcode::WriteWithImm(self.sent),
                    sg_list: &sge,
                    remote_addr: DST,
                    rkey: self.peer_rkey,
                    signaled: false,
                },
            )
            .unwrap();
        self.sent += 1;
    }
}

impl Application for PingPong {
    fn start(&mut self, _now: Instant, verbs: &mut dyn Verbs) {
        for i in 0..self.rounds {
            verbs
                .post_recv(
                    self.qpn,
                    &RecvWr {
                        wr_id: u64::from(i),
                    },
                )
                .unwrap();
        }
        if self.initiator {
            self.send(verbs);
        }
    }

    fn on_completion(&mut self, _now: Instant, wc: &WorkCompletion, verbs: &mut dyn Verbs) {
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(wc.opcode, WcOpcode::RecvRdmaWithImm, "sends are unsignaled");
        self.received.push(wc.imm_data.unwrap());
        if self.sent < self.rounds {
            self.send(verbs);
        }
    }

    fn is_done(&self) -> bool {
        self.received.len() == self.rounds as usize
    }
}

/// Drive one application per host over the net until both are done.
fn drive(net: &mut Net, c: &Conn, apps: &mut [PingPong; 2]) {
    let now = net.now();
    for (h, app) in [c.a, c.b].into_iter().zip(apps.iter_mut()) {
        app.start(now, net.ep(h));
    }
    net.run_until(Duration::from_millis(100), |n| {
        for (i, (h, cq)) in [(c.a, c.cq_a), (c.b, c.cq_b)].into_iter().enumerate() {
            for wc in drain_cq(n, h, cq) {
                let now = n.now();
                apps[i].on_completion(now, &wc, n.ep(h));
            }
        }
        apps.iter().all(Application::is_done)
    });
}

#[test]
fn ping_pong_driven_by_completions() {
    let mut net = NetBuilder::default().build();
    let c = connect(&mut net, 0, 1, ConnOpts::default());
    let mut keys = Vec::new();
    for (h, pd) in [(c.a, c.pd_a), (c.b, c.pd_b)] {
        let src = region(&mut net, h, pd, SRC, MSG as usize, pattern(h as u64));
        let dst = region(&mut net, h, pd, DST, MSG as usize, |_| 0);
        keys.push((src, dst));
    }
    let mut apps = [0, 1].map(|i| PingPong {
        qpn: if i == 0 { c.qp_a } else { c.qp_b },
        src: keys[i].0,
        peer_rkey: keys[1 - i].1.rkey,
        initiator: i == 0,
        rounds: 20,
        sent: 0,
        received: Vec::new(),
    });
    drive(&mut net, &c, &mut apps);
    let want: Vec<u32> = (0..20).collect();
    assert_eq!(apps[0].received, want, "a saw b's messages in order");
    assert_eq!(apps[1].received, want);
    // The last message's bytes sit in each destination (its first byte is the round).
    for (i, h) in [c.a, c.b].into_iter().enumerate() {
        let got = net.ep(h).mr_slice(keys[i].1.lkey).unwrap();
        let src_pattern = pattern(1 - h as u64);
        assert_eq!(got[0], 19);
        assert!(
            got[1..]
                .iter()
                .enumerate()
                .all(|(k, &b)| b == src_pattern(k + 1))
        );
    }
}

//! Linux emission: shell scripts of `ip` and `sysctl` commands that make network namespaces
//! behave as the plan's switches and hosts (the kernel-interop fabric, docs/ARCHITECTURE.md
//! "Outside world").
//!
//! - One namespace per node, named `<prefix>-<node>` (`mrc-h0`, `mrc-t0-1-0`), so several
//!   fabrics coexist and each cleans up exactly its own.
//! - veth pairs created straight inside the namespaces (no name ever lives in the root
//!   namespace): host port `p<plane>` ↔ T0 `d<k>`; T0 `u<spine>` ↔ T1 `d<rack>`. The lower end
//!   of a link is `fe80::1`, the upper end `fe80::2`; MACs are [`Plan::mac`]; every end has a
//!   permanent neighbour entry for its peer (af_xdp hosts steal NDP).
//! - Each switch owns its uN uSID as `seg6local End flavors next-csid lblen 32 nflen 16` on an
//!   `ifb` device `sr0` (not `lo`: the kernel turns a seg6local route on `lo` into a reject
//!   route), and routes the /48 of each neighbour's uSID (and each local downlink or host uSID)
//!   to that neighbour.
//! - Each host owns the address its paths end on (`block : last uSID ::`) as `seg6local End.DT6`
//!   (decapsulate, deliver the inner packet to its NIC address on `lo`), and reaches the fabric
//!   of plane `p` through the /48 of its T0 of plane `p`. The decapsulated packet is looked up
//!   in `table local`: with `table main` the NIC address (a local route) is not found and the
//!   kernel counts Ip6InNoRoutes.
//!
//! Per-downlink routes do the last hop: End.X with next-csid (which iproute2 6.1 accepts) would
//! shift an exhausted container and fall back to classic End.X, dropping SRH-less packets.
//!
//! A script may cover only one side of the host links ([`LinuxPart`]): the hosts, or the
//! switches. Host link `K` (`K = host × planes + plane`) then ends in the namespace the script
//! runs in, as veth `hl<K>` on the bridge `<attach><K>` there; whatever joins the two sides'
//! bridges carries the link (the kernel VM of the tests: a TAP and a virtio NIC, so the hosts'
//! DPDK ports stay on the real machine while the switches run in a guest kernel with SRv6).

use core::fmt::Write as _;

use super::{HostId, NodeId, Plan, SwitchId, Tier};

/// Most namespaces a Linux fabric may have (the emitted script stays a test-sized fabric).
pub const MAX_LINUX_NAMESPACES: u32 = 512;

/// A Linux fabric that cannot be emitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinuxError {
    #[error(
        "plan {plan:?} needs {namespaces} namespaces; a Linux fabric is limited to {max}: use a smaller plan"
    )]
    TooLarge {
        plan: String,
        namespaces: u32,
        max: u32,
    },
    #[error("bad namespace prefix {0:?}: use 1 to 32 characters of [A-Za-z0-9_.-]")]
    BadPrefix(String),
    #[error("bad bridge prefix {0:?}: use 1 to 8 characters of [A-Za-z0-9]")]
    BadAttach(String),
}

const SYSCTLS_ALL: &[&str] = &[
    "net.ipv6.conf.all.seg6_enabled=1",
    "net.ipv6.conf.default.seg6_enabled=1",
    "net.ipv6.conf.all.keep_addr_on_down=1",
    "net.ipv6.conf.default.keep_addr_on_down=1",
    "net.ipv6.conf.all.accept_dad=0",
    "net.ipv6.conf.default.accept_dad=0",
    "net.ipv6.conf.all.ignore_routes_with_linkdown=1",
    "net.ipv6.conf.default.ignore_routes_with_linkdown=1",
    "net.ipv6.conf.all.accept_ra=0",
    "net.ipv6.conf.default.accept_ra=0",
    "net.ipv6.conf.all.router_solicitations=0",
    "net.ipv6.conf.default.router_solicitations=0",
    // No automatic link-local address: each link end gets fe80::1 or fe80::2.
    "net.ipv6.conf.default.addr_gen_mode=1",
];
const SYSCTLS_SWITCH: &[&str] = &[
    "net.ipv6.conf.all.forwarding=1",
    "net.ipv6.conf.default.forwarding=1",
];

/// The nodes a Linux script covers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LinuxPart {
    /// Every node; every link a veth pair between two namespaces.
    #[default]
    All,
    /// Only the hosts, as namespaces for NICs that own their ports (DPDK): no kernel SRv6 on
    /// them, so a kernel without it builds them. Host link `K` ends in `hl<K>` on bridge
    /// `<attach><K>` of the namespace the script runs in.
    Hosts { attach: String },
    /// Only the switches; host link `K` ends in `hl<K>` on bridge `<attach><K>`.
    Switches { attach: String },
}

impl LinuxPart {
    fn covers(&self, node: NodeId) -> bool {
        matches!(
            (self, node),
            (Self::All, _)
                | (Self::Hosts { .. }, NodeId::Host(_))
                | (Self::Switches { .. }, NodeId::Switch(_))
        )
    }

    /// The bridge prefix of a split script.
    fn attach(&self) -> Option<&str> {
        match self {
            Self::All => None,
            Self::Hosts { attach } | Self::Switches { attach } => Some(attach),
        }
    }
}

const LOWER_LL: &str = "fe80::1";
const UPPER_LL: &str = "fe80::2";

fn mac_str(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl Plan {
    /// The address of the upper end of every link in the Linux fabric (a host's T0, a T0's
    /// T1): what a host port resolves by neighbour discovery to find its next hop.
    pub fn linux_upper_link_local() -> core::net::Ipv6Addr {
        core::net::Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2)
    }

    fn check_linux(&self, prefix: &str, part: &LinuxPart) -> Result<(), LinuxError> {
        let ok = !prefix.is_empty()
            && prefix.len() <= 32
            && prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !ok {
            return Err(LinuxError::BadPrefix(prefix.to_owned()));
        }
        if let Some(attach) = part.attach() {
            let ok = !attach.is_empty()
                && attach.len() <= 8
                && attach.bytes().all(|b| b.is_ascii_alphanumeric());
            if !ok {
                return Err(LinuxError::BadAttach(attach.to_owned()));
            }
        }
        let namespaces = self.host_count() + self.switch_count();
        if namespaces > MAX_LINUX_NAMESPACES {
            return Err(LinuxError::TooLarge {
                plan: self.name.clone(),
                namespaces,
                max: MAX_LINUX_NAMESPACES,
            });
        }
        Ok(())
    }

    /// The namespace of `node`: `<prefix>-<node>`.
    pub fn netns_name(&self, prefix: &str, node: NodeId) -> String {
        format!("{prefix}-{node}")
    }

    /// The interface behind `port` of `node`: `p<plane>` on hosts, `d<k>` / `u<spine>` on T0s,
    /// `d<rack>` on T1s (at most 5 characters).
    pub fn ifname(&self, node: NodeId, port: u16) -> String {
        match node {
            NodeId::Host(_) => format!("p{port}"),
            NodeId::Switch(s) if s.tier == Tier::T0 && port >= self.hosts_per_t0 => {
                format!("u{}", port - self.hosts_per_t0)
            }
            NodeId::Switch(_) => format!("d{port}"),
        }
    }

    /// True if `port` of `node` is the lower end of its link (host side, or T0 side).
    fn is_lower_end(&self, node: NodeId, port: u16) -> bool {
        match node {
            NodeId::Host(_) => true,
            NodeId::Switch(s) => s.tier == Tier::T0 && port >= self.hosts_per_t0,
        }
    }

    fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.hosts()
            .map(NodeId::Host)
            .chain(self.switches().map(NodeId::Switch))
    }

    /// Every namespace of the fabric, hosts first.
    pub fn linux_namespaces(&self, prefix: &str) -> Vec<String> {
        self.nodes().map(|n| self.netns_name(prefix, n)).collect()
    }

    /// The index `K` of the link of `host`'s port to `plane`: its `hl<K>` in a split script.
    pub fn host_link_index(&self, host: HostId, plane: u8) -> u32 {
        host.0 * u32::from(self.planes) + u32::from(plane)
    }

    /// The script that builds the fabric: namespaces, sysctls, veth links, addresses, routes
    /// and neighbours. Deterministic; stops at the first failing command.
    pub fn linux_config(&self, prefix: &str) -> Result<String, LinuxError> {
        self.linux_config_part(prefix, &LinuxPart::All)
    }

    /// [`Plan::linux_config`] for the nodes of `part` only.
    pub fn linux_config_part(&self, prefix: &str, part: &LinuxPart) -> Result<String, LinuxError> {
        self.check_linux(prefix, part)?;
        let mut s = String::new();
        let side = match part {
            LinuxPart::All => "",
            LinuxPart::Hosts { .. } => " (the hosts' side)",
            LinuxPart::Switches { .. } => " (the switches' side)",
        };
        let _ = writeln!(
            s,
            "#!/bin/sh\n# mrc-fabric linux: plan {:?}, prefix {prefix:?}{side}: {} hosts, {} \
             switches, {} planes, MTU {}.\nset -e",
            self.name,
            self.host_count(),
            self.switch_count(),
            self.planes,
            self.mtu
        );
        s.push_str("\n# Namespaces and sysctls (defaults first: new interfaces inherit them).\n");
        let _ = writeln!(s, "SYSCTL_ALL=\"{}\"", SYSCTLS_ALL.join(" "));
        let _ = writeln!(s, "SYSCTL_SWITCH=\"{}\"", SYSCTLS_SWITCH.join(" "));
        for node in self.nodes().filter(|n| part.covers(*n)) {
            let ns = self.netns_name(prefix, node);
            let vars = match node {
                NodeId::Host(_) => "$SYSCTL_ALL",
                NodeId::Switch(_) => "$SYSCTL_ALL $SYSCTL_SWITCH",
            };
            let _ = writeln!(s, "ip netns add {ns}");
            let _ = writeln!(s, "ip netns exec {ns} sysctl -qw {vars} >/dev/null");
        }

        s.push_str("\n# Links: host p<plane> <-> T0 d<k>; T0 u<spine> <-> T1 d<rack>.\n");
        for node in self.nodes() {
            for port in 0..self.port_count(node) {
                // Each link once, from its lower end.
                if !self.is_lower_end(node, port) {
                    continue;
                }
                let link = self.link(node, port).expect("port in range");
                if let (NodeId::Host(h), Some(attach)) = (node, part.attach()) {
                    // A host link cut in the middle: this side's end on the bridge.
                    let end = if part.covers(node) {
                        (node, port)
                    } else {
                        (link.peer, link.peer_port)
                    };
                    let k = self.host_link_index(h, u8::try_from(port).expect("a plane"));
                    let _ = writeln!(
                        s,
                        "ip link add hl{k} mtu {mtu} type veth peer name {} address {} mtu {mtu} netns {}",
                        self.ifname(end.0, end.1),
                        mac_str(self.mac(end.0, end.1)),
                        self.netns_name(prefix, end.0),
                        mtu = self.mtu,
                    );
                    let _ = writeln!(s, "ip link set hl{k} master {attach}{k} up");
                    continue;
                }
                if !part.covers(node) {
                    continue;
                }
                let _ = writeln!(
                    s,
                    "ip -n {} link add {} address {} mtu {} type veth peer name {} address {} mtu {} netns {}",
                    self.netns_name(prefix, node),
                    self.ifname(node, port),
                    mac_str(self.mac(node, port)),
                    self.mtu,
                    self.ifname(link.peer, link.peer_port),
                    mac_str(self.mac(link.peer, link.peer_port)),
                    self.mtu,
                    self.netns_name(prefix, link.peer),
                );
            }
        }

        s.push_str("\n# Devices and addresses.\n");
        for node in self.nodes().filter(|n| part.covers(*n)) {
            let _ = writeln!(s, "ip -n {} -b - <<'EOF'", self.netns_name(prefix, node));
            s.push_str("link set lo up\n");
            if !matches!(part, LinuxPart::Hosts { .. }) {
                s.push_str("link add sr0 type ifb\nlink set sr0 up\n");
            }
            if let NodeId::Host(h) = node {
                let _ = writeln!(s, "addr add {}/128 dev lo", self.nic_addr(h));
            }
            for port in 0..self.port_count(node) {
                let ifname = self.ifname(node, port);
                let ll = if self.is_lower_end(node, port) {
                    LOWER_LL
                } else {
                    UPPER_LL
                };
                let _ = writeln!(s, "link set {ifname} up");
                let _ = writeln!(s, "addr add {ll}/64 dev {ifname} nodad");
                if let Some(own) = self.adjacency_addr(node, port, false) {
                    let _ = writeln!(s, "addr add {own}/112 dev {ifname} nodad");
                }
            }
            s.push_str("EOF\n");
        }

        s.push_str("\n# Routes and neighbours.\n");
        self.write_routes(&mut s, prefix, part, false);
        Ok(s)
    }

    /// Only the routes and neighbours, with `replace` and `-force`: safe to run again, e.g. after
    /// `ip link set up` (an admin-down port loses its routes and neighbours).
    pub fn linux_routes(&self, prefix: &str) -> Result<String, LinuxError> {
        self.linux_routes_part(prefix, &LinuxPart::All)
    }

    /// [`Plan::linux_routes`] for the nodes of `part` only.
    pub fn linux_routes_part(&self, prefix: &str, part: &LinuxPart) -> Result<String, LinuxError> {
        self.check_linux(prefix, part)?;
        let mut s = format!(
            "#!/bin/sh\n# mrc-fabric linux --routes: plan {:?}, prefix {prefix:?}.\n",
            self.name
        );
        self.write_routes(&mut s, prefix, part, true);
        Ok(s)
    }

    /// The script that deletes every namespace of the fabric (and so its links). Never fails.
    pub fn linux_teardown(&self, prefix: &str) -> Result<String, LinuxError> {
        self.linux_teardown_part(prefix, &LinuxPart::All)
    }

    /// [`Plan::linux_teardown`] for the namespaces of `part` only (a cut host link's `hl<K>`
    /// goes with its peer).
    pub fn linux_teardown_part(
        &self,
        prefix: &str,
        part: &LinuxPart,
    ) -> Result<String, LinuxError> {
        self.check_linux(prefix, part)?;
        let mut s = format!(
            "#!/bin/sh\n# mrc-fabric linux --teardown: plan {:?}, prefix {prefix:?}.\n",
            self.name
        );
        for node in self.nodes().filter(|n| part.covers(*n)) {
            let _ = writeln!(
                s,
                "ip netns del {} 2>/dev/null || true",
                self.netns_name(prefix, node)
            );
        }
        Ok(s)
    }

    fn write_routes(&self, s: &mut String, prefix: &str, part: &LinuxPart, lenient: bool) {
        let f = self.format();
        let flags = if lenient { " -force" } else { "" };
        let tail = if lenient { " || true" } else { "" };
        for node in self.nodes().filter(|n| part.covers(*n)) {
            let _ = writeln!(
                s,
                "ip -n {}{flags} -b - <<'EOF'{tail}",
                self.netns_name(prefix, node)
            );
            // Neighbours: every link end knows its peer's MAC.
            for port in 0..self.port_count(node) {
                let link = self.link(node, port).expect("port in range");
                let peer_ll = if self.is_lower_end(node, port) {
                    UPPER_LL
                } else {
                    LOWER_LL
                };
                let _ = writeln!(
                    s,
                    "neigh replace {peer_ll} lladdr {} dev {} nud permanent",
                    mac_str(self.mac(link.peer, link.peer_port)),
                    self.ifname(node, port)
                );
                if let Some(peer) = self.adjacency_addr(node, port, true) {
                    let _ = writeln!(
                        s,
                        "neigh replace {peer} lladdr {} dev {} nud permanent",
                        mac_str(self.mac(link.peer, link.peer_port)),
                        self.ifname(node, port)
                    );
                }
            }
            match node {
                NodeId::Host(h) => {
                    self.write_host_routes(s, h, !matches!(part, LinuxPart::Hosts { .. }));
                }
                NodeId::Switch(sw) => {
                    for route in self.switch_table(sw) {
                        let _ = match route.action {
                            super::RouteAction::End => writeln!(
                                s,
                                "route replace {}/{} encap seg6local action End flavors next-csid \
                                 lblen {} nflen {} dev sr0",
                                route.prefix,
                                route.prefix_len,
                                f.block_bits(),
                                f.usid_bits()
                            ),
                            // The next hop is the link's far end by its own address: a
                            // link-local one is the same on every link, and End.X would
                            // resolve it on whichever link the kernel found first.
                            super::RouteAction::EndX(port) => writeln!(
                                s,
                                "route replace {}/{} encap seg6local action End.X nh6 {} flavors \
                                 next-csid lblen {} nflen {} dev sr0",
                                route.prefix,
                                route.prefix_len,
                                self.adjacency_addr(NodeId::Switch(sw), port, true)
                                    .expect("an End.X port is a fabric link"),
                                f.block_bits(),
                                f.usid_bits(),
                            ),
                            super::RouteAction::Port(port) => writeln!(
                                s,
                                "route replace {}/{} via {} dev {}",
                                route.prefix,
                                route.prefix_len,
                                self.peer_ll(sw, port),
                                self.ifname(NodeId::Switch(sw), port)
                            ),
                        };
                    }
                }
            }
            s.push_str("EOF\n");
            // A kernel may accept End.X with next-csid and drop the flavor (Linux 6.1): then
            // the switch would forward on a classic End.X. Read one route back.
            let first_x = match node {
                NodeId::Switch(sw) if !lenient => self
                    .switch_table(sw)
                    .find(|r| matches!(r.action, super::RouteAction::EndX(_))),
                _ => None,
            };
            if let Some(r) = first_x {
                let ns = self.netns_name(prefix, node);
                let _ = writeln!(
                    s,
                    "ip -n {ns} -6 route show {}/{} | grep -q next-csid || {{ echo \"{ns}: this \
                     kernel ($(uname -r)) dropped the next-csid flavor of End.X: uA switches need \
                     a newer one (Debian's 6.12 has it)\" >&2; exit 1; }}",
                    r.prefix, r.prefix_len
                );
            }
        }
    }

    /// In a plan with adjacency uSIDs, the address of one end of a T0–T1 link (`peer`: the far
    /// end, seen from `port` of `node`), unique to the link: `fd00:6d72:6301:0:plane:t0:t1:end`
    /// /112, `end` 1 on the T0 and 2 on the T1. An End.X next hop (uA) names its link by it.
    fn adjacency_addr(&self, node: NodeId, port: u16, peer: bool) -> Option<core::net::Ipv6Addr> {
        let NodeId::Switch(sw) = node else {
            return None;
        };
        if self.switch_mode != super::SwitchMode::Adjacency {
            return None;
        }
        let (t0, t1, lower) = match sw.tier {
            Tier::T0 if port >= self.hosts_per_t0 => (sw.index, port - self.hosts_per_t0, true),
            Tier::T0 => return None,
            Tier::T1 => (port, sw.index, false),
        };
        let end = if lower == peer { 2 } else { 1 };
        Some(core::net::Ipv6Addr::new(
            0xfd00,
            0x6d72,
            0x6301,
            0,
            u16::from(sw.plane),
            t0,
            t1,
            end,
        ))
    }

    fn peer_ll(&self, sw: SwitchId, port: u16) -> &'static str {
        if self.is_lower_end(NodeId::Switch(sw), port) {
            UPPER_LL
        } else {
            LOWER_LL
        }
    }

    /// A host's routes to its T0s, and (`decap`: a host whose kernel ends the paths) its
    /// End.DT6.
    fn write_host_routes(&self, s: &mut String, h: HostId, decap: bool) {
        let f = self.format();
        if decap {
            let _ = writeln!(
                s,
                "route replace {}/{} encap seg6local action End.DT6 table local dev sr0",
                self.host_sid_addr(h),
                f.locator_len()
            );
        }
        for plane in 0..self.planes {
            let t0 = SwitchId::t0(plane, self.rack_of(h));
            let _ = writeln!(
                s,
                "route replace {}/{} via {UPPER_LL} dev {}",
                f.locator(self.block, self.switch_usid(t0)),
                f.locator_len(),
                self.ifname(NodeId::Host(h), u16::from(plane))
            );
        }
    }
}

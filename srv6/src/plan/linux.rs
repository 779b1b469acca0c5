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

    fn check_linux(&self, prefix: &str) -> Result<(), LinuxError> {
        let ok = !prefix.is_empty()
            && prefix.len() <= 32
            && prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !ok {
            return Err(LinuxError::BadPrefix(prefix.to_owned()));
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

    /// The script that builds the fabric: namespaces, sysctls, veth links, addresses, routes
    /// and neighbours. Deterministic; stops at the first failing command.
    pub fn linux_config(&self, prefix: &str) -> Result<String, LinuxError> {
        self.check_linux(prefix)?;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "#!/bin/sh\n# mrc-fabric linux: plan {:?}, prefix {prefix:?}: {} hosts, {} switches, \
             {} planes, MTU {}.\nset -e",
            self.name,
            self.host_count(),
            self.switch_count(),
            self.planes,
            self.mtu
        );
        s.push_str("\n# Namespaces and sysctls (defaults first: new interfaces inherit them).\n");
        let _ = writeln!(s, "SYSCTL_ALL=\"{}\"", SYSCTLS_ALL.join(" "));
        let _ = writeln!(s, "SYSCTL_SWITCH=\"{}\"", SYSCTLS_SWITCH.join(" "));
        for node in self.nodes() {
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
        for node in self.nodes() {
            let _ = writeln!(s, "ip -n {} -b - <<'EOF'", self.netns_name(prefix, node));
            s.push_str("link set lo up\nlink add sr0 type ifb\nlink set sr0 up\n");
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
            }
            s.push_str("EOF\n");
        }

        s.push_str("\n# Routes and neighbours.\n");
        self.write_routes(&mut s, prefix, false);
        Ok(s)
    }

    /// Only the routes and neighbours, with `replace` and `-force`: safe to run again, e.g. after
    /// `ip link set up` (an admin-down port loses its routes and neighbours).
    pub fn linux_routes(&self, prefix: &str) -> Result<String, LinuxError> {
        self.check_linux(prefix)?;
        let mut s = format!(
            "#!/bin/sh\n# mrc-fabric linux --routes: plan {:?}, prefix {prefix:?}.\n",
            self.name
        );
        self.write_routes(&mut s, prefix, true);
        Ok(s)
    }

    /// The script that deletes every namespace of the fabric (and so its links). Never fails.
    pub fn linux_teardown(&self, prefix: &str) -> Result<String, LinuxError> {
        self.check_linux(prefix)?;
        let mut s = format!(
            "#!/bin/sh\n# mrc-fabric linux --teardown: plan {:?}, prefix {prefix:?}.\n",
            self.name
        );
        for ns in self.linux_namespaces(prefix) {
            let _ = writeln!(s, "ip netns del {ns} 2>/dev/null || true");
        }
        Ok(s)
    }

    fn write_routes(&self, s: &mut String, prefix: &str, lenient: bool) {
        let f = self.format();
        let flags = if lenient { " -force" } else { "" };
        let tail = if lenient { " || true" } else { "" };
        for node in self.nodes() {
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
            }
            match node {
                NodeId::Host(h) => self.write_host_routes(s, h),
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
        }
    }

    fn peer_ll(&self, sw: SwitchId, port: u16) -> &'static str {
        if self.is_lower_end(NodeId::Switch(sw), port) {
            UPPER_LL
        } else {
            LOWER_LL
        }
    }

    fn write_host_routes(&self, s: &mut String, h: HostId) {
        let f = self.format();
        let _ = writeln!(
            s,
            "route replace {}/{} encap seg6local action End.DT6 table local dev sr0",
            self.host_sid_addr(h),
            f.locator_len()
        );
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

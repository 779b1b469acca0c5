use super::*;
use proptest::prelude::*;
use std::collections::HashSet;

const EIGHT_PLANE: &str = include_str!("../../../plans/8plane-128.toml");
const MAX: &str = include_str!("../../../plans/max.toml");

fn small() -> Plan {
    Plan::builtin("small").unwrap()
}

fn addr(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

#[test]
fn builtin_and_shipped_plans_parse() {
    let p = small();
    assert_eq!(p.name(), "small");
    assert_eq!((p.planes(), p.t0_per_plane(), p.t1_per_plane()), (2, 2, 2));
    assert_eq!((p.host_count(), p.switch_count()), (4, 8));
    assert_eq!(p.host_mode(), HostMode::Global);
    assert_eq!(
        include_str!("../../../plans/small.toml"),
        SMALL_PLAN_TOML,
        "plans/small.toml and the built-in plan must stay the same"
    );
    let p = Plan::from_toml(EIGHT_PLANE, "plans/8plane-128.toml").unwrap();
    assert_eq!((p.planes(), p.host_count()), (8, 128));
    assert_eq!(p.link_params(LinkTier::Fabric).speed_gbps, 400);
    assert_eq!(p.link_params(LinkTier::Host).queue.ecn_max_prob, Some(0.2));
    assert_eq!(p.sim().get("trim").and_then(|v| v.as_bool()), Some(true));
    let p = Plan::from_toml(MAX, "plans/max.toml").unwrap();
    assert_eq!(p.host_count(), 131_072);
    assert_eq!(p.host_mode(), HostMode::Downlink);
    assert!(Plan::builtin("huge").is_none());
}

#[test]
fn cross_rack_path_matches_the_protocol_layout() {
    let p = small();
    // h0 (rack 0) to h3 (rack 1, downlink 1), plane 0, spine 1.
    let path = p.path(HostId(0), HostId(3), 0, 1).unwrap();
    assert_eq!(path.da, addr("fcbb:bb00:1000:2001:1001:8003::"));
    assert_eq!(path.spine, Some(1));
    assert_eq!(
        path.usids(),
        [Usid(0x1000), Usid(0x2001), Usid(0x1001), Usid(0x8003)]
    );
    let hops: Vec<(String, u16)> = path
        .hops()
        .iter()
        .map(|h| (h.node.to_string(), h.egress_port))
        .collect();
    assert_eq!(
        hops,
        [
            ("h0".to_owned(), 0),
            ("t0-0-0".to_owned(), 3),
            ("t1-0-1".to_owned(), 1),
            ("t0-0-1".to_owned(), 1)
        ]
    );
    assert!(path.crosses(SwitchId::t1(0, 1)));
    assert!(!path.crosses(SwitchId::t1(0, 0)));
    assert_eq!(p.path_count(HostId(0), HostId(3), 1), Ok(2));
    // Plane 1 uses the plane-1 switches.
    let path = p.path(HostId(0), HostId(3), 1, 0).unwrap();
    assert_eq!(path.da, addr("fcbb:bb00:1200:2100:1201:8003::"));
}

#[test]
fn same_rack_has_direct_and_bounced_paths() {
    let p = small();
    assert_eq!(p.path_count(HostId(0), HostId(1), 0), Ok(3));
    let paths: Vec<Path> = p.paths(HostId(0), HostId(1), 0).unwrap().collect();
    assert_eq!(paths[0].da, addr("fcbb:bb00:1000:2000:1000:8001::"));
    assert_eq!(paths[2].spine, None);
    assert_eq!(paths[2].da, addr("fcbb:bb00:1000:8001::"));
    assert_eq!(paths[2].hops().len(), 2);
    assert_eq!(p.paths_all_planes(HostId(0), HostId(1)).unwrap().count(), 6);
}

#[test]
fn bad_path_requests_are_errors() {
    let p = small();
    assert_eq!(
        p.path_count(HostId(0), HostId(9), 0),
        Err(PathError::NoSuchHost(HostId(9)))
    );
    assert_eq!(
        p.path_count(HostId(0), HostId(1), 2),
        Err(PathError::NoSuchPlane(2))
    );
    assert_eq!(
        p.path_count(HostId(2), HostId(2), 0),
        Err(PathError::SameHost(HostId(2)))
    );
    assert_eq!(
        p.path(HostId(0), HostId(3), 0, 2),
        Err(PathError::NoSuchPath { index: 2, count: 2 })
    );
}

/// Every path of a plan, followed switch by switch with `lookup` (what the switches do),
/// crosses exactly the path's hops and reaches its destination.
fn check_paths_forward(p: &Plan, pairs: &[(u32, u32)]) {
    for &(s, d) in pairs {
        for path in p.paths_all_planes(HostId(s), HostId(d)).unwrap() {
            let first = match p.link(NodeId::Host(path.src), path.hops()[0].egress_port) {
                Some(Link {
                    peer: NodeId::Switch(sw),
                    ..
                }) => sw,
                other => panic!("host port leads to {other:?}"),
            };
            let trace = p.trace(first, path.da);
            assert_eq!(trace.end, TraceEnd::Host(path.dst), "{path}");
            let expect: Vec<(SwitchId, u16)> = path.hops()[1..]
                .iter()
                .map(|h| match h.node {
                    NodeId::Switch(sw) => (sw, h.egress_port),
                    NodeId::Host(_) => panic!("host in the middle of {path}"),
                })
                .collect();
            assert_eq!(trace.crossed, expect, "{path}");
        }
    }
}

#[test]
fn switches_forward_every_small_path_to_its_destination() {
    let p = small();
    let pairs: Vec<(u32, u32)> = (0..4)
        .flat_map(|s| (0..4).map(move |d| (s, d)))
        .filter(|(s, d)| s != d)
        .collect();
    check_paths_forward(&p, &pairs);
}

/// The small plan with adjacency (uA) switch uSIDs.
fn small_ua() -> Plan {
    let text = SMALL_PLAN_TOML.replace(
        "host_usids = \"global\"",
        "host_usids = \"global\"\nswitch_usids = \"adjacency\"",
    );
    Plan::from_toml(&text, "small-ua").unwrap()
}

#[test]
fn adjacency_paths_name_the_ports_and_reach_their_hosts() {
    let p = small_ua();
    assert_eq!(p.switch_mode(), SwitchMode::Adjacency);
    assert_eq!(small().switch_mode(), SwitchMode::Node);
    // h0 (rack 0) to h3 (rack 1): T0(0,0)'s uN, its uplink 1 (port 2 + 1), the spine's
    // downlink to rack 1 (port 1), h3's global uSID.
    let path = p.path(HostId(0), HostId(3), 0, 1).unwrap();
    assert_eq!(
        path.usids(),
        [Usid(0x1000), Usid(0xe803), Usid(0xe801), Usid(0x8003)]
    );
    assert_eq!(path.da, addr("fcbb:bb00:1000:e803:e801:8003::"));
    // The spine has no route for its uN uSID's successor: it leaves by the port the uSID
    // names, not by a lookup (a foreign port number drops).
    let t1 = SwitchId::t1(0, 1);
    assert_eq!(
        p.lookup(t1, addr("fcbb:bb00:e801:8003::")),
        Forward::Out {
            port: 1,
            da: addr("fcbb:bb00:8003::")
        }
    );
    assert_eq!(
        p.lookup(t1, addr("fcbb:bb00:e805:8003::")),
        Forward::Drop(DropReason::NoRoute)
    );
    // A node plan does not know adjacency uSIDs.
    assert_eq!(
        small().lookup(t1, addr("fcbb:bb00:e801:8003::")),
        Forward::Drop(DropReason::NoRoute)
    );
    let pairs: Vec<(u32, u32)> = (0..4)
        .flat_map(|s| (0..4).map(move |d| (s, d)))
        .filter(|(s, d)| s != d)
        .collect();
    check_paths_forward(&p, &pairs);
    let cfg = p.linux_config("t").unwrap();
    assert!(cfg.contains(
        "route replace fcbb:bb00:e803::/48 encap seg6local action End.X nh6 \
         fd00:6d72:6301::1:2 flavors next-csid lblen 32 nflen 16 dev sr0"
    ));
    // T0(0,0)'s uplink 1 and T1(0,1)'s downlink 0 are one link: each end has its address and
    // knows the other's.
    assert!(cfg.contains("addr add fd00:6d72:6301::1:1/112 dev u1 nodad"));
    assert!(cfg.contains("addr add fd00:6d72:6301::1:2/112 dev d0 nodad"));
    assert!(cfg.contains("neigh replace fd00:6d72:6301::1:1 lladdr "));
    assert!(cfg.contains("ip -n t-t1-1-1 -6 route show fcbb:bb00:e800::/48 | grep -q next-csid"));
    assert!(!small().linux_config("t").unwrap().contains("End.X"));
}

#[test]
fn max_plan_answers_a_few_paths_without_enumerating() {
    let p = Plan::from_toml(MAX, "max.toml").unwrap();
    let last = HostId(p.host_count() - 1);
    assert_eq!(p.path_count(HostId(0), last, 7), Ok(256));
    let path = p.path(HostId(0), last, 7, 255).unwrap();
    assert_eq!(path.da, addr("fcbb:bb00:1e00:27ff:1fff:e0ff::"));
    check_paths_forward(&p, &[(0, 1), (12_345, 131_071)]);
    // Tables stay small: a T0 has 1 + 256 + 256 routes, a T1 1 + 512.
    assert_eq!(p.switch_table(SwitchId::t0(3, 100)).count(), 513);
    assert_eq!(p.switch_table(SwitchId::t1(3, 100)).count(), 513);
}

#[test]
fn lookup_handles_foreign_and_exhausted_addresses() {
    let p = small();
    let t0 = SwitchId::t0(0, 0);
    assert_eq!(
        p.lookup(t0, addr("2001:db8::1")),
        Forward::Drop(DropReason::NotInBlock)
    );
    // A plane-1 spine is not reachable from a plane-0 T0.
    assert_eq!(
        p.lookup(t0, addr("fcbb:bb00:2100::")),
        Forward::Drop(DropReason::NoRoute)
    );
    assert_eq!(
        p.lookup(t0, addr("fcbb:bb00:1000::")),
        Forward::Exhausted {
            da: addr("fcbb:bb00:1000::")
        }
    );
    assert_eq!(
        p.lookup(t0, addr("fcbb:bb00::")),
        Forward::Drop(DropReason::EmptyContainer)
    );
    // Switches outside the plan have nothing.
    assert_eq!(p.switch_table(SwitchId::t0(5, 0)).count(), 0);
}

/// Longest-prefix match over the table, then End processing: the reference for `lookup`.
fn lookup_by_table(p: &Plan, sw: SwitchId, da: Ipv6Addr) -> Forward {
    let mut c = crate::wire::UsidContainer::from_addr(p.format(), da);
    for _ in 0..6 {
        let hit = p.switch_table(sw).find(|r| {
            let mask = !0u128 << (128 - u32::from(r.prefix_len));
            u128::from(c.addr()) & mask == u128::from(r.prefix)
        });
        match hit.map(|r| r.action) {
            Some(RouteAction::Port(port)) => return Forward::Out { port, da: c.addr() },
            Some(RouteAction::End) => {
                if !c.shift() {
                    return Forward::Exhausted { da: c.addr() };
                }
            }
            Some(RouteAction::EndX(port)) => {
                if !c.shift() {
                    return Forward::Exhausted { da: c.addr() };
                }
                return Forward::Out { port, da: c.addr() };
            }
            None => {
                return Forward::Drop(if c.block() != p.block() {
                    DropReason::NotInBlock
                } else if c.active().is_none() {
                    DropReason::EmptyContainer
                } else {
                    DropReason::NoRoute
                });
            }
        }
    }
    Forward::Drop(DropReason::EmptyContainer)
}

proptest! {
    #[test]
    fn lookup_agrees_with_the_table(
        plane in 0u8..8, tier in any::<bool>(), index in 0u16..8,
        usids in prop::collection::vec(prop_oneof![
            0u32..0x10, 0x1000u32..0x1010, 0x1e00u32..0x1e08, 0x2000u32..0x2010, 0x8000u32..0x8004,
            0xe000u32..0xe012, 0xe800u32..0xe812, any::<u16>().prop_map(u32::from)
        ], 0..6),
        foreign in any::<bool>(),
        adjacency in any::<bool>(),
    ) {
        let text = if adjacency {
            EIGHT_PLANE.replacen("\nhost_usids", "\nswitch_usids = \"adjacency\"\nhost_usids", 1)
        } else {
            EIGHT_PLANE.to_owned()
        };
        let p = Plan::from_toml(&text, "8plane-128.toml").unwrap();
        let sw = if tier { SwitchId::t1(plane, index) } else { SwitchId::t0(plane, index) };
        let mut bits = u128::from(if foreign { addr("fcbb:bb01::") } else { p.block() });
        for (i, u) in usids.iter().enumerate() {
            bits |= u128::from(*u) << (80 - 16 * i);
        }
        let da = Ipv6Addr::from(bits);
        prop_assert_eq!(p.lookup(sw, da), lookup_by_table(&p, sw, da));
    }
}

#[test]
fn links_are_symmetric_and_macs_unique() {
    let p = Plan::from_toml(EIGHT_PLANE, "8plane-128.toml").unwrap();
    let mut macs = HashSet::new();
    let nodes = p
        .hosts()
        .map(NodeId::Host)
        .chain(p.switches().map(NodeId::Switch));
    for node in nodes {
        for port in 0..p.port_count(node) {
            let link = p.link(node, port).unwrap();
            let back = p.link(link.peer, link.peer_port).unwrap();
            assert_eq!((back.peer, back.peer_port), (node, port));
            assert_eq!(back.tier, link.tier);
            assert!(macs.insert(p.mac(node, port)), "{node} port {port}");
        }
        assert_eq!(p.link(node, p.port_count(node)), None);
    }
    assert_eq!(macs.len(), 128 * 8 * 2 + 8 * 8 * 8 * 2);
}

#[test]
fn node_names_roundtrip() {
    for name in ["h0", "h131071", "t0-7-511", "t1-0-3"] {
        assert_eq!(name.parse::<NodeId>().unwrap().to_string(), name);
    }
    assert_eq!("5".parse::<NodeId>(), Ok(NodeId::Host(HostId(5))));
    for bad in ["x1", "t2-0-0", "t0-0", "t0-0-0-0", "h", "t0-300-0"] {
        assert!(bad.parse::<NodeId>().is_err(), "{bad}");
    }
}

#[test]
fn nic_addresses_and_usid_owners_invert() {
    let p = small();
    for h in p.hosts() {
        assert_eq!(p.host_of_nic(p.nic_addr(h)), Some(h));
        assert_eq!(p.usid_owner(p.host_final_usid(h)), Some(UsidOwner::Host(h)));
    }
    assert_eq!(p.nic_addr(HostId(0)), addr("fd00:6d72:6300::1"));
    assert_eq!(p.host_of_nic(addr("fd00:6d72:6300::5")), None);
    assert_eq!(p.host_of_nic(addr("fd00:6d72:6301::1")), None);
    assert_eq!(
        p.usid_owner(Usid(0x1400)),
        None,
        "plane 2 is not in the small plan"
    );
    assert_eq!(
        p.usid_owner(Usid(0xe000)),
        None,
        "no downlink uSIDs in global mode"
    );
}

fn err(text: &str) -> PlanError {
    Plan::from_toml(text, "test.toml").unwrap_err()
}

fn with(field: &str, value: &str) -> String {
    SMALL_PLAN_TOML
        .lines()
        .map(|l| {
            if l.starts_with(&format!("{field} =")) {
                format!("{field} = {value}")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn line_of(field: &str) -> usize {
    SMALL_PLAN_TOML
        .lines()
        .position(|l| l.starts_with(&format!("{field} =")))
        .unwrap()
        + 1
}

#[test]
fn errors_name_file_line_and_field() {
    let e = err(&with("planes", "9"));
    assert_eq!(e.line, Some(line_of("planes")));
    assert_eq!(e.field.as_deref(), Some("planes"));
    assert!(
        e.to_string().starts_with(&format!(
            "test.toml:{}: planes: 9 is out of range",
            line_of("planes")
        )),
        "{e}"
    );

    let e = err(&with("usid_block", "\"fcbb:bb00::/48\""));
    assert_eq!(e.line, Some(line_of("usid_block")));
    assert!(e.message.contains("must be a /32"), "{e}");

    let e = err(&with("mtu", "1000"));
    assert_eq!(e.line, Some(line_of("mtu")));
    assert!(e.message.contains("1280"), "{e}");

    let e = err(&with("host_usids", "\"somewhere\""));
    assert_eq!(e.line, Some(line_of("host_usids")));
    assert!(e.message.contains("downlink"), "{e}");
    // A multi-line string quoted in the message stays on one line (found by `plan_toml`).
    let e = err(&with("host_usids", "\"\"\"some\nwhere\"\"\""));
    assert!(
        !e.to_string().contains('\n') && e.message.contains("some\\nwhere"),
        "{e}"
    );

    let e = err(&with("t0_per_plane", "512").replace("hosts_per_t0 = 2", "hosts_per_t0 = 256"));
    assert_eq!(e.field.as_deref(), Some("host_usids"));
    assert!(e.message.contains("use \"downlink\""), "{e}");

    let e = err(&with("nic_prefix", "\"fcbb:bb00:1::/64\""));
    assert!(e.message.contains("overlaps"), "{e}");

    let e = err(&format!("{SMALL_PLAN_TOML}\nplanez = 3\n"));
    assert!(e.line.is_some() && e.message.contains("planez"), "{e}");

    let e = err("planes = [\n");
    assert!(e.line.is_some(), "{e}");

    // An unclosed string runs to the end of the file: the error is on its last line.
    let e = err(&format!("{SMALL_PLAN_TOML}name = \"\"\"x\n"));
    assert_eq!(e.line, Some(SMALL_PLAN_TOML.lines().count() + 1), "{e}");

    let e = err("planes = 2\n");
    assert_eq!((e.line, e.field.as_deref()), (None, None), "{e}");
    assert!(
        e.message
            .starts_with("missing field `t0_per_plane`: add it"),
        "{e}"
    );

    let e = err(&SMALL_PLAN_TOML.replace(
        "latency_ns = 500\n\n[links.fabric]",
        "latency_ns = \"soon\"\n\n[links.fabric]",
    ));
    assert_eq!(e.field.as_deref(), Some("links.host.latency_ns"), "{e}");
    assert!(e.message.contains("invalid type"), "{e}");
    let e = err(&with("planes", "\"two\""));
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(line_of("planes")), Some("planes")),
        "{e}"
    );

    let e = err(&SMALL_PLAN_TOML.replace(
        "speed_gbps = 100\nlatency_ns = 500\n\n[links.fabric]",
        "speed_gbps = 0\nlatency_ns = 500\n\n[links.fabric]",
    ));
    assert_eq!(e.field.as_deref(), Some("links.host.speed_gbps"));

    // A latency the simulator's picosecond clock cannot hold is refused, not wrapped.
    let e = err(&SMALL_PLAN_TOML.replace(
        "latency_ns = 500\n\n[links.fabric]",
        "latency_ns = 9223372036854775807\n\n[links.fabric]",
    ));
    assert_eq!(e.field.as_deref(), Some("links.host.latency_ns"), "{e}");
    assert!(e.message.contains("use 0 to 1000000000 (1 s)"), "{e}");

    let bad_ecn = format!("{SMALL_PLAN_TOML}ecn_min_bytes = 10\necn_max_bytes = 5\n");
    let e = err(&bad_ecn);
    assert_eq!(e.field.as_deref(), Some("links.fabric.ecn_min_bytes"));
    assert_eq!(e.line, Some(bad_ecn.lines().count() - 1));

    let e = Plan::load_or_builtin("no/such/plan.toml").unwrap_err();
    assert!(e.message.contains("built-ins: small"), "{e}");
}

#[test]
fn linux_config_is_deterministic_and_complete() {
    let p = small();
    let cfg = p.linux_config("t").unwrap();
    assert_eq!(cfg, p.linux_config("t").unwrap());
    assert_eq!(cfg.matches("ip netns add ").count(), 12);
    // 4 hosts x 2 ports + 2 planes x 2 T0 x 2 T1 = 16 veth pairs.
    assert_eq!(cfg.matches(" type veth peer name ").count(), 16);
    assert!(cfg.contains(
        "route replace fcbb:bb00:1000::/48 encap seg6local action End flavors next-csid lblen 32 nflen 16 dev sr0"
    ));
    assert!(cfg.contains("route replace fcbb:bb00:2001::/48 via fe80::2 dev u1"));
    assert!(cfg.contains(
        "route replace fcbb:bb00:8003::/48 encap seg6local action End.DT6 table local dev sr0"
    ));
    assert!(cfg.contains(
        "ip -n t-h0 link add p0 address 02:00:00:00:00:00 mtu 3000 type veth peer name d0"
    ));
    assert!(cfg.contains("addr add fd00:6d72:6300::1/128 dev lo"));
    assert!(
        !cfg.lines()
            .any(|l| l.contains("seg6local") && l.ends_with("dev lo")),
        "seg6local on lo becomes a reject route"
    );
    let teardown = p.linux_teardown("t").unwrap();
    assert_eq!(teardown.matches("ip netns del t-").count(), 12);
    let routes = p.linux_routes("t").unwrap();
    assert!(routes.contains("ip -n t-t1-1-0 -force -b - <<'EOF' || true"));
    assert!(!routes.contains("link add"));
    assert_eq!(
        p.linux_config("bad name"),
        Err(LinuxError::BadPrefix("bad name".into()))
    );
    let max = Plan::from_toml(MAX, "max.toml").unwrap();
    assert!(matches!(
        max.linux_config("m"),
        Err(LinuxError::TooLarge { .. })
    ));
}

#[test]
fn linux_config_splits_at_the_host_links() {
    let p = small();
    let hosts = LinuxPart::Hosts {
        attach: "br".into(),
    };
    let switches = LinuxPart::Switches { attach: "b".into() };
    let h = p.linux_config_part("t", &hosts).unwrap();
    assert_eq!(h.matches("ip netns add ").count(), 4);
    assert!(
        !h.contains("seg6local") && !h.contains("sr0"),
        "a hosts' side needs no kernel SRv6:\n{h}"
    );
    assert!(!h.contains("t-t0-"), "no switch on the hosts' side:\n{h}");
    // Host 1's port 1 is link 3: its far end hl3 on br3.
    assert!(h.contains(
        "ip link add hl3 mtu 3000 type veth peer name p1 address 02:00:00:01:00:01 mtu 3000 netns t-h1\n\
         ip link set hl3 master br3 up\n"
    ));
    assert_eq!(h.matches(" type veth peer name ").count(), 8);
    assert!(h.contains("route replace fcbb:bb00:1000::/48 via fe80::2 dev p0"));

    let s = p.linux_config_part("t", &switches).unwrap();
    assert_eq!(s.matches("ip netns add ").count(), 8);
    assert!(!s.contains("t-h"), "no host on the switches' side:\n{s}");
    // 8 cut host links + 8 fabric links.
    assert_eq!(s.matches(" type veth peer name ").count(), 16);
    let t0 = NodeId::Switch(SwitchId::t0(1, 0));
    assert!(s.contains(&format!(
        "ip link add hl3 mtu 3000 type veth peer name d1 address {} mtu 3000 netns t-t0-1-0\n",
        mac_of(&p, t0, 1)
    )));
    assert!(s.contains("encap seg6local action End flavors next-csid"));
    assert!(!s.contains("End.DT6"));

    // Each side tears down its own namespaces; every namespace is on exactly one side.
    let down = |part| p.linux_teardown_part("t", part).unwrap();
    assert_eq!(down(&hosts).matches("ip netns del t-h").count(), 4);
    assert_eq!(down(&switches).matches("ip netns del t-t").count(), 8);
    assert_eq!(
        p.linux_routes_part("t", &switches)
            .unwrap()
            .matches("ip -n ")
            .count(),
        8
    );
    assert_eq!(
        p.linux_config_part(
            "t",
            &LinuxPart::Hosts {
                attach: "b r".into()
            }
        ),
        Err(LinuxError::BadAttach("b r".into()))
    );
}

fn mac_of(p: &Plan, node: NodeId, port: u16) -> String {
    p.mac(node, port)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

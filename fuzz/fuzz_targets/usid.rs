#![no_main]
//! uSID containers (RFC 9800) and the plan's switch lookup never panic on a destination address
//! from a peer; shifting keeps the block, consumes one uSID per step and ends.
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mrc_srv6::plan::{Plan, SwitchId};
use mrc_srv6::wire::{UsidContainer, UsidFormat};

fn plan() -> &'static Plan {
    static PLAN: OnceLock<Plan> = OnceLock::new();
    PLAN.get_or_init(|| Plan::builtin("small").expect("built-in plan"))
}

fuzz_target!(|data: &[u8]| {
    let Some((addr, rest)) = data.split_first_chunk::<16>() else {
        return;
    };
    let addr = std::net::Ipv6Addr::from(*addr);
    let format = match rest {
        [b, n, ..] => UsidFormat::new(*b, *n).unwrap_or_default(),
        _ => UsidFormat::F3216,
    };
    let mut c = UsidContainer::from_addr(format, addr);
    let block = c.block();
    // Each shift moves the argument up one uSID, so the container is exhausted within
    // `capacity` shifts whatever the peer wrote.
    for _ in 0..format.capacity() {
        let second = c.remaining().nth(1);
        if !c.shift() {
            break;
        }
        assert_eq!(c.block(), block);
        if let Some(second) = second {
            assert_eq!(c.active(), Some(second), "the next uSID becomes active");
        }
    }
    assert!(c.is_exhausted());
    let _ = c.to_string();

    let p = plan();
    let pick = rest.get(2).copied().unwrap_or(0);
    let switch = p
        .switches()
        .nth(usize::from(pick) % p.switch_count() as usize);
    let switch = switch.unwrap_or(SwitchId::t0(0, 0));
    std::hint::black_box(p.lookup(switch, addr));
    std::hint::black_box(p.trace(switch, addr));
});

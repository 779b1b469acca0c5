//! What a trimming switch does to a data frame (brief §2.15, SONiC/Cumulus trimming): keep the
//! first `trim_size` bytes, rewrite the outer DSCP to a trimmed code point (ECN kept), and fix
//! the outer IPv6 payload length so the next hop still accepts the packet. The inner IPv6 and
//! UDP lengths are left alone (a switch forwards on the outer header only); the parser bounds
//! them by what survived.

use mrc_srv6::wire::{ETHERNET_HEADER_LEN, IPV6_HEADER_LEN, Ipv6Packet};

use super::super::config::{Trimmed, WireConfig};
use super::super::{Result, check_len};

/// Trim `frame` in place as a switch would; returns its new length (at most `frame.len()`).
pub fn trim_frame(frame: &mut [u8], cfg: &WireConfig, at: Trimmed) -> Result<usize> {
    check_len(
        frame,
        ETHERNET_HEADER_LEN + IPV6_HEADER_LEN,
        "Ethernet + IPv6 header",
    )?;
    let len = frame
        .len()
        .min(usize::from(cfg.trim_size))
        .max(ETHERNET_HEADER_LEN + IPV6_HEADER_LEN);
    let mut ip = Ipv6Packet::new_checked(&mut frame[ETHERNET_HEADER_LEN..len])?;
    ip.set_dscp(match at {
        Trimmed::InFabric => cfg.dscp.trimmed,
        Trimmed::LastHop => cfg.dscp.trimmed_last_hop,
    });
    let payload = (len - ETHERNET_HEADER_LEN - IPV6_HEADER_LEN) as u16;
    if ip.payload_len() > payload {
        ip.set_payload_len(payload);
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use mrc_srv6::wire::{Dscp, Ecn};

    use super::super::super::{Body, WireError};
    use super::super::parse_frame;
    use super::*;

    #[test]
    fn trimmed_frames_keep_ecn_fix_the_outer_length_and_still_parse() {
        let cfg = WireConfig::default();
        let mut b = super::super::tests::srv6_write_frame(2000);
        let n = trim_frame(&mut b, &cfg, Trimmed::LastHop).unwrap();
        assert_eq!(n, 256);
        let f = parse_frame(&b[..n], &cfg).unwrap();
        assert_eq!(f.trimmed, Some(Trimmed::LastHop));
        assert_eq!(f.dscp(), Dscp(16));
        assert_eq!(f.ecn(), Ecn::Ect0);
        assert_eq!(usize::from(f.outer.payload_len), 256 - 14 - 40);
        assert!(matches!(f.body, Some(Body::Write(_))));
        // Short frames keep their length; garbage is a typed error.
        let mut short = super::super::tests::srv6_write_frame(4);
        let len = short.len();
        assert_eq!(trim_frame(&mut short, &cfg, Trimmed::InFabric), Ok(len));
        assert!(matches!(
            trim_frame(&mut [0u8; 10], &cfg, Trimmed::InFabric),
            Err(WireError::Truncated { .. })
        ));
    }
}

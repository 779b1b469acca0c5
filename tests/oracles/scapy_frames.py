# Builds MRC frames with scapy, header bytes packed by hand from the layout tables of
# docs/mrc-brief.md section 2 (independently of mrc-rs's emitter), ICRC computed with zlib over
# the masked bytes (IBTA Annex A17, inner IPv6 header onwards in SRv6 mode).
# Prints one frame per line: "<hex> key=value key=value ...". Run with Debian's /usr/bin/python3.
import ipaddress
import struct
import zlib

from scapy.all import Ether, IPv6, IPv6ExtHdrSegmentRouting, UDP, Raw, raw

SRC = "fcbb:bb00:e000::"
DST = "fcbb:bb00:e001::"
PATH = "fcbb:bb00:1000:2001:1001:e001::"
SEG = "fcbb:bb00:2002:1003::"


def bth(op, qpn, psn, ackreq=1, rtx=0, ts=0, pad=0):
    return struct.pack("!BBHB", op, pad << 4, 0xFFFF, 0) + struct.pack("!I", qpn)[1:] + \
        struct.pack("!B", (ackreq << 7) | (rtx << 6) | (ts << 5)) + struct.pack("!I", psn)[1:]


def icrc(ip6_udp_onwards):
    b = bytearray(ip6_udp_onwards)
    b[0] |= 0x0F
    b[1:4] = b"\xff\xff\xff"
    b[7] = 0xFF
    b[46:48] = b"\xff\xff"
    b[52] = 0xFF
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(b)) & 0xFFFFFFFF)


def frame(transport, ev_sport, ev_label, dscp, srv6=True, srh=False, trim=None):
    """transport = BTH and everything after it, without ICRC."""
    tc = dscp << 2
    inner_or_only = IPv6(src=SRC, dst=DST, tc=tc, fl=ev_label, hlim=64) / \
        UDP(sport=ev_sport, dport=4791, chksum=0) / Raw(transport + b"\0\0\0\0")
    covered = raw(inner_or_only)
    whole = covered[:-4] + icrc(covered[:-4])
    if srv6:
        outer = IPv6(src=SRC, dst=PATH, tc=tc, fl=ev_label, hlim=64)
        if srh:
            outer = outer / IPv6ExtHdrSegmentRouting(addresses=[SEG], segleft=1, lastentry=0, nh=41)
        else:
            outer.nh = 41
        pkt = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / outer / Raw(whole)
    else:
        pkt = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x86DD) / Raw(whole)
    b = bytearray(raw(pkt))
    if trim is not None:
        b = b[:trim[0]]
        b[14] = 0x60 | (trim[1] >> 2)
        b[15] = (b[15] & 0x3F) | ((trim[1] & 0x3) << 6)
    return bytes(b)


def emit(b, **kv):
    print(b.hex() + " " + " ".join(f"{k}={v}" for k, v in kv.items()))


def ev(sport, label):
    return (label << 16) | sport  # default order: EV[15:0] = sport, EV[31:16] = flow label


# 1. SRv6 + SRH, WRITE_ONLY_IMM with TSETH and ImmDt, 33-byte payload (pad 3).
payload = bytes(range(33))
t = bth(0xCB, 0x000123, 0x00ABCD, ts=1, pad=3) + struct.pack("!HH", 7, 8) + \
    struct.pack("!HH", 0x1234, 0x0001) + struct.pack("!QII", 0x7F0000001000, 0xBEEF, 33) + \
    struct.pack("!I", 0xCAFE0001) + payload + b"\0\0\0"
emit(frame(t, 0x0005, 0x00042, 4, srh=True), opcode=0xCB, qpn=0x123, psn=0xABCD, ev=ev(5, 0x42),
     dscp=4, srh_sl=1, srh_seg=SEG, outer_dst=PATH, dst=DST, rqmsn=7, msn=8, tseth=0x1234,
     va=0x7F0000001000, rkey=0xBEEF, dmalen=33, imm=0xCAFE0001, payload=33, trimmed="no")

# 2. SRv6 without SRH, SACK: M=ALWAYS_SKIP, PR=1, cack 1000, offset -1, bitmap, CC_STATE.
seth = struct.pack("!HhIHHB", (2 << 5) | 1, 3, ev(9, 0x1), 11, 12, 0) + struct.pack("!I", 1000)[1:] + \
    struct.pack("!BBhQ", (1 << 4) | 2, 4, -1, 0x8000000000000003)
cc = struct.pack("!HHB", 0x0102, 5, 0x80 | 9) + struct.pack("!I", 0x0A0B0C)[1:]
emit(frame(bth(0xDC, 0x77, 1000) + seth + cc, 9, 0x1, 46), opcode=0xDC, qpn=0x77, psn=1000,
     ev=ev(9, 1), dscp=46, outer_dst=PATH, dst=DST, verdict="ALWAYS_SKIP", pr=1, cack=1000,
     ack_psn=1003, bitmap=0x8000000000000003, bitmap_base=999, spdcid=11, dpdcid=12, mpr=4,
     cc_ts=0x0102, ooo=5, pen=9, restore=1, rcvd=0x0A0B0C, trimmed="no")

# 3. ECMP NACK TRIMMED.
neth = struct.pack("!HBBIHHB", 0, 0x01, 0, 0xDEADBEEF, 1, 2, 0) + struct.pack("!I", 0x123456)[1:] + \
    struct.pack("!BBH", 0, 0, 0x0708)
emit(frame(bth(0xDD, 0x99, 5) + neth, 0xC001, 0xFFFF, 46, srv6=False), opcode=0xDD, qpn=0x99, psn=5,
     ev=ev(0xC001, 0xFFFF), dscp=46, dst=DST, reason="TRIMMED", nack_psn=0x123456,
     nack_ev=0xDEADBEEF, nack_ts=0x0708, trimmed="no")

# 4. ECMP ACK, PROBE, endpoint request/response.
emit(frame(bth(0xD1, 0x99, 6) + struct.pack("!B", 0x1F) + struct.pack("!I", 77)[1:], 1, 2, 46,
           srv6=False), opcode=0xD1, qpn=0x99, psn=6, dst=DST, syndrome=0x1F, aeth_msn=77, trimmed="no")
emit(frame(bth(0xDE, 0x99, 7) + struct.pack("!HBBHHHHHH", 0, 0, 0, 321, 0, 1, 2, 0x1111, 1), 3, 4, 4,
           srv6=False), opcode=0xDE, qpn=0x99, psn=7, dst=DST, probe_id=321, trimmed="no")
emit(frame(bth(0xD8, 0x2, 0xBEEF) + struct.pack("!B3xI4xHH", 1 << 6, 0xFD, 0x2222, 1), 3, 4, 4,
           srv6=False), opcode=0xD8, qpn=2, psn=0xBEEF, dst=DST, ep_op="EV_PROBE", ports=0xFD,
     trimmed="no")
emit(frame(bth(0xD9, 0x2, 0xBEEF) + struct.pack("!B3xIHHI20x", 0, 0x0F, 0x2222, 1, 500), 3, 4, 46,
           srv6=False), opcode=0xD9, qpn=2, psn=0xBEEF, dst=DST, ep_op="PORT_STATUS_UPDATE",
     ports=0x0F, svc=500, trimmed="no")

# 5. A 4000-byte WRITE_MIDDLE trimmed to 256 bytes in the fabric (DSCP 12), and one cut after
#    the BTH at the last hop (DSCP 16): PSN, QPN and EV survive.
t = bth(0xC7, 0x123, 0x10000) + struct.pack("!HH", 0, 8) + struct.pack("!QII", 0x2000, 0xBEEF, 8192) + \
    bytes(4000)
emit(frame(t, 17, 3, 4, trim=(256, 12)), opcode=0xC7, qpn=0x123, psn=0x10000, ev=ev(17, 3),
     trimmed="InFabric", msn=8, va=0x2000)
emit(frame(t, 17, 3, 4, trim=(14 + 80 + 8 + 12, 16)), opcode=0xC7, qpn=0x123, psn=0x10000,
     ev=ev(17, 3), trimmed="LastHop", body="none")

# 6. The first frame with one payload byte flipped: bad ICRC.
b = bytearray(frame(bth(0xCA, 1, 1) + struct.pack("!HH", 0, 1) + struct.pack("!QII", 0, 1, 4) +
                    b"abcd", 1, 1, 4))
b[-6] ^= 1
emit(bytes(b), error="BadIcrc")

// SPDX-License-Identifier: (Apache-2.0 OR MIT) AND GPL-2.0-only
//
// Packet trimming where the Linux kernel has none (docs/interop.md): a tc cls_bpf program in
// direct-action mode on a switch port's egress. Every TRIM_EVERY-th MRC data frame of the
// trimmable class leaves cut to TRIM_SIZE bytes with its outer DSCP rewritten to the trimmed
// code point, as a trimming switch does (brief §2.15, transport/src/wire/frame/trim.rs):
//
//   Ethernet | outer IPv6 (DA = uSID path) | inner IPv6 | UDP 4791 | BTH | METH | RETH | ...
//
// - only SRv6 frames (outer next header 41, inner UDP to TRIM_PORT) whose outer DSCP is
//   MATCH_DSCP (PROTOCOL.md: data, trimmable = 4) and that are longer than TRIM_SIZE;
// - the first TRIM_SIZE bytes stay (PROTOCOL.md: 256 keeps every header up to RETH);
// - the outer DSCP becomes TRIM_DSCP (PROTOCOL.md: trimmed = 12), ECN kept;
// - the outer payload length is fixed so the next kernel hop accepts the packet; the inner
//   lengths are left alone (a switch forwards on the outer header only).
//
// The tail is cut with bpf_skb_change_tail, which refuses an skb the kernel marked
// encapsulated: what the kernel's own SRv6 encapsulation sends (a kernel UDP socket behind an
// `encap seg6` route; in a namespace fabric the mark crosses every veth). Those lose the bytes
// after the kept headers another way: the kept bytes past the outer IPv6 header are saved,
// bpf_skb_adjust_room removes (length - TRIM_SIZE) bytes right after the outer header, and the
// saved bytes are written back, so the frame is again its first TRIM_SIZE bytes. (A checksum the
// kernel left to the device stays pending on the trimmed frame; no veth computes it.)
//
// Counters in the array map mrc_trim_st: [0] frames that matched, [1] frames trimmed, [2] frames
// that matched and could not be trimmed (dropped).
// Parameters are compile-time (-DTRIM_EVERY=8 ...): deterministic and nothing to configure
// after attaching. Build: clang -O2 -g -target bpf -c trim.bpf.c -o trim.bpf.o
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef TRIM_EVERY
#define TRIM_EVERY 8
#endif
#ifndef TRIM_SIZE
#define TRIM_SIZE 256
#endif
#ifndef TRIM_DSCP
#define TRIM_DSCP 12
#endif
#ifndef MATCH_DSCP
#define MATCH_DSCP 4
#endif
#ifndef TRIM_PORT
#define TRIM_PORT 4791
#endif

#define IPPROTO_IPV6_IN_IPV6 41
#define STAT_MATCHED 0
#define STAT_TRIMMED 1
#define STAT_FAILED 2

/* Bytes kept after the outer IPv6 header: saved on the stack by the second way of cutting. */
#define KEEP_INNER (TRIM_SIZE - (int)sizeof(struct ethhdr) - (int)sizeof(struct ipv6hdr))
#if TRIM_SIZE - 54 > 384 || TRIM_SIZE - 54 < 48
#error "TRIM_SIZE must keep the inner IPv6 and UDP headers and fit the BPF stack (102..438)"
#endif

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} mrc_trim_st SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&mrc_trim_st, &which);

	if (v)
		__sync_fetch_and_add(v, 1);
}

/* Ethernet | outer IPv6 | inner IPv6 | UDP: what must be in the linear part to be read. */
#define HEADERS (sizeof(struct ethhdr) + 2 * sizeof(struct ipv6hdr) + sizeof(struct udphdr))

/* Cut the frame to its first TRIM_SIZE bytes (see the top of the file). */
static __always_inline int cut(struct __sk_buff *skb)
{
	__u8 keep[KEEP_INNER];
	const __u32 after_outer = sizeof(struct ethhdr) + sizeof(struct ipv6hdr);
	__s32 drop = (__s32)skb->len - TRIM_SIZE;

	if (!bpf_skb_change_tail(skb, TRIM_SIZE, 0))
		return 0;
	// An encapsulated skb: remove the bytes from the middle, then put the kept ones back.
	if (drop <= 0 || drop > 0xfff)
		return -1;
	if (bpf_skb_load_bytes(skb, after_outer, keep, sizeof(keep)) ||
	    bpf_skb_adjust_room(skb, -drop, BPF_ADJ_ROOM_NET, 0) ||
	    bpf_skb_store_bytes(skb, after_outer, keep, sizeof(keep), 0))
		return -1;
	return skb->len == TRIM_SIZE ? 0 : -1;
}

SEC("tc")
int mrc_trim(struct __sk_buff *skb)
{
	void *data, *end;
	struct ethhdr *eth;
	struct ipv6hdr *outer, *inner;
	struct udphdr *udp;
	__u8 tclass, dscp, head[4];
	__u16 plen;
	__u32 key = STAT_MATCHED;
	__u64 *matched;

	if (skb->protocol != bpf_htons(ETH_P_IPV6) || skb->len <= TRIM_SIZE)
		return TC_ACT_OK;
	// A frame sent from a packet socket's TX ring (DPDK af_packet) keeps its payload in page
	// fragments: pull the headers into the linear part before reading them.
	if (bpf_skb_pull_data(skb, HEADERS))
		return TC_ACT_OK;
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	eth = data;
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return TC_ACT_OK;
	outer = (void *)(eth + 1);
	if ((void *)(outer + 1) > end || outer->nexthdr != IPPROTO_IPV6_IN_IPV6)
		return TC_ACT_OK;
	inner = (void *)(outer + 1);
	if ((void *)(inner + 1) > end || inner->nexthdr != IPPROTO_UDP)
		return TC_ACT_OK;
	udp = (void *)(inner + 1);
	if ((void *)(udp + 1) > end || udp->dest != bpf_htons(TRIM_PORT))
		return TC_ACT_OK;
	// Traffic class: priority (4 bits) then the top 4 bits of flow_lbl[0]; DSCP its top 6.
	tclass = (outer->priority << 4) | (outer->flow_lbl[0] >> 4);
	dscp = tclass >> 2;
	if (dscp != MATCH_DSCP)
		return TC_ACT_OK;
	matched = bpf_map_lookup_elem(&mrc_trim_st, &key);
	if (!matched || __sync_fetch_and_add(matched, 1) % TRIM_EVERY != TRIM_EVERY - 1)
		return TC_ACT_OK;

	// The first IPv6 word with the new DSCP (ECN kept), and the new payload length.
	tclass = (TRIM_DSCP << 2) | (tclass & 3);
	head[0] = 0x60 | (tclass >> 4);
	head[1] = ((tclass & 0xf) << 4) | (outer->flow_lbl[0] & 0xf);
	head[2] = outer->flow_lbl[1];
	head[3] = outer->flow_lbl[2];
	plen = bpf_htons(TRIM_SIZE - sizeof(struct ethhdr) - sizeof(struct ipv6hdr));
	if (cut(skb) ||
	    bpf_skb_store_bytes(skb, sizeof(struct ethhdr), head, sizeof(head), 0) ||
	    bpf_skb_store_bytes(skb, sizeof(struct ethhdr) + 4, &plen, sizeof(plen), 0)) {
		count(STAT_FAILED);
		return TC_ACT_SHOT;
	}
	count(STAT_TRIMMED);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";

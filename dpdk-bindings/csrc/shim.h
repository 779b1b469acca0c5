/* Hand-written helpers for what bindgen cannot wrap: DPDK *macros*. Everything `static inline`
 * is wrapped by bindgen's wrap_static_fns instead (see build.rs). */
#ifndef MRC_DPDK_SHIM_H
#define MRC_DPDK_SHIM_H

#include <stdint.h>

struct rte_mbuf;

/* `rte_errno`: expands to the per-lcore thread-local `per_lcore__rte_errno`. */
int mrc_shim_errno(void);

/* `rte_pktmbuf_mtod(m, void *)`: the start of the data in the first segment. */
void *mrc_shim_mtod(struct rte_mbuf *m);

/* `rte_pktmbuf_pkt_len(m)` / `rte_pktmbuf_data_len(m)`: total and first-segment lengths.
 * Only used to check the Rust accessors against DPDK's own definitions. */
uint32_t mrc_shim_pkt_len(const struct rte_mbuf *m);
uint16_t mrc_shim_data_len(const struct rte_mbuf *m);

/* `rte_eth_dev_stop` / `rte_eth_dev_close`, but for a memif port run on EAL's interrupt thread
 * (and waited for), so they never overlap memif's own teardown there: when the peer leaves,
 * memif's control-channel handler (on that thread) marks the link down, then frees the shared
 * regions; a stop or close from another thread in between frees them twice (DPDK 22.11's
 * memif_disconnect takes no lock; "EAL: Error: Invalid memory"). Any other port: a direct
 * call. Returns what the DPDK call returned (or the negative errno of a failed alarm). */
int mrc_shim_dev_stop(uint16_t port_id);
int mrc_shim_dev_close(uint16_t port_id);

#endif

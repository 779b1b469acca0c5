/* See shim.h. Compiled by build.rs with the full `pkg-config --cflags libdpdk`. */
#include <rte_errno.h>
#include <rte_mbuf.h>

#include "shim.h"

int mrc_shim_errno(void) { return rte_errno; }

void *mrc_shim_mtod(struct rte_mbuf *m) { return rte_pktmbuf_mtod(m, void *); }

uint32_t mrc_shim_pkt_len(const struct rte_mbuf *m) { return rte_pktmbuf_pkt_len(m); }

uint16_t mrc_shim_data_len(const struct rte_mbuf *m) { return rte_pktmbuf_data_len(m); }

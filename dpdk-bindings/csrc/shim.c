/* See shim.h. Compiled by build.rs with the full `pkg-config --cflags libdpdk`. */
#include <string.h>
#include <unistd.h>

#include <rte_alarm.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "shim.h"

int mrc_shim_errno(void) { return rte_errno; }

void *mrc_shim_mtod(struct rte_mbuf *m) { return rte_pktmbuf_mtod(m, void *); }

uint32_t mrc_shim_pkt_len(const struct rte_mbuf *m) { return rte_pktmbuf_pkt_len(m); }

uint16_t mrc_shim_data_len(const struct rte_mbuf *m) { return rte_pktmbuf_data_len(m); }

/* One call handed to the interrupt thread. */
struct intr_call {
	int (*op)(uint16_t);
	uint16_t port_id;
	int ret;
	int done;
};

/* An alarm callback: EAL runs alarms on its interrupt thread, one callback at a time, the
 * same thread (and so never alongside) the interrupt handlers of the PMDs, memif's
 * control-channel handler among them. */
static void intr_call_run(void *arg)
{
	struct intr_call *c = arg;

	c->ret = c->op(c->port_id);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
}

static int is_memif(uint16_t port_id)
{
	struct rte_eth_dev_info info;

	if (rte_eth_dev_info_get(port_id, &info) != 0 || info.driver_name == NULL)
		return 0;
	return strcmp(info.driver_name, "net_memif") == 0;
}

static int on_intr_thread(int (*op)(uint16_t), uint16_t port_id)
{
	struct intr_call c = { op, port_id, 0, 0 };
	int ret;

	if (!is_memif(port_id))
		return op(port_id);
	ret = rte_eal_alarm_set(1, intr_call_run, &c);
	if (ret != 0)
		return ret;
	/* `c` lives on this stack until the callback said it is done with it. */
	while (!__atomic_load_n(&c.done, __ATOMIC_ACQUIRE))
		usleep(20);
	return c.ret;
}

int mrc_shim_dev_stop(uint16_t port_id) { return on_intr_thread(rte_eth_dev_stop, port_id); }

int mrc_shim_dev_close(uint16_t port_id) { return on_intr_thread(rte_eth_dev_close, port_id); }

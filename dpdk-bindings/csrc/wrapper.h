/* The DPDK headers mrc-dpdk binds (bindgen input; also included by the generated static-function
 * wrappers). Keep this list short: the allowlist in build.rs decides what reaches Rust. */
#ifndef MRC_DPDK_WRAPPER_H
#define MRC_DPDK_WRAPPER_H

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_ethdev.h>

#include "shim.h"

#endif

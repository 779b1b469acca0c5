/*
 * Moves data between two QPs through libmrc.so: two NICs of one process on an in-memory
 * fabric of two planes, QPs connected INIT -> RTR -> RTS, a multi-packet RDMA Write and a
 * Write-with-Immediate each way, every byte checked, then the same with one plane of the
 * sender down (MRC sends on the other). Exit status 0 when everything matched.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mrc.h"

#define LEN (256 * 1024)
#define IOVA 0x10000000ULL

#define CHECK(cond, what)                                                          \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "mrc_write: %s failed: %s\n", what, mrc_last_error()); \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

struct side {
    struct mrc_context *ctx;
    struct mrc_pd *pd;
    struct mrc_cq *cq;
    struct mrc_mr *mr;
    struct mrc_mr_attr mr_attr;
    struct mrc_qp *qp;
    uint8_t gid[16];
};

static void open_side(struct mrc_fabric *fabric, uint32_t host, struct side *s) {
    s->ctx = mrc_create_context(fabric, host);
    CHECK(s->ctx, "mrc_create_context");
    CHECK(mrc_query_gid(s->ctx, s->gid) == MRC_OK, "mrc_query_gid");
    s->pd = mrc_alloc_pd(s->ctx);
    CHECK(s->pd, "mrc_alloc_pd");
    s->cq = mrc_create_cq(s->ctx, 256);
    CHECK(s->cq, "mrc_create_cq");
    s->mr = mrc_alloc_mr(s->pd, IOVA, 2 * LEN, MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE);
    CHECK(s->mr, "mrc_alloc_mr");
    CHECK(mrc_query_mr(s->mr, &s->mr_attr) == MRC_OK, "mrc_query_mr");
    struct mrc_qp_init_attr init = {
        .send_cq = s->cq,
        .recv_cq = s->cq,
        .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 2},
        .sq_sig_all = 0,
    };
    s->qp = mrc_create_qp(s->pd, &init);
    CHECK(s->qp, "mrc_create_qp");
}

/* The out-of-band exchange, here a function call: INIT -> RTR -> RTS towards the peer. */
static void connect(struct side *s, const struct side *peer) {
    struct mrc_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = MRC_QPS_INIT;
    CHECK(mrc_modify_qp(s->qp, &a, MRC_QP_STATE) == MRC_OK, "modify INIT");
    a.qp_state = MRC_QPS_RTR;
    memcpy(a.dest_gid, peer->gid, 16);
    a.dest_qp_num = mrc_get_qpn(peer->qp);
    a.rq_psn = 7;
    a.dynamic_mpr = 1; /* both ends have the capability: on at RTR and at RTS */
    CHECK(mrc_modify_qp(s->qp, &a,
                        MRC_QP_STATE | MRC_QP_AV | MRC_QP_DEST_QPN | MRC_QP_RQ_PSN |
                            MRC_QP_DYNAMIC_MPR) == MRC_OK,
          "modify RTR");
    a.qp_state = MRC_QPS_RTS;
    a.sq_psn = 7;
    CHECK(mrc_modify_qp(s->qp, &a, MRC_QP_STATE | MRC_QP_SQ_PSN | MRC_QP_DYNAMIC_MPR) == MRC_OK,
          "modify RTS");
}

static struct mrc_wc wait_one(struct side *s) {
    struct mrc_wc wc;
    for (long spins = 0; spins < 2000000000L; spins++) {
        int n = mrc_poll_cq(s->cq, 1, &wc);
        CHECK(n >= 0, "mrc_poll_cq");
        if (n == 1) {
            if (wc.status != MRC_WC_SUCCESS) {
                fprintf(stderr, "mrc_write: completion status %d\n", wc.status);
                exit(1);
            }
            return wc;
        }
    }
    fprintf(stderr, "mrc_write: no completion\n");
    exit(1);
}

static uint8_t pattern(int round, size_t i) { return (uint8_t)(i * 131 + round * 17 + (i >> 9)); }

/* `from` writes LEN bytes into the upper half of `to`'s region, the last part with an
 * immediate; `to` checks them. */
static void transfer(struct side *from, struct side *to, int round) {
    uint8_t *buf = malloc(LEN);
    CHECK(buf, "malloc");
    for (size_t i = 0; i < LEN; i++) buf[i] = pattern(round, i);
    CHECK(mrc_mr_write(from->mr, 0, buf, LEN) == MRC_OK, "mrc_mr_write");

    struct mrc_recv_wr rwr = {.wr_id = 1000 + round, .next = NULL};
    struct mrc_recv_wr *bad_r = NULL;
    CHECK(mrc_post_recv(to->qp, &rwr, &bad_r) == MRC_OK, "mrc_post_recv");

    /* A Write of the first 3/4 (two gather entries), then a Write-with-Immediate of the rest. */
    size_t a = LEN / 2, b = LEN / 4, c = LEN - a - b;
    struct mrc_sge sge1[2] = {
        {.addr = IOVA, .length = (uint32_t)a, .lkey = from->mr_attr.lkey},
        {.addr = IOVA + a, .length = (uint32_t)b, .lkey = from->mr_attr.lkey},
    };
    struct mrc_sge sge2 = {.addr = IOVA + a + b, .length = (uint32_t)c, .lkey = from->mr_attr.lkey};
    struct mrc_send_wr imm = {
        .wr_id = 2,
        .next = NULL,
        .sg_list = &sge2,
        .num_sge = 1,
        .opcode = MRC_WR_RDMA_WRITE_WITH_IMM,
        .send_flags = MRC_SEND_SIGNALED,
        .imm_data = 0xc0ffee00u + (uint32_t)round,
        .remote_addr = to->mr_attr.iova + LEN + a + b,
        .rkey = to->mr_attr.rkey,
    };
    struct mrc_send_wr write = {
        .wr_id = 1,
        .next = &imm,
        .sg_list = sge1,
        .num_sge = 2,
        .opcode = MRC_WR_RDMA_WRITE,
        .send_flags = MRC_SEND_SIGNALED,
        .remote_addr = to->mr_attr.iova + LEN,
        .rkey = to->mr_attr.rkey,
    };
    struct mrc_send_wr *bad = NULL;
    CHECK(mrc_post_send(from->qp, &write, &bad) == MRC_OK, "mrc_post_send");

    struct mrc_wc w1 = wait_one(from), w2 = wait_one(from);
    CHECK(w1.wr_id == 1 && w2.wr_id == 2 && w1.opcode == MRC_WC_RDMA_WRITE, "send completions");
    struct mrc_wc r = wait_one(to);
    CHECK(r.opcode == MRC_WC_RECV_RDMA_WITH_IMM && (r.wc_flags & MRC_WC_WITH_IMM) &&
              r.imm_data == 0xc0ffee00u + (uint32_t)round && r.wr_id == (uint64_t)(1000 + round) &&
              r.byte_len == c,
          "receive completion");

    uint8_t *got = malloc(LEN);
    CHECK(got, "malloc");
    CHECK(mrc_mr_read(to->mr, LEN, got, LEN) == MRC_OK, "mrc_mr_read");
    for (size_t i = 0; i < LEN; i++) {
        if (got[i] != buf[i]) {
            fprintf(stderr, "mrc_write: round %d byte %zu: got %u want %u\n", round, i, got[i], buf[i]);
            exit(1);
        }
    }
    free(got);
    free(buf);
}

int main(void) {
    struct mrc_fabric *fabric = mrc_create_mem_fabric(2, 2);
    CHECK(fabric, "mrc_create_mem_fabric");
    struct side a, b;
    open_side(fabric, 0, &a);
    open_side(fabric, 1, &b);
    connect(&a, &b);
    connect(&b, &a);

    /* Misuse is an error code, not a crash. */
    CHECK(mrc_post_send(NULL, NULL, NULL) == MRC_EINVAL, "NULL QP refused");
    CHECK(mrc_mr_write(a.mr, 2 * LEN, "x", 1) == MRC_ERANGE, "write past the region refused");

    transfer(&a, &b, 1);
    /* Host 0's responder shrinks its MPR to one unit of 128 PSNs (the API path; the engine
     * tests check the window the requester then keeps). */
    CHECK(mrc_set_qp_mpr(a.qp, 128) == MRC_OK, "mrc_set_qp_mpr");
    CHECK(mrc_set_qp_mpr(a.qp, 64) == MRC_EINVAL, "an MPR below 128 PSNs refused");
    transfer(&b, &a, 2);
    /* Plane 0 of host 0 goes down: the engine resends on plane 1. */
    CHECK(mrc_fabric_set_link(fabric, 0, 0, 0) == MRC_OK, "mrc_fabric_set_link");
    transfer(&a, &b, 3);
    transfer(&b, &a, 4);

    CHECK(mrc_destroy_qp(a.qp) == MRC_OK && mrc_destroy_qp(b.qp) == MRC_OK, "mrc_destroy_qp");
    CHECK(mrc_dereg_mr(a.mr) == MRC_OK && mrc_dereg_mr(b.mr) == MRC_OK, "mrc_dereg_mr");
    CHECK(mrc_destroy_cq(a.cq) == MRC_OK && mrc_destroy_cq(b.cq) == MRC_OK, "mrc_destroy_cq");
    CHECK(mrc_dealloc_pd(a.pd) == MRC_OK && mrc_dealloc_pd(b.pd) == MRC_OK, "mrc_dealloc_pd");
    CHECK(mrc_destroy_context(a.ctx) == MRC_OK && mrc_destroy_context(b.ctx) == MRC_OK,
          "mrc_destroy_context");
    CHECK(mrc_destroy_fabric(fabric) == MRC_OK, "mrc_destroy_fabric");
    printf("mrc_write: ok: 4 x %d bytes (Write + Write-with-Immediate), one plane down for the last two, host 0's MPR shrunk to 128 from the second\n", LEN);
    return 0;
}

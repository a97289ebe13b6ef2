/*
 * virtiofsd tests: the front-end's end of a vhost-user socket
 *
 * The transport's unit test (test-vhost-queue.c), its fuzzer
 * (tools/virtiofsd/fuzz/fuzz-vhost.c) and the load generator (loadgen.c)
 * all play QEMU against a back-end: the messages that give it guest
 * memory and queues are written here once.  Each call says whether every
 * message went out (or came in) whole; on a failed send errno is
 * sendmsg()'s, so a caller can tell a daemon that hung up (EPIPE,
 * ECONNRESET) from a bug.
 *
 * Guest physical addresses double as the front-end's virtual ones (the
 * memory table says so), so ring addresses are given as guest addresses.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_TEST_VU_FRONTEND_H
#define VIRTIOFSD_TEST_VU_FRONTEND_H

#include <stdbool.h>
#include <stdint.h>

/* One message: its header, @size bytes of @payload, and @fd if not -1 */
bool vu_fe_send(int sock, uint32_t request, const void *payload,
                uint32_t size, int fd);

/*
 * The back-end's reply to @request, which must carry exactly @size bytes
 * into @payload.  Blocks; errno is EPROTO for a reply to something else,
 * of another size or not marked as a reply, ECONNRESET for a hang-up.
 */
bool vu_fe_recv(int sock, uint32_t request, void *payload, uint32_t size);

/* A request without payload whose reply is a u64 (GET_FEATURES, ...) */
bool vu_fe_get_u64(int sock, uint32_t request, uint64_t *value);

/*
 * SET_MEM_TABLE of one region: @size bytes of @memfd from its start, at
 * guest physical @gpa, which is also the front-end's address for it
 */
bool vu_fe_set_mem_table(int sock, int memfd, uint64_t gpa, uint64_t size);

/* A split queue as the front-end sets it up, before it is enabled */
typedef struct VuFeVring {
    unsigned int index;
    unsigned int num;           /* entries */
    uint16_t base;              /* where the daemon starts in the rings */
    uint64_t desc, avail, used; /* the rings' guest addresses */
    int call, kick;             /* eventfds */
} VuFeVring;

/* SET_VRING_NUM, _BASE, _ADDR, _CALL and _KICK of @v */
bool vu_fe_set_vring(int sock, const VuFeVring *v);

/* SET_VRING_ENABLE: with PROTOCOL_FEATURES, a ring starts disabled */
bool vu_fe_enable_vring(int sock, unsigned int index, bool enable);

#endif /* VIRTIOFSD_TEST_VU_FRONTEND_H */

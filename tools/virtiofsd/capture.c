/*
 * virtiofsd: recording the guest's requests for the fuzzer, and the
 * requests with their replies for the load generator
 *
 * The fuzzer (fuzz/fuzz-request.c) learns most from seeds that are what
 * a real guest sends, in the order it sends them.  With
 * VIRTIOFSD_CAPTURE=FILE in its environment, the daemon appends every
 * request it is about to process to FILE, as one record of the fuzzer's
 * input format; fuzz/capture-corpus.sh cuts such files into seeds.  It is
 * a debugging aid: off unless asked for, and then every byte the guest
 * sends, file contents included, lands in FILE.
 *
 * With VIRTIOFSD_RECORD=FILE, it writes FILE afresh with every request
 * and every reply, whole, in record-format.h's format: the load
 * generator (tests/unit/virtiofsd/loadgen.c) replays such a stream from
 * a real guest against any back-end and checks each reply against the
 * recorded one.  Large WRITEs and READs are kept, so FILE is about twice
 * the data the guest moved.
 *
 * Each FILE is opened before main() runs, so that no option parsing,
 * sandbox or seccomp filter is concerned: once requests arrive, the
 * host's file system is out of reach.  Without the variables, the request
 * path pays for a test of vfsd_capture_fd and of vfsd_record_fd.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "log.h"

/* A record's length field is a u16 */
#define CAPTURE_MAX_REQUEST 0xffff
/* The fuzzer's default reply room: one 8 KiB page and the out header */
#define CAPTURE_DEFAULT_ROOM (8192 + 16)

int vfsd_capture_fd = -1;
int vfsd_record_fd = -1;

/* Records from the queue threads must not interleave */
static GMutex capture_lock;
/* After a failed write: a record cut short would garble all that follow */
static bool capture_broken, record_broken;
static VfsdRateLimit capture_rl;

static int capture_open_env(const char *var, int flags)
{
    const char *path = getenv(var);
    int fd;

    if (!path || !*path) {
        return -1;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0600);
    if (fd < 0) {
        /* Asked for and not done: better no daemon than a silent gap */
        fprintf(stderr, "virtiofsd: %s=%s: %s\n", var, path,
                strerror(errno));
        exit(EXIT_FAILURE);
    }
    return fd;
}

/* Writes all of @len bytes to @fd, or nothing more once one failed */
static void capture_write_locked(int fd, bool *broken, const void *buf,
                                 size_t len)
{
    size_t done = 0;
    ssize_t n;

    while (!*broken && done < len) {
        n = write(fd, (const uint8_t *)buf + done, len - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            vfsd_warn("capture: write failed (%s), no more records",
                      n < 0 ? strerror(errno) : "nothing written");
            *broken = true;
            break;
        }
        done += n;
    }
}

static void __attribute__((constructor)) capture_open(void)
{
    vfsd_capture_fd = capture_open_env("VIRTIOFSD_CAPTURE", O_APPEND);
    /* One session a file: its uniques and node ids mean nothing elsewhere */
    vfsd_record_fd = capture_open_env("VIRTIOFSD_RECORD", O_TRUNC);
    if (vfsd_record_fd >= 0) {
        capture_write_locked(vfsd_record_fd, &record_broken,
                             VFSD_RECORD_MAGIC, strlen(VFSD_RECORD_MAGIC));
    }
}

/*
 * The reply room in the fuzzer's terms (out_size() there): 16-byte units
 * up to 254 of them, 0 for its default, 255 for 256 KiB.  Rounded up, so
 * that a reply that fitted here fits there too.
 */
static uint8_t capture_room(size_t room)
{
    if (room <= 254 * 16) {
        return MAX((room + 15) / 16, 1);
    }
    return room <= CAPTURE_DEFAULT_ROOM ? 0 : 255;
}

void vfsd_capture_request(const struct fuse_in_header *h, const VfsdBuf *in,
                          const VfsdBuf *out)
{
    VfsdBuf b = *in;
    size_t hlen = h ? sizeof(*h) : 0;
    size_t len = hlen + vfsd_buf_remaining(&b);
    g_autofree uint8_t *rec = NULL;

    if (len > CAPTURE_MAX_REQUEST) {
        /* Large WRITEs: a workload meant for capture keeps them small */
        vfsd_log_rl(&capture_rl, VFSD_LOG_WARN, "capture: a request of %zu "
                    "bytes does not fit a record, left out", len);
        return;
    }
    rec = g_malloc(4 + len);
    rec[0] = len & 0xff;
    rec[1] = len >> 8;
    rec[2] = 0;     /* in one piece */
    rec[3] = capture_room(vfsd_buf_remaining(out));
    memcpy(rec + 4, h, hlen);
    if (!vfsd_buf_read(&b, rec + 4 + hlen, len - hlen)) {
        return;
    }
    g_mutex_lock(&capture_lock);
    capture_write_locked(vfsd_capture_fd, &capture_broken, rec, 4 + len);
    g_mutex_unlock(&capture_lock);
}

/* A record of @hlen bytes of @h, then @len bytes read from @b */
static void record(VfsdRecord *rec, const void *h, size_t hlen, VfsdBuf b,
                   size_t len)
{
    size_t size = sizeof(*rec) + VFSD_RECORD_ALIGN(hlen + len);
    g_autofree uint8_t *buf = g_try_malloc0(size);
    bool ok = buf;

    if (ok) {
        rec->len = hlen + len;
        memcpy(buf, rec, sizeof(*rec));
        if (hlen) {
            memcpy(buf + sizeof(*rec), h, hlen);
        }
        ok = vfsd_buf_read(&b, buf + sizeof(*rec) + hlen, len);
    }
    g_mutex_lock(&capture_lock);
    if (ok) {
        capture_write_locked(vfsd_record_fd, &record_broken, buf, size);
    } else if (!record_broken) {
        /* A stream with a gap would replay as a daemon's fault */
        vfsd_warn("record: unique %" PRIu64 ": %s, no more records",
                  (uint64_t)rec->unique, buf ? "unreadable" : "no memory");
        record_broken = true;
    }
    g_mutex_unlock(&capture_lock);
}

void vfsd_record_request(const struct fuse_in_header *h, const VfsdBuf *in,
                         const VfsdBuf *out, bool hiprio)
{
    VfsdRecord rec = {
        .kind = VFSD_RECORD_REQUEST,
        .unique = h->unique,
        .room = MIN(vfsd_buf_remaining(out), UINT32_MAX),
        .flags = hiprio ? VFSD_RECORD_HIPRIO : 0,
    };

    record(&rec, h, sizeof(*h), *in, vfsd_buf_remaining(in));
}

void vfsd_record_reply(uint64_t unique, const VfsdBuf *out, size_t len)
{
    VfsdRecord rec = {
        .kind = VFSD_RECORD_REPLY,
        .unique = unique,
    };

    if (len) {
        record(&rec, NULL, 0, *out, len);
    }
}

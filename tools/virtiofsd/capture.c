/*
 * virtiofsd: recording the guest's requests for the fuzzer
 *
 * The fuzzer (fuzz/fuzz-request.c) learns most from seeds that are what
 * a real guest sends, in the order it sends them.  With
 * VIRTIOFSD_CAPTURE=FILE in its environment, the daemon appends every
 * request it is about to process to FILE, as one record of the fuzzer's
 * input format; fuzz/capture-corpus.sh cuts such files into seeds.  It is
 * a debugging aid: off unless asked for, and then every byte the guest
 * sends, file contents included, lands in FILE.
 *
 * FILE is opened before main() runs, so that no option parsing, sandbox
 * or seccomp filter is concerned: once requests arrive, the host's file
 * system is out of reach.  Without the variable, the request path pays
 * for one test of vfsd_capture_fd.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
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

/* Records from the queue threads must not interleave */
static GMutex capture_lock;
/* After a failed write: a record cut short would garble all that follow */
static bool capture_broken;
static VfsdRateLimit capture_rl;

static void __attribute__((constructor)) capture_open(void)
{
    const char *path = getenv("VIRTIOFSD_CAPTURE");

    if (!path || !*path) {
        return;
    }
    vfsd_capture_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                           0600);
    if (vfsd_capture_fd < 0) {
        /* Asked for and not done: better no daemon than a silent gap */
        fprintf(stderr, "virtiofsd: VIRTIOFSD_CAPTURE=%s: %s\n", path,
                strerror(errno));
        exit(EXIT_FAILURE);
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
    size_t done = 0;
    ssize_t n;

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
    while (!capture_broken && done < 4 + len) {
        n = write(vfsd_capture_fd, rec + done, 4 + len - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            vfsd_warn("capture: write failed (%s), no more records",
                      n < 0 ? strerror(errno) : "nothing written");
            capture_broken = true;
            break;
        }
        done += n;
    }
    g_mutex_unlock(&capture_lock);
}

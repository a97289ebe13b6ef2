/*
 * virtiofsd: logging to stderr or syslog, with rate limiting
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <glib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "log.h"

#define VFSD_RL_INTERVAL_US (5 * G_USEC_PER_SEC)
#define VFSD_RL_BURST 10

static bool log_syslog;
static VfsdLogLevel log_level = VFSD_LOG_INFO;
static GMutex rl_lock;

static const char *const level_names[] = {
    [VFSD_LOG_ERROR] = "error",
    [VFSD_LOG_WARN] = "warn",
    [VFSD_LOG_INFO] = "info",
    [VFSD_LOG_DEBUG] = "debug",
};

void vfsd_log_init(bool use_syslog, VfsdLogLevel level)
{
    log_syslog = use_syslog;
    log_level = level;
    if (use_syslog) {
        /*
         * Connect now: once the sandbox is entered, /dev/log is out of
         * reach.
         */
        openlog("virtiofsd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
    }
}

bool vfsd_log_parse_level(const char *s, VfsdLogLevel *level)
{
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(level_names); i++) {
        if (!strcmp(s, level_names[i])) {
            *level = i;
            return true;
        }
    }
    /* The spellings the Rust virtiofsd and libvirt use */
    if (!strcmp(s, "warning")) {
        *level = VFSD_LOG_WARN;
        return true;
    }
    if (!strcmp(s, "trace")) {
        *level = VFSD_LOG_DEBUG;
        return true;
    }
    if (!strcmp(s, "off")) {
        *level = VFSD_LOG_ERROR;
        return true;
    }
    return false;
}

bool vfsd_log_enabled(VfsdLogLevel level)
{
    return level <= log_level;
}

static void G_GNUC_PRINTF(2, 0)
vfsd_vlog(VfsdLogLevel level, const char *fmt, va_list ap)
{
    static const int prio[] = {
        [VFSD_LOG_ERROR] = LOG_ERR,
        [VFSD_LOG_WARN] = LOG_WARNING,
        [VFSD_LOG_INFO] = LOG_INFO,
        [VFSD_LOG_DEBUG] = LOG_DEBUG,
    };
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);

    if (log_syslog) {
        syslog(prio[level], "%s", msg);
    } else {
        fprintf(stderr, "virtiofsd: %s%s\n",
                level == VFSD_LOG_ERROR ? "error: " :
                level == VFSD_LOG_WARN ? "warning: " : "", msg);
    }
}

void vfsd_log(VfsdLogLevel level, const char *fmt, ...)
{
    va_list ap;

    if (!vfsd_log_enabled(level)) {
        return;
    }
    va_start(ap, fmt);
    vfsd_vlog(level, fmt, ap);
    va_end(ap);
}

void vfsd_log_rl(VfsdRateLimit *rl, VfsdLogLevel level, const char *fmt, ...)
{
    int64_t now = g_get_monotonic_time();
    unsigned int suppressed = 0;
    bool emit;
    va_list ap;

    if (!vfsd_log_enabled(level)) {
        return;
    }

    g_mutex_lock(&rl_lock);
    if (now - rl->window_start >= VFSD_RL_INTERVAL_US) {
        suppressed = rl->suppressed;
        rl->window_start = now;
        rl->count = 0;
        rl->suppressed = 0;
    }
    emit = rl->count < VFSD_RL_BURST;
    if (emit) {
        rl->count++;
    } else {
        rl->suppressed++;
    }
    g_mutex_unlock(&rl_lock);

    if (suppressed) {
        vfsd_log(level, "%u similar messages suppressed", suppressed);
    }
    if (emit) {
        va_start(ap, fmt);
        vfsd_vlog(level, fmt, ap);
        va_end(ap);
    }
}

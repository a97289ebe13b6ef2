/*
 * virtiofsd: logging
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_LOG_H
#define VIRTIOFSD_LOG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum VfsdLogLevel {
    VFSD_LOG_ERROR,
    VFSD_LOG_WARN,
    VFSD_LOG_INFO,
    VFSD_LOG_DEBUG,
} VfsdLogLevel;

/*
 * One per call site: a guest can make the daemon hit an error path as
 * often as it likes, and must not be able to flood the host's log with it.
 */
typedef struct VfsdRateLimit {
    int64_t window_start;
    unsigned int count;
    unsigned int suppressed;
} VfsdRateLimit;

void vfsd_log_init(bool use_syslog, VfsdLogLevel level);
bool vfsd_log_parse_level(const char *s, VfsdLogLevel *level);
bool vfsd_log_enabled(VfsdLogLevel level);
void vfsd_log(VfsdLogLevel level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void vfsd_log_rl(VfsdRateLimit *rl, VfsdLogLevel level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define vfsd_err(...) vfsd_log(VFSD_LOG_ERROR, __VA_ARGS__)
#define vfsd_warn(...) vfsd_log(VFSD_LOG_WARN, __VA_ARGS__)
#define vfsd_info(...) vfsd_log(VFSD_LOG_INFO, __VA_ARGS__)
#define vfsd_debug(...)                                 \
    do {                                                \
        if (vfsd_log_enabled(VFSD_LOG_DEBUG)) {         \
            vfsd_log(VFSD_LOG_DEBUG, __VA_ARGS__);      \
        }                                               \
    } while (0)

/* A warning about something the guest did, rate-limited per call site */
#define vfsd_guest_error(...)                                   \
    do {                                                        \
        static VfsdRateLimit vfsd_rl_;                          \
        vfsd_log_rl(&vfsd_rl_, VFSD_LOG_WARN, __VA_ARGS__);     \
    } while (0)

#endif /* VIRTIOFSD_LOG_H */

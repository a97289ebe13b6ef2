/*
 * virtiofsd: the system call allow-list
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_SECCOMP_FILTER_H
#define VIRTIOFSD_SECCOMP_FILTER_H

#include "options.h"

/* What the allow-list has beyond the calls every daemon makes */
enum {
    VFSD_SECCOMP_SYSLOG = 1 << 0,       /* logging to syslog */
    VFSD_SECCOMP_NAME_HANDLES = 1 << 1, /* name_to_handle_at() */
    VFSD_SECCOMP_OPEN_HANDLES = 1 << 2, /* open_by_handle_at() */
};

/* The VFSD_SECCOMP_* bits @opts needs */
unsigned int vfsd_seccomp_needs(const VfsdOptions *opts);

/*
 * The system call allow-list, for every thread of the process;
 * @action says what a call outside it does (VFSD_SECCOMP_NONE: nothing is
 * installed).  @needs (VFSD_SECCOMP_* bits) adds the calls some options
 * need.
 */
bool vfsd_seccomp_install(VfsdSeccomp action, unsigned int needs,
                          char **err);

#endif /* VIRTIOFSD_SECCOMP_FILTER_H */

/*
 * virtiofsd: what older C libraries' headers do not name yet
 *
 * One place for each fallback, below every other file: the daemon, its
 * seccomp filter and the tests that check the two agree must all use the
 * same number, which two copies would let drift apart.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_COMPAT_H
#define VIRTIOFSD_COMPAT_H

#include <sys/syscall.h>

/* Linux 6.6; the same number on every architecture */
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif

#endif

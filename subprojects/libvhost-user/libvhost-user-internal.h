/*
 * libvhost-user: what its source files share and users never see.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef LIBVHOST_USER_INTERNAL_H
#define LIBVHOST_USER_INTERNAL_H

#include "libvhost-user.h"

#define VHOST_USER_VERSION 1

void vu_panic(VuDev *dev, const char *msg, ...)
    __attribute__((__format__(__printf__, 2, 3)));
bool vu_message_write(VuDev *dev, int conn_fd, VhostUserMsg *vmsg);
/* Reads the reply to @vmsg; unlocks dev->backend_mutex */
bool vu_process_message_reply(VuDev *dev, const VhostUserMsg *vmsg);

#endif

/*
 * virtiofsd: the vhost-user transport
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_VHOST_H
#define VIRTIOFSD_VHOST_H

#include "fs-types.h"

/*
 * Serves the front-end connected on @conn_fd until it disconnects.
 * Returns false if the session ended with an error.
 */
bool vfsd_vhost_serve(VfsdFs *fs, int conn_fd);

#endif /* VIRTIOFSD_VHOST_H */

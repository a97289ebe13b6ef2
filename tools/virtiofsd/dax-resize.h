/*
 * virtiofsd: DAX mappings that follow their files' sizes
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_DAX_RESIZE_H
#define VIRTIOFSD_DAX_RESIZE_H

#include "fs-types.h"

/*
 * Watching mapped files for host-side truncation (--watch-truncate).
 * vfsd_dax_watch_start() sets up the watch, for at most @max_files files
 * at a time; its fd becomes readable when a watched file changed, and
 * vfsd_dax_watch_events() (which never blocks) then drops what the files
 * no longer back.  Both calls need the back-end usable, as the mapping
 * requests do.
 */
#define VFSD_DAX_MAX_WATCHES 4096
bool vfsd_dax_watch_start(VfsdDax *dax, unsigned int max_files, char **err);
int vfsd_dax_watch_fd(VfsdDax *dax);
void vfsd_dax_watch_events(VfsdFs *fs);
/*
 * The guest is about to learn @size as the file's size (attributes in a
 * reply): if that is not the size the mappings follow, they are brought
 * in line with the size the file has now, never with @size itself, which
 * a concurrent request may have made stale.
 */
void vfsd_dax_size_seen(VfsdFs *fs, VfsdInode *inode, uint64_t size);
/*
 * Around a truncate to @size of the host file (@dev, @ino), which @fd
 * (any fd of it, O_PATH will do) can fstat: mappings of it through any of
 * our inodes stop short of a smaller @size first, and are brought in line
 * with the file's size at the end, whatever the truncate did.  No other
 * request resizes them in between.
 */
void vfsd_dax_truncate_begin(VfsdFs *fs, dev_t dev, ino_t ino, int fd,
                             uint64_t size);
void vfsd_dax_truncate_end(VfsdFs *fs, dev_t dev, ino_t ino, int fd);
/* The guest may have grown the file (write, fallocate, copy) */
void vfsd_dax_guest_grew(VfsdFs *fs, VfsdInode *inode);

/*
 * For dax.c's SETUPMAPPING, which read @size before the resizes that
 * came while it mapped: see dax-resize.c.  Lock held.
 */
void vfsd_dax_setup_settle(VfsdFs *fs, VfsdInode *inode, int fd,
                           uint64_t size);

#endif /* VIRTIOFSD_DAX_RESIZE_H */

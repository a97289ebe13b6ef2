/*
 * virtiofsd: file handles, opened by a process of their own
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_BROKER_H
#define VIRTIOFSD_BROKER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "options.h"

typedef struct VfsdBroker VfsdBroker;

/*
 * Forks the broker, which keeps CAP_DAC_READ_SEARCH and nothing else of
 * the caller's: @root_fd (an O_PATH fd of the shared directory) and
 * @proc_fd (the caller's /proc/self/fd) are only used before the fork.
 * @action is --seccomp's, for the broker's own (short) allow-list.  Call
 * it before the caller reads anything from the guest, before it starts
 * threads, and while it still holds CAP_DAC_READ_SEARCH, which it drops
 * once this returns.  NULL with *@err set when there is no broker to be
 * had.
 */
VfsdBroker *vfsd_broker_spawn(int root_fd, int proc_fd, VfsdSeccomp action,
                              char **err);

/* Ends the broker (it exits when its socket closes) and frees @b */
void vfsd_broker_free(VfsdBroker *b);

/*
 * Gives the broker the inode behind @fd (any fd of it, O_PATH will do)
 * on mount @mnt_id, to be opened again later by the number stored in
 * *@id.  @proc_fd is the caller's /proc/self/fd.  -errno when the inode
 * cannot be held by handle: EOPNOTSUPP for a mount whose root is not a
 * directory.  The broker does not answer: where it cannot keep the
 * handle after all (the caller could make it, so it should), opening it
 * gives the reason.
 */
int vfsd_broker_register(VfsdBroker *b, int proc_fd, int fd,
                         uint64_t mnt_id, uint64_t *id);

/*
 * The same, taking @fd on success: the inode goes to the broker with a
 * batch of others (the first of a mount on its own), and @fd with it.
 * Any other call to the broker sends what waits first, so an open of
 * *@id finds it there.
 */
int vfsd_broker_hand_over(VfsdBroker *b, int proc_fd, int fd,
                          uint64_t mnt_id, uint64_t *id);

/* A new O_PATH fd of inode @id, or -errno (ESTALE: gone on the host) */
int vfsd_broker_open(VfsdBroker *b, uint64_t id);

/* The broker forgets @id (with a batch of others); not to be opened again */
void vfsd_broker_forget(VfsdBroker *b, uint64_t id);

/*
 * What a file handle that did not come from the broker (a migration
 * stream's) names on the shared directory's mount: its device, inode
 * number and type, never an fd, so that the caller can look for it
 * beneath the shared directory by itself.  0 or -errno.
 */
int vfsd_broker_identify(VfsdBroker *b, int handle_type,
                         const void *bytes, uint32_t len, dev_t *dev,
                         uint64_t *ino, mode_t *type);

/*
 * The fds of ours @b keeps (its socket and pipe, and those handed over
 * that wait for their batch), for fd accounting
 */
unsigned int vfsd_broker_fds(VfsdBroker *b);

/* Counters for the log: handles registered, and opened */
void vfsd_broker_counts(VfsdBroker *b, unsigned int *made,
                        unsigned int *opened);

/* The messages sent to the broker so far */
unsigned int vfsd_broker_messages(VfsdBroker *b);

#endif /* VIRTIOFSD_BROKER_H */

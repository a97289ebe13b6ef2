/*
 * virtiofsd: the state of the file system, shared by its layers
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_FS_TYPES_H
#define VIRTIOFSD_FS_TYPES_H

/*
 * Types only: each file's functions are declared in its own header, so
 * that including this one never means depending on another file.
 */

#include <glib.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/stat.h>

#include "standard-headers/linux/fuse.h"
#include "options.h"
#include "stats.h"

typedef struct VfsdDax VfsdDax;
typedef struct VfsdDaxInode VfsdDaxInode;

typedef struct VfsdFs VfsdFs;

/*
 * A host inode the guest knows by nodeid.  It is held by an O_PATH fd, so
 * the guest's view never depends on re-walking paths that may change
 * under us; (dev, ino, mnt_id) identifies it.
 *
 * With --inode-file-handles it may be held by a file handle instead: then
 * @fd is open only while a request, an open file or a DAX mapping uses the
 * inode (@fd_users > 0), so that the inodes the guest merely remembers
 * hold no fd (inode.c).
 */
typedef struct VfsdInode {
    VfsdFs *fs;
    uint64_t nodeid;
    int fd;                     /* -1 while a handle inode has no user */
    struct file_handle *handle; /* NULL: held by @fd for its lifetime */
    int mount_fd;               /* what open_by_handle_at() needs */
    GMutex fd_lock;
    unsigned int fd_users;      /* under fd_lock; handle inodes only */
    dev_t dev;
    ino_t ino;
    uint64_t mnt_id;
    mode_t type;                /* S_IFMT bits */
    gint refcount;              /* table reference + in-flight users */
    uint64_t nlookup;           /* under VfsdInodeStore.lock */
    /*
     * POSIX locks are OFD locks on one fd per lock owner, so that owners
     * sharing a file handle do not share locks.
     */
    GMutex plock_lock;
    GHashTable *plocks;         /* uint64_t owner -> fd, or NULL */
    /*
     * dax.c's: its mappings and the watch on its file.  NULL until the
     * inode is first mapped, so always without a DAX window.
     */
    VfsdDaxInode *dax;
} VfsdInode;

typedef struct VfsdInodeStore {
    GMutex lock;
    GHashTable *by_nodeid;      /* uint64_t nodeid -> VfsdInode */
    GHashTable *by_key;         /* VfsdInodeKey -> VfsdInode */
    uint64_t next_nodeid;
    VfsdInode *root;
} VfsdInodeStore;

/* An open file or directory: the guest's fh */
typedef struct VfsdHandle {
    VfsdFs *fs;
    uint64_t fh;
    int fd;
    int flags;                  /* open flags */
    VfsdInode *inode;           /* holds a reference */
    gint refcount;
    GMutex lock;                /* directory position */
    bool is_dir;
} VfsdHandle;

/*
 * A request waiting in a call that may block without end (SETLKW), so
 * that FUSE_INTERRUPT can end the wait (intr.c).
 */
typedef struct VfsdWaiter {
    uint64_t unique;
    pthread_t thread;
    bool interrupted;           /* under VfsdFs.intr_lock */
    bool done;                  /* same */
    unsigned int users;         /* same: interrupters that hold it */
} VfsdWaiter;

/* Makes a blocking system call of the thread fail with EINTR */
#define VFSD_INTR_SIGNAL SIGUSR1

/* Who sent a request: creations are done with the guest's ids */
typedef struct VfsdCtx {
    uid_t uid;
    gid_t gid;
    pid_t pid;
    /*
     * A creation's supplementary group (FUSE_CREATE_SUPP_GROUP): the
     * parent directory's group when the caller is in it, else VFSD_NO_ID
     */
    gid_t supp_gid;
    /*
     * A creation's security label (FUSE_SECURITY_CTX, --security-label):
     * the extended attribute the guest names, to be on the new file from
     * the moment it has its name.  NULL: none.
     */
    const char *label_name;
    const void *label;
    uint32_t label_size;
} VfsdCtx;

struct VfsdFs {
    const VfsdOptions *opts;
    int proc_self_fd;           /* /proc/self/fd, to reopen O_PATH fds */
    VfsdInodeStore inodes;

    GMutex handles_lock;
    GHashTable *handles;        /* uint64_t fh -> VfsdHandle */
    uint64_t next_fh;

    /* fds held for the guest, bounded so it cannot exhaust ours */
    gint fds_open;
    int fds_max;

    /*
     * --inode-file-handles: whether new inodes are held by handle, and
     * one fd per mount for open_by_handle_at() (int mount id -> fd + 1)
     */
    bool use_handles;
    GMutex mounts_lock;
    GHashTable *mount_fds;
    gint handles_made;          /* inodes held by handle */
    gint handles_opened;        /* open_by_handle_at() calls */

    VfsdDax *dax;               /* NULL without a DAX window */
    VfsdStats *stats;           /* NULL without --stats */

    /*
     * With FUSE_DONT_MASK creations run under the guest's umask, and the
     * umask is the process's: one creation at a time sets it.
     */
    GMutex umask_lock;

    /* Requests that wait, by unique, for FUSE_INTERRUPT (intr.c) */
    GMutex intr_lock;
    GCond intr_cond;
    /*
     * VfsdWaiter *: a list, not a table by unique, because the guest may
     * reuse a unique that is still waiting; a SETLKW waits in a
     * blocking-pool thread, so there are few of them.
     */
    GList *waiters;
    uint64_t intr_early[16];    /* interrupted before they came; 0: none */
    unsigned int intr_early_next;
    bool intr_closing;          /* waits end at once (disconnect) */

    /* Negotiated by FUSE_INIT */
    bool initialized;
    uint32_t proto_minor;
    uint64_t conn_flags;
    double entry_timeout;
    double attr_timeout;
};

/*
 * The guest's page: DAX offsets and lengths are aligned to it (INIT
 * announces map_alignment as its shift) and INIT's max_pages counts it.
 */
#define VFSD_PAGE_SHIFT 12
#define VFSD_PAGE_SIZE (1u << VFSD_PAGE_SHIFT)

/* Largest READ/WRITE payload: what INIT announces as max_write */
#define VFSD_MAX_IO (1024 * 1024)

/*
 * Longest name a request may carry: the host gives ENAMETOOLONG for one
 * longer than its file system takes, and getname() does for PATH_MAX.
 */
#define VFSD_NAME_MAX (PATH_MAX - 1)

#endif /* VIRTIOFSD_FS_TYPES_H */

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
 *
 * Lock order, outer first; a thread holding one may take only those
 * listed after it:
 *
 *   VfsdDev.dispatch_lock (vhost-dev.h; read by queue threads and
 *     workers, written by the main thread around a vhost-user message)
 *   VfsdDaxInode.setup_lock (dax-table.h; held by a SETUPMAPPING across its
 *     front-end round trip, without VfsdDax.lock)
 *   VfsdDax.lock (dax-table.h; held across the round trips of resizes)
 *   VfsdInodeStore.lock
 *   VfsdInode.fd_lock
 *   VfsdInodeStore.idle_lock
 *
 * Both DAX locks are taken through the back-end (dax_lock() in
 * vhost-dax.c): a thread that waits for one lets dispatch_lock go, as a
 * thread in a front-end round trip does, and takes it back after.
 *
 * Leaves, under which nothing else is taken: VfsdInode.plock_lock,
 * VfsdHandle.lock, VfsdFs.handles_lock, VfsdFs.umask_lock, VfsdIntr.lock,
 * VfsdQueue.lock and inflight_lock (vhost-dev.h), the broker's lock
 * (broker.c, held across its socket round trip, taken under
 * VfsdInode.fd_lock), capture.c's and log.c's.  VfsdDev.park_lock is
 * taken under no lock but dispatch_lock, and a queue's lock may be taken
 * under it (vhost-dev.h).  A field shared between threads says which
 * lock guards it ("under ...") or that it is atomic.
 */

#include <glib.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <time.h>

#include "fuse-proto.h"
#include "options.h"
#include "stats.h"

typedef struct VfsdDax VfsdDax;
typedef struct VfsdDaxInode VfsdDaxInode;

typedef struct VfsdFs VfsdFs;
typedef struct VfsdMig VfsdMig;
typedef struct VfsdBroker VfsdBroker;

/*
 * A host inode the guest knows by nodeid.  It is held by an O_PATH fd, so
 * the guest's view never depends on re-walking paths that may change
 * under us; (dev, ino, mnt_id) identifies it.
 *
 * With --inode-file-handles it may be held by a file handle instead: then
 * @fd is open while a request, an open file or a DAX mapping uses the
 * inode (@fd_users > 0), and a while after (the idle list), so that the
 * inodes the guest merely remembers hold no fd (inode.c).
 */
typedef struct VfsdInode {
    VfsdFs *fs;
    uint64_t nodeid;
    int fd;                     /* -1 while a handle inode has no fd */
    /*
     * false: held by @fd for its lifetime.  Else by its file handle:
     * @handle, to tell it from a later file with its number (made when
     * the fd first goes: until then nothing can take the number), and
     * the number the broker opens it by (broker.c): this process cannot
     * open handles.
     */
    bool by_handle;
    struct file_handle *handle;
    uint64_t broker_id;
    GMutex fd_lock;
    unsigned int fd_users;      /* under fd_lock; handle inodes only */
    /*
     * A handle inode whose fd no user needs keeps it a while, on
     * VfsdInodeStore.idle (under its idle_lock), so that an inode in
     * use again soon is not opened through the broker again.
     */
    GList idle_link;
    bool idle;                  /* under VfsdInodeStore.idle_lock */
    dev_t dev;
    ino_t ino;
    uint64_t mnt_id;
    mode_t type;                /* S_IFMT bits */
    gint refcount;              /* atomic: table reference + users */
    uint64_t nlookup;           /* under VfsdInodeStore.lock */
    /*
     * POSIX locks are OFD locks on one fd per lock owner, so that owners
     * sharing a file handle do not share locks.
     */
    GMutex plock_lock;
    GHashTable *plocks;         /* under plock_lock: owner -> fd + 1 */
    /*
     * The DAX module's (dax-table.h): its mappings and the watch on its
     * file.  NULL until the inode is first mapped, so always without a
     * DAX window.
     */
    VfsdDaxInode *dax;
    /*
     * dax-policy.c's, atomic: --dax-policy=exec's last look at the file's first
     * bytes, with the stamp of the file it was made on (dax_is_elf())
     */
    uint64_t elf_verdict;
    /*
     * Not found again after a migration (--migration-on-error=guest-error):
     * fd is -1, and every request on it gets EIO until the guest forgets it
     */
    bool lost;
    /*
     * fs-dir.c's, for --cache=adaptive: until when (monotonic, us) the
     * names and attributes of the last whole READDIRPLUS listing of this
     * directory stay valid in the guest
     */
    gint64 listed_until;
    /*
     * fs.c's, atomic: how much the names looked up in this directory
     * lately led to inodes the guest knew already, from 0 to
     * VFSD_LOOKUPS_KNOWN_MAX; from VFSD_LOOKUPS_KNOWN_MIN, a LOOKUP tries
     * the stat of the name first (vfsd_entry_lookup_name())
     */
    gint lookups_known;
} VfsdInode;

#define VFSD_LOOKUPS_KNOWN_MIN 2
#define VFSD_LOOKUPS_KNOWN_MAX 4

typedef struct VfsdInodeStore {
    GMutex lock;
    GHashTable *by_nodeid;      /* uint64_t nodeid -> VfsdInode */
    GHashTable *by_key;         /* VfsdInodeKey -> VfsdInode */
    uint64_t next_nodeid;
    VfsdInode *root;
    gint lost;                  /* lost inodes in by_nodeid */
    /*
     * Handle inodes with an fd and no user, least recently used first,
     * each holding a reference: at most idle_max.  Lock order: an
     * inode's fd_lock, then idle_lock.
     */
    GMutex idle_lock;
    GQueue idle;
    unsigned int idle_max;
    /* mount id -> whether it has file handles (inode.c), under lock */
    GHashTable *mount_handles;
} VfsdInodeStore;

/* An open file or directory: the guest's fh */
typedef struct VfsdHandle {
    VfsdFs *fs;
    uint64_t fh;
    int fd;
    int flags;                  /* open flags */
    VfsdInode *inode;           /* holds a reference */
    gint refcount;
    GMutex lock;                /* directory position, and the below */
    bool is_dir;
    /*
     * fs-dir.c's, for --cache=adaptive: when this handle's READDIRPLUS
     * pass from offset 0 began (g_get_monotonic_time(); 0: none), and
     * the shortest timeout its names and attributes got so far
     */
    gint64 list_start;
    double list_min;
    /*
     * fs-dir.c's, under lock: the entries the last getdents64() read
     * that no reply took yet (@dents from @dents_pos to @dents_len), and
     * the offset the next of them, or the fd's position once they are
     * all taken, stands at (@dir_next, when @dir_known): a READDIR that
     * goes on from there reads neither the fd's position nor entries
     * again.
     */
    char *dents;
    uint32_t dents_pos, dents_len;
    uint64_t dir_next;
    bool dir_known;
} VfsdHandle;

/*
 * A request waiting in a call that may block without end (SETLKW), so
 * that FUSE_INTERRUPT can end the wait (intr.c).
 */
typedef struct VfsdWaiter {
    uint64_t unique;
    pthread_t thread;
    bool interrupted;           /* under VfsdIntr.lock */
    bool done;                  /* same */
    unsigned int users;         /* same: interrupters that hold it */
} VfsdWaiter;

/* Requests that wait, by unique, for FUSE_INTERRUPT: intr.c's alone */
typedef struct VfsdIntr {
    GMutex lock;
    GCond cond;
    /*
     * VfsdWaiter *: a list, not a table by unique, because the guest may
     * reuse a unique that is still waiting; a SETLKW waits in a
     * blocking-pool thread, so there are few of them.
     */
    GList *waiters;
    uint64_t early[16];         /* interrupted before they came; 0: none */
    unsigned int early_next;
    bool closing;               /* waits end at once (disconnect) */
    bool paused;                /* the same while the device is stopped */
} VfsdIntr;

/*
 * What FUSE_INIT agreed on with the guest: set by server.c, read by the
 * operations whose meaning depends on it; cleared when the session ends.
 */
typedef struct VfsdConn {
    bool initialized;
    uint32_t proto_minor;
    uint64_t flags;             /* the FUSE_* capabilities both support */
} VfsdConn;

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
     * the process that opens them (NULL: none, so no handles)
     */
    bool use_handles;
    VfsdBroker *broker;
    gint handles_made;          /* inodes held by handle */
    gint handles_opened;        /* opened through the broker */
    /*
     * READDIR's seeks of a directory (fs-dir.c), and READDIRPLUS entries
     * of inodes known already, confirmed without opening them (fs.c)
     */
    gint dir_seeks;
    gint listed_known;
    gint looked_up_known;       /* LOOKUPs answered that way too (fs.c) */

    VfsdDax *dax;               /* NULL without a DAX window */
    VfsdStats *stats;           /* NULL without --stats */
    VfsdMig *mig;               /* migrate.c's; NULL until a migration */

    /*
     * With FUSE_DONT_MASK creations run under the guest's umask, and the
     * umask is the process's: one creation at a time sets it.
     */
    GMutex umask_lock;

    VfsdIntr intr;
    VfsdConn conn;

    /* How long the guest may cache names and attributes (--cache) */
    double entry_timeout;
    double attr_timeout;
};

/*
 * What the file system layer answers with.  These are its own types:
 * only server.c turns them into FUSE's wire structures, so that a change
 * of the protocol touches the decoding layer alone.
 */

/* An inode's attributes as the guest is to see them (ids mapped) */
typedef struct VfsdAttr {
    uint64_t ino;
    uint64_t size;
    uint64_t blocks;
    struct timespec atime;
    struct timespec mtime;
    struct timespec ctime;
    uint32_t mode;
    uint32_t nlink;
    uint32_t uid;               /* the guest's ids */
    uint32_t gid;
    dev_t rdev;
    uint32_t blksize;
    bool dax;                   /* the guest is to map it through DAX */
    bool submount;              /* on another mount than its parent */
} VfsdAttr;

/*
 * What STATX answers: the attributes, and what statx(2) has beyond them.
 * @mask says which of the STATX_BASIC_STATS and STATX_BTIME fields the
 * host filled in; @attributes holds only bits that @attributes_mask says
 * the host knows about.
 */
typedef struct VfsdStatx {
    VfsdAttr attr;
    uint32_t mask;              /* STATX_* */
    struct timespec btime;
    uint64_t attributes;        /* STATX_ATTR_* */
    uint64_t attributes_mask;
    dev_t dev;                  /* the host's: the guest has its own */
} VfsdStatx;

/*
 * A name the guest may cache: nodeid 0 (and no attributes) says the name
 * does not exist, for @entry_timeout.
 */
typedef struct VfsdEntry {
    uint64_t nodeid;
    uint64_t generation;
    VfsdAttr attr;
    double entry_timeout;       /* seconds */
    double attr_timeout;
} VfsdEntry;

/* What a SETATTR changes: the VFSD_SET_* bits of @valid say which */
enum {
    VFSD_SET_MODE = 1u << 0,
    VFSD_SET_UID = 1u << 1,
    VFSD_SET_GID = 1u << 2,
    VFSD_SET_SIZE = 1u << 3,
    VFSD_SET_ATIME = 1u << 4,
    VFSD_SET_MTIME = 1u << 5,
    VFSD_SET_ATIME_NOW = 1u << 6,   /* with or without VFSD_SET_ATIME */
    VFSD_SET_MTIME_NOW = 1u << 7,
    VFSD_SET_FH = 1u << 8,          /* @fh is the caller's open file */
    VFSD_SET_KILL_SUIDGID = 1u << 9,
};

typedef struct VfsdSetattr {
    unsigned int valid;
    uint32_t mode;
    uint32_t uid;               /* the guest's ids */
    uint32_t gid;
    uint64_t size;
    uint64_t fh;
    struct timespec atime;
    struct timespec mtime;
} VfsdSetattr;

/* What the guest may keep of an open file or directory */
enum {
    VFSD_OPEN_DIRECT_IO = 1u << 0,  /* no data in its page cache */
    VFSD_OPEN_PARALLEL_DIRECT_WRITES = 1u << 1,
    VFSD_OPEN_KEEP_CACHE = 1u << 2, /* its cache stays valid across opens */
    VFSD_OPEN_CACHE_DIR = 1u << 3,  /* it may cache a directory listing */
    VFSD_OPEN_NOFLUSH = 1u << 4,    /* its close() need not be told */
};

typedef struct VfsdOpened {
    uint64_t fh;
    unsigned int keep;          /* VFSD_OPEN_* */
} VfsdOpened;

/* A POSIX or BSD lock, as F_GETLK and F_SETLK see it (end inclusive) */
typedef struct VfsdLock {
    uint64_t owner;
    uint64_t start;
    uint64_t end;
    uint32_t type;              /* F_RDLCK, F_WRLCK, F_UNLCK */
    bool flock;                 /* a flock(2) lock, not a POSIX one */
} VfsdLock;

/* One directory entry, for a readdir sink */
typedef struct VfsdDirent {
    uint64_t ino;
    uint64_t off;               /* where the next readdir starts */
    uint32_t type;              /* DT_* */
    const char *name;
    size_t namelen;
} VfsdDirent;

/*
 * Where vfsd_op_readdir() puts entries, in the encoding the caller
 * chooses: @fits says whether an entry with a name of @namelen bytes
 * still has room (no lookup is made for one that has not), @add takes
 * it, with its lookup for READDIRPLUS (NULL where there is none).
 */
typedef struct VfsdDirSink {
    bool (*fits)(void *opaque, size_t namelen);
    void (*add)(void *opaque, const VfsdDirent *d, const VfsdEntry *e);
    void *opaque;
} VfsdDirSink;

/* A range of the DAX window */
typedef struct VfsdDaxRange {
    uint64_t moffset;
    uint64_t len;
} VfsdDaxRange;

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

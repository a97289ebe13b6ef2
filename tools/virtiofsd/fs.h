/*
 * virtiofsd: the passthrough file system served to the guest
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_FS_H
#define VIRTIOFSD_FS_H

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
#include "buf.h"
#include "stats.h"

typedef struct VfsdDax VfsdDax;

/*
 * A host inode the guest knows by nodeid.  It is held by an O_PATH fd, so
 * the guest's view never depends on re-walking paths that may change
 * under us; (dev, ino, mnt_id) identifies it.
 */
typedef struct VfsdFs VfsdFs;

typedef struct VfsdInode {
    VfsdFs *fs;
    uint64_t nodeid;
    int fd;
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
     * DAX mappings of the inode and the watch for host-side truncation
     * (dax.c), written under the window's lock; dax_maps, dax_size and
     * dax_setting_up are also read without it, atomically.
     */
    gint dax_maps;              /* live mappings */
    int dax_wd;                 /* inotify watch descriptor, 0: none */
    uint64_t dax_size;          /* file size the mappings follow */
    gint dax_setting_up;        /* SETUPMAPPINGs under way */
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

/* fs.c: setup and helpers shared by the operation files */
bool vfsd_fs_init(VfsdFs *fs, const VfsdOptions *opts, int root_fd,
                  int proc_self_fd, char **err);
void vfsd_fs_cleanup(VfsdFs *fs);
bool vfsd_fd_reserve(VfsdFs *fs);
void vfsd_fd_release(VfsdFs *fs);
int vfsd_reopen(VfsdFs *fs, VfsdInode *inode, int flags);
int vfsd_statx(int fd, struct statx *stx);
void vfsd_attr_from_statx(VfsdFs *fs, VfsdInode *inode,
                          const struct statx *stx, struct fuse_attr *attr);
int vfsd_fill_attr(VfsdFs *fs, VfsdInode *inode, struct fuse_attr *attr);
void vfsd_set_timeout(double t, uint64_t *sec, uint32_t *nsec);
bool vfsd_valid_name(const char *name);

/*
 * Longest name a request may carry: the host gives ENAMETOOLONG for one
 * longer than its file system takes, and getname() does for PATH_MAX.
 */
#define VFSD_NAME_MAX (PATH_MAX - 1)

/* inode.c */
void vfsd_inodes_init(VfsdInodeStore *st);
bool vfsd_inodes_set_root(VfsdFs *fs, int fd);
void vfsd_inodes_destroy(VfsdFs *fs);
VfsdInode *vfsd_inode_get(VfsdFs *fs, uint64_t nodeid);
void vfsd_inode_ref(VfsdInode *inode);
void vfsd_inode_unref(VfsdInode *inode);
int vfsd_inode_do_lookup(VfsdFs *fs, VfsdInode *parent, const char *name,
                         struct fuse_entry_out *e);
int vfsd_inode_from_fd(VfsdFs *fs, VfsdInode *parent, int fd,
                       struct fuse_entry_out *e);
void vfsd_inode_plocks_drop(VfsdInode *inode, uint64_t owner);
void vfsd_inode_forget(VfsdFs *fs, uint64_t nodeid, uint64_t nlookup);
void vfsd_inodes_forget_all(VfsdFs *fs);

/* Handles (fs.c) */
uint64_t vfsd_handle_new(VfsdFs *fs, int fd, int flags, VfsdInode *inode,
                         bool is_dir);
VfsdHandle *vfsd_handle_get(VfsdFs *fs, uint64_t fh, bool is_dir);
void vfsd_handle_put(VfsdHandle *h);
void vfsd_handle_close(VfsdFs *fs, uint64_t fh, bool is_dir);

/*
 * The operations (fs-entry.c, fs-file.c, fs-dir.c, fs-xattr.c, dax.c).
 * They return 0 or a byte count on success, a negative errno on failure.
 */
int vfsd_op_lookup(VfsdFs *fs, uint64_t parent, const char *name,
                   struct fuse_entry_out *e);
int vfsd_op_getattr(VfsdFs *fs, uint64_t nodeid, struct fuse_attr_out *out);
int vfsd_op_setattr(VfsdFs *fs, const VfsdCtx *ctx, uint64_t nodeid,
                    const struct fuse_setattr_in *in,
                    struct fuse_attr_out *out);
int vfsd_op_readlink(VfsdFs *fs, uint64_t nodeid, char *buf, size_t size);
int vfsd_op_mknod(VfsdFs *fs, const VfsdCtx *ctx, uint64_t parent,
                  const char *name, mode_t mode, dev_t rdev, mode_t umask,
                  const char *link_target, struct fuse_entry_out *e);
int vfsd_op_mkdir(VfsdFs *fs, const VfsdCtx *ctx, uint64_t parent,
                  const char *name, mode_t mode, mode_t umask,
                  struct fuse_entry_out *e);
int vfsd_op_unlink(VfsdFs *fs, uint64_t parent, const char *name,
                   bool is_dir);
int vfsd_op_rename(VfsdFs *fs, uint64_t parent, const char *name,
                   uint64_t newparent, const char *newname, uint32_t flags);
int vfsd_op_link(VfsdFs *fs, uint64_t nodeid, uint64_t newparent,
                 const char *newname, struct fuse_entry_out *e);
int vfsd_op_statfs(VfsdFs *fs, uint64_t nodeid, struct fuse_kstatfs *st);
int vfsd_op_access(VfsdFs *fs, const VfsdCtx *ctx, uint64_t nodeid,
                   int mask);
int vfsd_op_syncfs(VfsdFs *fs, uint64_t nodeid);

int vfsd_op_open(VfsdFs *fs, const VfsdCtx *ctx, uint64_t nodeid,
                 uint32_t flags, uint32_t open_flags,
                 struct fuse_open_out *out);
int vfsd_op_create(VfsdFs *fs, const VfsdCtx *ctx, uint64_t parent,
                   const char *name, uint32_t flags, uint32_t fuse_open_flags,
                   mode_t mode, mode_t umask, bool tmpfile,
                   struct fuse_entry_out *e, struct fuse_open_out *out);
ssize_t vfsd_op_read(VfsdFs *fs, uint64_t fh, uint64_t offset,
                     uint32_t size, VfsdBuf *out);
ssize_t vfsd_op_write(VfsdFs *fs, uint64_t fh, uint64_t offset,
                      uint32_t size, uint32_t write_flags, VfsdBuf *in);
int vfsd_op_flush(VfsdFs *fs, uint64_t fh, uint64_t lock_owner);
int vfsd_op_release(VfsdFs *fs, uint64_t fh, uint32_t release_flags,
                    uint64_t lock_owner, bool is_dir);
int vfsd_op_fsync(VfsdFs *fs, uint64_t nodeid, uint64_t fh, bool datasync,
                  bool is_dir);
int vfsd_op_fallocate(VfsdFs *fs, uint64_t nodeid, uint64_t fh,
                      uint64_t offset, uint64_t length, uint32_t mode);
int vfsd_op_lseek(VfsdFs *fs, uint64_t fh, uint64_t offset, uint32_t whence,
                  uint64_t *result);
ssize_t vfsd_op_copy_file_range(VfsdFs *fs,
                                const struct fuse_copy_file_range_in *in);
int vfsd_op_getlk(VfsdFs *fs, uint64_t fh, const struct fuse_lk_in *in,
                  struct fuse_file_lock *out);
int vfsd_op_setlk(VfsdFs *fs, uint64_t fh, const struct fuse_lk_in *in,
                  VfsdWaiter *waiter);

int vfsd_op_opendir(VfsdFs *fs, uint64_t nodeid, uint32_t flags,
                    struct fuse_open_out *out);
/*
 * Appends the entries from @offset to @reply, at most @size and @room
 * bytes.  READDIRPLUS entries carry lookups, which the guest owns once it
 * has the reply: if the reply cannot reach it, they go back with
 * vfsd_readdirplus_unlookup().
 */
int vfsd_op_readdir(VfsdFs *fs, uint64_t fh, uint64_t offset,
                    uint32_t size, size_t room, bool plus, GByteArray *reply);
void vfsd_readdirplus_unlookup(VfsdFs *fs, const GByteArray *reply);

int vfsd_op_setxattr(VfsdFs *fs, uint64_t nodeid, const char *name,
                     const void *value, size_t size, uint32_t flags,
                     uint32_t setxattr_flags);
ssize_t vfsd_op_getxattr(VfsdFs *fs, uint64_t nodeid, const char *name,
                         void *value, size_t size);
ssize_t vfsd_op_listxattr(VfsdFs *fs, uint64_t nodeid, char *list,
                          size_t size);
int vfsd_op_removexattr(VfsdFs *fs, uint64_t nodeid, const char *name);
int vfsd_xattr_drop_capability(VfsdFs *fs, VfsdInode *inode, int fd);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(VfsdInode, vfsd_inode_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VfsdHandle, vfsd_handle_put)

/*
 * intr.c.  A request that may wait calls vfsd_waiter_begin() first,
 * checks vfsd_waiter_interrupted() before each blocking call and after
 * each EINTR, and calls vfsd_waiter_end() when done.
 */
bool vfsd_intr_init(VfsdFs *fs, char **err);
void vfsd_intr_cleanup(VfsdFs *fs);
void vfsd_waiter_begin(VfsdFs *fs, VfsdWaiter *w, uint64_t unique);
bool vfsd_waiter_interrupted(VfsdFs *fs, VfsdWaiter *w);
void vfsd_waiter_end(VfsdFs *fs, VfsdWaiter *w);
void vfsd_interrupt(VfsdFs *fs, uint64_t unique);
/* Every wait, and every later one, ends with EINTR */
void vfsd_interrupt_all(VfsdFs *fs);

/* fs.c: FUSE_DESTROY and disconnect */
void vfsd_fs_reset(VfsdFs *fs);

/* Credentials (creds.c) */
typedef struct VfsdSavedCreds {
    uid_t uid;
    gid_t gid;
    bool supp;                  /* a supplementary group was set */
} VfsdSavedCreds;
bool vfsd_creds_init(char **err);
int vfsd_creds_switch(const VfsdCtx *ctx, VfsdSavedCreds *old);
void vfsd_creds_restore(const VfsdSavedCreds *old);
int vfsd_drop_fsetid(bool *dropped);
void vfsd_restore_fsetid(bool dropped);
bool vfsd_umask_enter(VfsdFs *fs, mode_t *mode, mode_t umask);
void vfsd_umask_leave(VfsdFs *fs, bool entered);

#endif /* VIRTIOFSD_FS_H */

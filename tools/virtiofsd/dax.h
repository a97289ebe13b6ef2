/*
 * virtiofsd: the DAX cache window
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_DAX_H
#define VIRTIOFSD_DAX_H

#include "fs-types.h"
#include "migstream.h"

/* The window is shared memory region 0 of the device */
#define VFSD_DAX_SHMID 0

/* Mapping flags, as in VhostUserMMap */
#define VFSD_DAX_MAP_RW         (1ULL << 0)
#define VFSD_DAX_MAP_REPLACE    (1ULL << 1)

/*
 * Where mapping requests go: the vhost-user back-end channel in the
 * daemon, a fake in the tests.  The calls wait for the front-end's answer.
 */
typedef struct VfsdDaxBackend {
    bool (*available)(void *opaque);
    bool (*can_replace)(void *opaque);
    bool (*map)(void *opaque, uint64_t fd_offset, uint64_t shm_offset,
                uint64_t len, uint64_t flags, int fd);
    bool (*unmap)(void *opaque, uint64_t shm_offset, uint64_t len);
    /*
     * Optional: queue an unmap without waiting for the front-end, which
     * handles it before any map sent after it
     */
    bool (*unmap_nowait)(void *opaque, uint64_t shm_offset, uint64_t len);
    /*
     * Optional: whether the front-end restores a migrated window (it
     * agreed to VHOST_USER_PROTOCOL_F_SHMEM_MIGRATE, so it serves our map
     * requests while it waits for CHECK_DEVICE_STATE); NULL: it does not
     */
    bool (*can_migrate)(void *opaque);
    /*
     * Optional: takes @lock, the window's or an inode's setup lock,
     * whose holder may be waiting for the front-end; without it,
     * g_mutex_lock()
     */
    void (*lock)(void *opaque, GMutex *lock);
    void *opaque;
} VfsdDaxBackend;

/* One live mapping of a file range into the window */
typedef struct VfsdDaxMap {
    uint64_t moffset;
    uint64_t len;
    uint64_t foffset;
    /*
     * How much of the range, from moffset on, the front-end maps: what
     * the file backs, up to the page that holds its end (len at most).
     */
    uint64_t mapped;
    bool writable;
    VfsdInode *inode;           /* holds a reference */
    /*
     * Removed by the guest but left mapped until a map takes the range
     * over or the unmap delay runs out: see "Lazy unmaps" in dax.c.
     */
    bool released;
    int64_t released_at;        /* vfsd_stats_now() clock */
    GList released_link;        /* in VfsdDax's queue, oldest first */
    /*
     * A SETUPMAPPING in flight: reserved the range, which the front-end
     * is mapping now (pending, @mapped bytes), or replaces or unmaps this
     * mapping (busy).  Nothing else touches the range meanwhile: see
     * "The map path" in dax.c.
     */
    bool pending;
    bool busy;
} VfsdDaxMap;

VfsdDax *vfsd_dax_new(const VfsdDaxBackend *be);
/*
 * Whether the front-end can map all of a file of @size bytes: upstream
 * QEMU maps only files of whole pages, so only those get per-inode DAX.
 */
bool vfsd_dax_size_mappable(VfsdFs *fs, uint64_t size);
void vfsd_dax_free(VfsdDax *dax);
/*
 * The policy (--dax-policy): whether the guest is to map @inode, whose
 * attributes are @stx, through the window (VfsdAttr.dax).  @entry: for a
 * new entry (LOOKUP, READDIRPLUS, CREATE...), where the guest decides how
 * it accesses the inode; only there may the policy read the file.
 */
bool vfsd_dax_wanted(VfsdFs *fs, VfsdInode *inode, const struct statx *stx,
                     bool entry);
bool vfsd_dax_available(VfsdFs *fs);

/*
 * SETUPMAPPING: @len bytes of @nodeid's file from @foffset at @moffset
 * of the window, writable or not; the guest sends no file handle that
 * could be used (see setup_open()).  REMOVEMAPPING: @count ranges.
 */
int vfsd_op_setupmapping(VfsdFs *fs, uint64_t nodeid, uint64_t foffset,
                         uint64_t len, uint64_t moffset, bool writable);
int vfsd_op_removemapping(VfsdFs *fs, const VfsdDaxRange *ranges,
                          uint32_t count);

/* FUSE_DESTROY: unmaps everything */
/*
 * Lazy unmaps: ranges the guest removes stay mapped for up to @delay_ms,
 * and vfsd_dax_flush() is to run whenever vfsd_dax_flush_fd() (a timerfd)
 * is readable.  Off (fd -1) unless started.
 */
bool vfsd_dax_lazy_start(VfsdDax *dax, unsigned int delay_ms, char **err);
int vfsd_dax_flush_fd(VfsdDax *dax);
void vfsd_dax_flush(VfsdFs *fs);

void vfsd_dax_reset(VfsdFs *fs);
/* Disconnect: the front-end dropped the mappings itself */
void vfsd_dax_forget_all(VfsdFs *fs);
/* Number of live mappings, for tests */
unsigned int vfsd_dax_count(VfsdFs *fs);

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
 * Migration with a live window (VHOST_USER_PROTOCOL_F_SHMEM_MIGRATE).
 * The source writes its mapping table into its state with
 * vfsd_dax_save().  The destination checks a table with vfsd_dax_load(),
 * which maps nothing: the front-end may be busy writing the rest of the
 * state and serve no map request meanwhile.  vfsd_dax_restore() then maps
 * every range through the front-end, once the whole state is read and
 * before the front-end is told it was taken (CHECK_DEVICE_STATE).  The
 * table names inodes by the guest's node ids, so the inodes must have
 * been restored before vfsd_dax_load().  With nothing mapped,
 * vfsd_dax_save() writes nothing at all.  Any range that cannot be mapped
 * again fails the migration, whatever --migration-on-error says: the
 * guest would read zeros where its file was.
 */
bool vfsd_dax_save(VfsdFs *fs, VfsdMigWriter *w, char **err);
bool vfsd_dax_load(VfsdFs *fs, VfsdMigReader *r, char **err);
bool vfsd_dax_restore(VfsdFs *fs, char **err);
/* Drops a table loaded but not restored (a migration that failed) */
void vfsd_dax_load_cancel(VfsdFs *fs);

#endif /* VIRTIOFSD_DAX_H */

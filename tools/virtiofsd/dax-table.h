/*
 * virtiofsd: the DAX window's table, as the window's files share it
 *
 * The window is dax.c (the guest's requests: SETUPMAPPING,
 * REMOVEMAPPING, the lazy unmaps, the end of a session) and the files
 * below it: dax-resize.c (mappings that follow their files' sizes,
 * --watch-truncate), dax-migrate.c (the table in a live migration's
 * state) and dax-policy.c (which files the guest maps, --dax-policy).
 * This header holds what they share: the window, its table of mappings,
 * what it knows of an inode, and dax-table.c's functions that read and
 * change them.  The rest of the daemon includes dax.h only.
 *
 * Lock order, outer first (fs-types.h has the daemon's whole order):
 *
 *   VfsdDaxInode.setup_lock  held by a SETUPMAPPING of the inode from its
 *                            reservation to its record, front-end round
 *                            trip included, without VfsdDax.lock
 *   VfsdDax.lock             the window's ("lock" below); held across the
 *                            front-end round trips of resizes
 *
 * Both are taken with vfsd_dax_lock_mutex(), through the back-end, which
 * lets its own locks go while it waits (dax_lock() in vhost-dax.c).  A
 * field shared between threads says which lock guards it ("under lock")
 * or that it is atomic; the others are set up before the first request.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_DAX_TABLE_H
#define VIRTIOFSD_DAX_TABLE_H

#include "dax-backend.h"
#include "fs-types.h"

/* Offsets and lengths must be page aligned, as INIT announces */
#define VFSD_DAX_ALIGN ((uint64_t)VFSD_PAGE_SIZE)

/*
 * The window.  lock (see the lock order in fs-types.h) guards what is
 * marked so; the rest is set up before the first request and not
 * changed after.
 */
struct VfsdDax {
    GMutex lock;
    GTree *maps;                /* under lock: &moffset -> VfsdDaxMap */
    VfsdDaxBackend be;
    /* --watch-truncate: inotify fd, -1 when off */
    int watch_fd;
    /*
     * Under lock: wd -> number of inodes sharing it: inotify has one
     * watch per host inode, and a file reached through two mounts is two
     * of our inodes.
     */
    GHashTable *wds;
    /*
     * inotify watches count against a limit of the user we run as, which
     * the host's other programs need too: the guest decides how many
     * files it maps, so it must not decide how many watches we take.
     */
    unsigned int max_watches;
    bool watch_full_warned;     /* under lock */
    /* Lazy unmaps: a timerfd (-1 when off), and the ranges kept */
    int flush_fd;
    int64_t unmap_delay_ns;
    GQueue released;            /* under lock: VfsdDaxMap, by released_at */
    /* Under lock: host files our truncates are under way on */
    GArray *truncating;         /* VfsdDaxFileId */
    /*
     * Under lock: the ranges SETUPMAPPINGs reserved and are mapping now,
     * outside the lock (VfsdDaxMap, pending).  Not in @maps: one may
     * replace a mapping there at the same window offset.
     */
    GPtrArray *pending;
    /* Under lock: a migrated table, not mapped yet (VfsdDaxSaved) */
    GArray *restoring;
};

typedef struct VfsdDaxFileId {
    dev_t dev;
    ino_t ino;
    uint64_t size;              /* what the truncate makes it */
} VfsdDaxFileId;

/*
 * What the window knows of an inode: its mappings, the size they follow
 * and the watch on its file.  Made the first time the inode is mapped,
 * and freed with the inode (plain data).  VfsdDax.lock guards what is
 * marked so; maps and size are also read without it, atomically.
 */
struct VfsdDaxInode {
    gint maps;                  /* atomic, changed under lock: mappings */
    int wd;                     /* under lock: inotify watch, 0: none */
    /* Under lock, read atomically: the size the mappings follow */
    uint64_t size;
    /*
     * Held by a SETUPMAPPING of the inode from before it reserves its
     * range until it is recorded or rolled back, front-end round trip
     * included: one file's ranges are set up one at a time, in the
     * order their requests take it.  Zeroed, as a static GMutex is: on
     * Linux it holds nothing to free, so that the struct stays plain data.
     */
    GMutex setup_lock;
};

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

/* What a SETUPMAPPING asks: @len bytes of the file at @foffset */
typedef struct VfsdDaxSetup {
    uint64_t foffset;
    uint64_t len;
    uint64_t moffset;
} VfsdDaxSetup;

/* Taking the window's lock, or an inode's setup_lock */
void vfsd_dax_lock_mutex(VfsdDax *dax, GMutex *lock);
void vfsd_dax_lock(VfsdDax *dax);

/* The front-end's limits, and what of a range a file backs */
bool vfsd_dax_upstream(VfsdDax *dax);
uint64_t vfsd_dax_keep(VfsdDax *dax, uint64_t foffset, uint64_t len,
                       uint64_t size);
bool vfsd_dax_range_ok(uint64_t off, uint64_t len);

/* What the window knows of an inode */
VfsdDaxInode *vfsd_dax_of(VfsdInode *inode);
VfsdDaxInode *vfsd_dax_of_new(VfsdInode *inode);
bool vfsd_dax_inode_mapped(VfsdInode *inode);
void vfsd_dax_inode_watch(VfsdDax *dax, VfsdInode *inode);
void vfsd_dax_inode_unwatch(VfsdDax *dax, VfsdInode *inode);
uint64_t vfsd_dax_inode_size(VfsdInode *inode);
void vfsd_dax_inode_set_size(VfsdInode *inode, uint64_t size);

/* The table, lock held */
GPtrArray *vfsd_dax_all_maps(VfsdDax *dax);
void vfsd_dax_map_free(VfsdDax *dax, VfsdDaxMap *m);
void vfsd_dax_free_maps(VfsdDax *dax, GPtrArray *maps);
bool vfsd_dax_send_unmaps(VfsdDax *dax, GPtrArray *maps, bool wait);
bool vfsd_dax_unmap_maps(VfsdDax *dax, GPtrArray *maps, bool wait);
int vfsd_dax_setup_map(VfsdFs *fs, const VfsdDaxSetup *in,
                       uint64_t keep, uint64_t flags, int fd);
void vfsd_dax_setup_record(VfsdFs *fs, VfsdInode *inode, VfsdDaxMap *m,
                           GPtrArray *old, uint64_t size);

#endif /* VIRTIOFSD_DAX_TABLE_H */

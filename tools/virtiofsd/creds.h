/*
 * virtiofsd: acting with the guest's credentials
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_CREDS_H
#define VIRTIOFSD_CREDS_H

#include "fs-types.h"

typedef struct VfsdSavedCreds {
    uid_t uid;
    gid_t gid;
    bool supp;                  /* a supplementary group was set */
    bool switched;              /* false: nothing to restore */
} VfsdSavedCreds;
bool vfsd_creds_init(char **err);
int vfsd_creds_switch(const VfsdCtx *ctx, VfsdSavedCreds *old);
void vfsd_creds_restore(const VfsdSavedCreds *old);

/*
 * Around a write or truncate the guest asked to clear setuid/setgid for
 * (FUSE_HANDLE_KILLPRIV_V2): the host kernel then clears them as it would
 * for @ctx's caller.  vfsd_kill_priv_end() is safe after a failed begin.
 */
typedef struct VfsdKillPriv {
    bool fsetid_dropped;
    bool gid_set;
    gid_t gid;                  /* the thread's fsgid before */
} VfsdKillPriv;
int vfsd_kill_priv_begin(const VfsdCtx *ctx, VfsdKillPriv *saved);
void vfsd_kill_priv_end(const VfsdKillPriv *saved);
/*
 * Where the host kernel would drop security.capability (a write, a
 * truncation, a change of owner), drop the name --xattrmap stores the
 * guest's under instead; nothing without such a map.  @fd is open on the
 * file, or -1 for @inode's O_PATH fd; with no @inode, @fd is a regular
 * file.  Returns 0 or -errno.
 */
int vfsd_drop_mapped_capability(VfsdFs *fs, VfsdInode *inode, int fd);

/*
 * Sets the creation's security label (@ctx->label_name, through
 * --xattrmap) on @fd, a new file not yet under its name.  0 or -errno.
 */
int vfsd_creds_set_label(VfsdFs *fs, const VfsdCtx *ctx, int fd);

/*
 * A name to make a labelled file under before it gets its own: unique
 * in the daemon, @attempt makes another one.  To be g_free'd.
 */
char *vfsd_creds_label_tmp_name(unsigned int attempt);
bool vfsd_umask_enter(VfsdFs *fs, mode_t *mode, mode_t umask);
void vfsd_umask_leave(VfsdFs *fs, bool entered);


#endif /* VIRTIOFSD_CREDS_H */

/*
 * virtiofsd: acting with the guest's credentials
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <cap-ng.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "creds.h"
#include "log.h"
#include "xattrmap.h"

/*
 * Files created for the guest must never pick up a supplementary group of
 * the daemon: the kernel keeps the setgid bit of a file made in a setgid
 * directory when the creator is in its group (CVE-2022-0358).  Called
 * before any thread exists: setgroups() covers the whole process.
 */
bool vfsd_creds_init(char **err)
{
    if (geteuid() == 0 && setgroups(0, NULL) < 0) {
        *err = g_strdup_printf("cannot drop supplementary groups: %s",
                               g_strerror(errno));
        return false;
    }
    return true;
}

/*
 * setfsuid()/setfsgid() through syscall(): they act on the calling thread
 * only, unlike glibc's setuid() family that changes every thread.  They
 * cannot report errors, so the switch is checked by reading back.
 * The daemon dropped its supplementary groups at startup, so a file made
 * here never inherits a group the guest user is not in (CVE-2022-0358).
 */
/* Back to no supplementary group (see vfsd_creds_init()) */
static void drop_supp(const VfsdSavedCreds *old)
{
    if (old->supp && syscall(SYS_setgroups, 0, NULL) < 0) {
        vfsd_err("cannot drop a guest's supplementary group: %s",
                 g_strerror(errno));
    }
}

/*
 * What a request thread acts as between requests: the daemon's ids and
 * its own fsuid and fsgid, which every switch restores.  Learnt once per
 * thread (nothing changes them once threads serve), so that a creation
 * that acts as the daemon anyway costs no system call.
 */
typedef struct VfsdRestCreds {
    bool known;
    uid_t euid, fsuid;
    gid_t egid, fsgid;
} VfsdRestCreds;

static __thread VfsdRestCreds rest;

static const VfsdRestCreds *rest_creds(void)
{
    if (!rest.known) {
        rest.euid = geteuid();
        rest.egid = getegid();
        rest.fsuid = syscall(SYS_setfsuid, -1);
        rest.fsgid = syscall(SYS_setfsgid, -1);
        rest.known = true;
    }
    return &rest;
}

int vfsd_creds_switch(const VfsdCtx *ctx, VfsdSavedCreds *old)
{
    const VfsdRestCreds *r = rest_creds();
    /*
     * As in the Rust virtiofsd, the guest's root acts as the daemon: the
     * same for a daemon that is root, and for one that is not (started
     * by a user, or in the user namespace it made, where its own ids may
     * be the only ones) the one identity it has for whoever owns the
     * guest.
     */
    uid_t uid = ctx->uid == 0 ? r->euid : ctx->uid;
    gid_t gid = ctx->gid == 0 ? r->egid : ctx->gid;

    /*
     * A guest id outside --uid-map/--gid-map has no host identity to act
     * as.  Borrowing one (say the overflow id) would hand files to
     * whoever owns it on the host.
     */
    if (ctx->uid == VFSD_NO_ID || ctx->gid == VFSD_NO_ID) {
        return -EPERM;
    }
    /*
     * The one supplementary group the guest vouches for: the caller is
     * in the parent directory's group, as the host kernel must see to
     * let it create there and to keep a setgid bit it asks for.  The
     * raw system call sets it for this thread only; a daemon that may
     * not (no CAP_SETGID) acts without it, as before.
     */
    old->supp = false;
    old->switched = false;
    /* Already what the caller acts as: setting it again changes nothing */
    if (uid == r->fsuid && gid == r->fsgid &&
        (ctx->supp_gid == VFSD_NO_ID || ctx->supp_gid == ctx->gid)) {
        return 0;
    }
    old->switched = true;
    if (ctx->supp_gid != VFSD_NO_ID && ctx->supp_gid != ctx->gid) {
        old->supp = syscall(SYS_setgroups, 1, &ctx->supp_gid) == 0;
    }
    old->gid = syscall(SYS_setfsgid, gid);
    if ((gid_t)syscall(SYS_setfsgid, -1) != gid) {
        syscall(SYS_setfsgid, old->gid);
        drop_supp(old);
        return -EPERM;
    }
    old->uid = syscall(SYS_setfsuid, uid);
    if ((uid_t)syscall(SYS_setfsuid, -1) != uid) {
        syscall(SYS_setfsuid, old->uid);
        syscall(SYS_setfsgid, old->gid);
        drop_supp(old);
        return -EPERM;
    }
    return 0;
}

void vfsd_creds_restore(const VfsdSavedCreds *old)
{
    if (!old->switched) {
        return;
    }
    syscall(SYS_setfsuid, old->uid);
    syscall(SYS_setfsgid, old->gid);
    drop_supp(old);
}

/*
 * With FUSE_HANDLE_KILLPRIV_V2 the guest leaves clearing setuid/setgid on
 * write and truncate to us.  The host kernel clears them for a writer
 * without CAP_FSETID, so the thread gives that capability up for the
 * operation; and it keeps a setgid bit without group-execute (a
 * mandatory-locking mark, not a privilege) for a writer in the file's
 * group, which it judges by the thread's fsgid: as root's, the bit would
 * go whoever wrote.  So the thread takes the caller's group too, and
 * keeps our fsuid, so that no permission check changes.  The guest sends
 * no supplementary groups here, and the daemon has none: a caller in the
 * file's group through one of those loses the bit.  A caller whose group
 * has no host id keeps the daemon's.
 */
int vfsd_kill_priv_begin(const VfsdCtx *ctx, VfsdKillPriv *saved)
{
    *saved = (VfsdKillPriv) { 0 };
    if (ctx->gid != VFSD_NO_ID) {
        saved->gid = syscall(SYS_setfsgid, ctx->gid);
        saved->gid_set = true;
        /*
         * A daemon that may not change its group (no CAP_SETGID) writes
         * in its own, as before: a worse guess at the caller's group
         * than it could make, not a reason to fail the write.
         */
        if ((gid_t)syscall(SYS_setfsgid, -1) != ctx->gid) {
            syscall(SYS_setfsgid, saved->gid);
            saved->gid_set = false;
        }
    }
    if (capng_get_caps_process() < 0) {
        vfsd_kill_priv_end(saved);
        return -EPERM;
    }
    if (!capng_have_capability(CAPNG_EFFECTIVE, CAP_FSETID)) {
        return 0;
    }
    if (capng_update(CAPNG_DROP, CAPNG_EFFECTIVE, CAP_FSETID) < 0 ||
        capng_apply(CAPNG_SELECT_CAPS) < 0) {
        vfsd_kill_priv_end(saved);
        return -EPERM;
    }
    saved->fsetid_dropped = true;
    return 0;
}

void vfsd_kill_priv_end(const VfsdKillPriv *saved)
{
    if (saved->fsetid_dropped &&
        (capng_update(CAPNG_ADD, CAPNG_EFFECTIVE, CAP_FSETID) < 0 ||
         capng_apply(CAPNG_SELECT_CAPS) < 0)) {
        vfsd_err("cannot restore CAP_FSETID");
    }
    if (saved->gid_set) {
        syscall(SYS_setfsgid, saved->gid);
    }
}

/*
 * With the guest's security.capability stored under another name, the
 * host kernel no longer drops it where it drops the real one (a write,
 * a truncation, a change of owner of a regular file), and a guest user
 * could change a file that keeps its capabilities (CVE-2021-20263).  So
 * the daemon drops it there, as the Rust daemon does, and before every
 * setxattr as it does too.  @fd is open on the file, or -1 to reach it
 * through the O_PATH fd of @inode; with no @inode, @fd is a regular file.
 *
 * It sits here, next to vfsd_kill_priv_begin(), the other privilege a write
 * takes away, so that fs-entry.c, fs-file.c and fs-xattr.c all reach it
 * below them rather than one operation file calling into another.
 */
int vfsd_drop_mapped_capability(VfsdFs *fs, VfsdInode *inode, int fd)
{
    const char *cap;
    char procname[32];
    int ret;

    if (!fs->opts->xattrmap || (inode && inode->type != S_IFREG)) {
        return 0;
    }
    cap = vfsd_xattrmap_capability_name(fs->opts->xattrmap);
    if (!cap) {
        return 0;
    }
    if (fd >= 0) {
        ret = fremovexattr(fd, cap);
    } else {
        snprintf(procname, sizeof(procname), "%d", inode->fd);
        ret = removexattr(procname, cap);
    }
    if (ret < 0 && errno != ENODATA && errno != ENOTSUP) {
        return -errno;
    }
    return 0;
}

/*
 * A creation's security label, like the capability above, is reached by
 * fs-entry.c and fs-file.c from here, below them.
 */
int vfsd_creds_set_label(VfsdFs *fs, const VfsdCtx *ctx, int fd)
{
    char host[VFSD_XATTR_NAME_MAX + 1];
    const char *name = ctx->label_name;
    char procname[32];
    unsigned int unmatched;
    int ret;

    if (fs->opts->xattrmap) {
        unmatched = vfsd_xattrmap_unmatched(fs->opts->xattrmap);
        ret = vfsd_xattrmap_to_host(fs->opts->xattrmap, VFSD_XATTR_OP_SET,
                                    name, host);
        if (vfsd_xattrmap_unmatched(fs->opts->xattrmap) != unmatched) {
            vfsd_guest_error("--xattrmap: no rule matches the security "
                             "label's name '%s'", name);
        }
        if (ret) {
            return ret;
        }
        name = host;
    }
    /* By name, so that an O_PATH fd (a symlink, a device) will do */
    snprintf(procname, sizeof(procname), "%d", fd);
    if (setxattr(procname, name, ctx->label, ctx->label_size,
                 XATTR_CREATE) < 0) {
        return -errno;
    }
    return 0;
}

char *vfsd_creds_label_tmp_name(unsigned int attempt)
{
    static gint next;

    return g_strdup_printf(".virtiofsd-label.%d.%u.%u", (int)getpid(),
                           (unsigned int)g_atomic_int_add(&next, 1),
                           attempt);
}

/*
 * Who applies the guest's umask to a new file.  Normally the guest did
 * already (the daemon runs with umask 0), and masking again is harmless.
 * With FUSE_DONT_MASK (negotiated with --posix-acl) the guest sends the
 * mode unmasked, because a default ACL on the parent directory must
 * replace the umask, not add to it: only the host kernel knows whether
 * there is one at the moment of the creation, so the creation runs under
 * the guest's umask and the host decides.  umask() is per process, hence
 * the lock until vfsd_umask_leave(); @mode keeps its file type bits.
 */
bool vfsd_umask_enter(VfsdFs *fs, mode_t *mode, mode_t umask_bits)
{
    if (!(fs->conn.flags & FUSE_DONT_MASK)) {
        *mode &= ~(umask_bits & 07777);
        return false;
    }
    g_mutex_lock(&fs->umask_lock);
    umask(umask_bits & 0777);
    return true;
}

void vfsd_umask_leave(VfsdFs *fs, bool entered)
{
    if (entered) {
        umask(0);
        g_mutex_unlock(&fs->umask_lock);
    }
}

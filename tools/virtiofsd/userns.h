/*
 * virtiofsd: the user namespace an unprivileged daemon sandboxes itself in
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_USERNS_H
#define VIRTIOFSD_USERNS_H

#include <stdbool.h>
#include <stdint.h>

#include "idmap.h"

/*
 * For an unprivileged --sandbox=namespace, as the Rust virtiofsd does
 * it: the calling process moves into a new user namespace, where it holds
 * every capability, so that the namespace sandbox can be built inside.
 * The namespace's maps are @uids and @gids (--uid-map/--gid-map), or,
 * for a kind of id without one, the caller's own id mapped to itself.
 * A map that is the caller's own id once is written directly; any other
 * goes through newuidmap(1)/newgidmap(1), which allow the subordinate ids
 * /etc/subuid and /etc/subgid give the user: a child forked before the
 * unshare runs them on this process once it is in the namespace.
 * Supplementary groups are dropped where the namespace allows it.
 * Returns false with a message in @err (to be g_free'd) saying what is
 * missing: the helper, the user's subordinate ids, their coverage of a
 * range.
 */
bool vfsd_userns_enter(const VfsdIdMap *uids, const VfsdIdMap *gids,
                       char **err);

/*
 * What newuidmap(1) or newgidmap(1) will check of @m (its ranges' host
 * side) for user @user, whose own id is @own: every range is @own once,
 * or lies within the subordinate ids @subid_file (/etc/subuid or
 * /etc/subgid) gives @user, by name or by number.  @opt names the option
 * in the message left in @err (to be g_free'd) when it does not.
 */
bool vfsd_userns_subids_cover(const char *subid_file, const char *user,
                              uint32_t own, const VfsdIdMap *m,
                              const char *opt, char **err);

#endif /* VIRTIOFSD_USERNS_H */

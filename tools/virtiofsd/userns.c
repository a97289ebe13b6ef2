/*
 * virtiofsd: the user namespace an unprivileged daemon sandboxes itself in
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "userns.h"

/* One kind of id, and how its map gets into the new namespace */
typedef struct IdKind {
    const char *opt;            /* --uid-map */
    const char *name;           /* uid */
    const char *helper;         /* newuidmap */
    const char *subid_file;     /* /etc/subuid */
    uint32_t own;               /* our id of this kind, outside */
    VfsdIdMap map;              /* as given, or own -> own */
    bool direct;                /* own id once: no helper needed */
} IdKind;

/* The one map an unprivileged process may write itself: its own id, once */
static bool own_range(const VfsdIdMap *m, uint32_t own)
{
    return m->n == 1 && m->r[0].host == own && m->r[0].count == 1;
}

/* Without a map, as in the Rust daemon: our own id, seen as itself */
static void plan(IdKind *k, const VfsdIdMap *given)
{
    k->map = *given;
    if (!k->map.n) {
        k->map.n = 1;
        k->map.r[0] = (VfsdIdRange) { k->own, k->own, 1 };
    }
    k->direct = own_range(&k->map, k->own);
}

typedef struct SubRange {
    uint64_t start, end;
} SubRange;

/* The lines of a subordinate id file that are @user's, by name or id */
static GArray *subids_of(const char *text, const char *user, uint32_t own)
{
    GArray *mine = g_array_new(false, false, sizeof(SubRange));
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    unsigned int i;

    for (i = 0; lines[i]; i++) {
        g_auto(GStrv) f = g_strsplit(lines[i], ":", -1);
        guint64 owner, start, count;
        bool by_id;

        if (g_strv_length(f) != 3 ||
            !g_ascii_string_to_unsigned(f[1], 10, 0, UINT32_MAX, &start,
                                        NULL) ||
            !g_ascii_string_to_unsigned(f[2], 10, 1, UINT32_MAX, &count,
                                        NULL)) {
            continue;
        }
        by_id = g_ascii_string_to_unsigned(f[0], 10, 0, UINT32_MAX, &owner,
                                           NULL);
        if (!strcmp(f[0], user) || (by_id && owner == own)) {
            SubRange r = { start, start + count };

            g_array_append_val(mine, r);
        }
    }
    return mine;
}

/* Whether [start, end) lies in the union of @mine (which may adjoin) */
static bool covered(GArray *mine, uint64_t start, uint64_t end)
{
    unsigned int i;
    bool moved = true;

    while (start < end && moved) {
        moved = false;
        for (i = 0; i < mine->len; i++) {
            SubRange *r = &g_array_index(mine, SubRange, i);

            if (r->start <= start && start < r->end) {
                start = r->end;
                moved = true;
            }
        }
    }
    return start >= end;
}

static char *describe(GArray *mine)
{
    GString *s = g_string_new(NULL);
    unsigned int i;

    for (i = 0; i < mine->len; i++) {
        SubRange *r = &g_array_index(mine, SubRange, i);

        g_string_append_printf(s, "%s%" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT,
                               i ? ", " : "", r->start, r->end - 1);
    }
    return g_string_free(s, false);
}

bool vfsd_userns_subids_cover(const char *subid_file, const char *user,
                              uint32_t own, const VfsdIdMap *m,
                              const char *opt, char **err)
{
    const char *kind = g_str_has_suffix(subid_file, "subgid") ? "gid" : "uid";
    g_autofree char *text = NULL;
    g_autofree char *have = NULL;
    g_autoptr(GError) gerr = NULL;
    g_autoptr(GArray) mine = NULL;
    unsigned int i;

    if (own_range(m, own)) {
        return true;
    }
    if (!g_file_get_contents(subid_file, &text, NULL, &gerr)) {
        *err = g_strdup_printf("%s: the helper maps only subordinate %ss, "
                               "and %s cannot be read: %s", opt, kind,
                               subid_file, gerr->message);
        return false;
    }
    mine = subids_of(text, user, own);
    for (i = 0; i < m->n; i++) {
        const VfsdIdRange *r = &m->r[i];

        /* The helper lets anyone map their own id (newuidmap(1)) */
        if (r->count == 1 && r->host == own) {
            continue;
        }
        if (!mine->len) {
            *err = g_strdup_printf("%s=:%u:%u:%u:: user %s has no "
                                   "subordinate %ss in %s, and only those "
                                   "can be mapped without root (give it "
                                   "some: usermod --add-sub%ss FIRST-LAST "
                                   "%s)", opt, r->guest, r->host, r->count,
                                   user, kind, subid_file, kind, user);
            return false;
        }
        if (!covered(mine, r->host, (uint64_t)r->host + r->count)) {
            have = describe(mine);
            *err = g_strdup_printf("%s=:%u:%u:%u:: host %ss %u-%u are not "
                                   "all subordinate %ss of user %s in %s, "
                                   "which gives it %s", opt, r->guest,
                                   r->host, r->count, kind, r->host,
                                   (uint32_t)(r->host + r->count - 1), kind,
                                   user, subid_file, have);
            return false;
        }
    }
    return true;
}

/* The helper @k needs, named where it is missing */
static bool find_helper(const IdKind *k, char **err)
{
    g_autofree char *path = g_find_program_in_path(k->helper);

    if (!path) {
        *err = g_strdup_printf("%s: mapping %ss other than your own (%u, "
                               "once) without root needs %s(1), which is "
                               "not installed or not on PATH (Debian and "
                               "Ubuntu: package uidmap)", k->opt, k->name,
                               k->own, k->helper);
        return false;
    }
    return true;
}

/*
 * What makes the helpers' work possible, checked here where what is
 * missing can be named: the helper, the user's name (the helpers look
 * the caller up by name), its subordinate ids.
 */
static bool check_helpers(const IdKind *kinds, char **err)
{
    struct passwd *pw;
    int i;

    for (i = 0; i < 2; i++) {
        if (!kinds[i].direct && !find_helper(&kinds[i], err)) {
            return false;
        }
    }
    pw = getpwuid(kinds[0].own);
    if (!pw) {
        *err = g_strdup_printf("--uid-map/--gid-map: newuidmap(1) and "
                               "newgidmap(1) need a user name for uid %u, "
                               "which has none", kinds[0].own);
        return false;
    }
    for (i = 0; i < 2; i++) {
        if (!kinds[i].direct &&
            !vfsd_userns_subids_cover(kinds[i].subid_file, pw->pw_name,
                                      kinds[i].own, &kinds[i].map,
                                      kinds[i].opt, err)) {
            return false;
        }
    }
    return true;
}

static char *write_proc(pid_t pid, const char *file, const char *text)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/%s", (int)pid, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    ssize_t len = strlen(text);
    char *msg = NULL;

    if (fd < 0 || write(fd, text, len) != len) {
        msg = g_strdup_printf("cannot write %s: %s", path, strerror(errno));
    }
    if (fd >= 0) {
        close(fd);
    }
    return msg;
}

/* Returns NULL, or what went wrong (to be g_free'd) */
static char *write_map(const IdKind *k, pid_t pid)
{
    g_autofree char *line = g_strdup_printf("%u %u 1\n", k->map.r[0].guest,
                                            k->own);
    char *msg;

    if (!strcmp(k->name, "uid")) {
        return write_proc(pid, "uid_map", line);
    }
    /* The kernel wants setgroups denied before an unprivileged gid_map */
    msg = write_proc(pid, "setgroups", "deny");
    return msg ? msg : write_proc(pid, "gid_map", line);
}

/* Returns NULL, or what went wrong (to be g_free'd) */
static char *run_helper(const IdKind *k, pid_t pid)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GError) gerr = NULL;
    g_autofree char *out = NULL;
    unsigned int i;
    int status;

    g_ptr_array_add(argv, g_strdup(k->helper));
    g_ptr_array_add(argv, g_strdup_printf("%d", (int)pid));
    for (i = 0; i < k->map.n; i++) {
        g_ptr_array_add(argv, g_strdup_printf("%u", k->map.r[i].guest));
        g_ptr_array_add(argv, g_strdup_printf("%u", k->map.r[i].host));
        g_ptr_array_add(argv, g_strdup_printf("%u", k->map.r[i].count));
    }
    g_ptr_array_add(argv, NULL);
    if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL,
                      G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL,
                      NULL, NULL, NULL, &out, &status, &gerr)) {
        return g_strdup_printf("%s: cannot run %s: %s", k->opt, k->helper,
                               gerr->message);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        g_strstrip(out);
        return g_strdup_printf("%s: %s refused the map: %s", k->opt,
                               k->helper, *out ? out : "no reason given");
    }
    return NULL;
}

/*
 * The mapping child.  Only a process outside the namespace can write
 * maps that name ids beyond its own: newuidmap(1) gets its privilege from
 * being set-user-ID root, which counts only where root is mapped, never
 * in a namespace still without a map.  So this child, forked before the
 * unshare, waits on @sock until the parent (@target) is in the new
 * namespace, maps it, and reports on @sock: nothing, or why it could not.
 */
static G_NORETURN void map_child(const IdKind *kinds, pid_t target, int sock)
{
    char *msg = NULL;
    ssize_t n;
    char c;
    int i;

    do {
        n = read(sock, &c, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) {
        _exit(1);               /* the parent gave up before the unshare */
    }
    for (i = 0; i < 2 && !msg; i++) {
        msg = kinds[i].direct ? write_map(&kinds[i], target)
                              : run_helper(&kinds[i], target);
    }
    if (msg) {
        n = send(sock, msg, strlen(msg), MSG_NOSIGNAL);
        _exit(n < 0 ? 2 : 1);
    }
    _exit(0);
}

/* All the child reports, until it hangs up */
static char *read_report(int sock)
{
    g_autoptr(GString) s = g_string_new(NULL);
    char buf[512];
    ssize_t n;

    while ((n = read(sock, buf, sizeof(buf))) != 0) {
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            break;
        }
        g_string_append_len(s, buf, n);
    }
    return g_string_free(g_steal_pointer(&s), false);
}

static void wait_child(pid_t pid, int *status)
{
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
        continue;
    }
}

/* What an unprivileged daemon cannot do, said once at startup */
static void warn_limits(const IdKind *kinds)
{
    struct rlimit rl;

    if (kinds[0].direct && kinds[1].direct &&
        kinds[0].map.r[0].guest != 0) {
        vfsd_warn("not root: the sandbox is in a user namespace of its "
                  "own where uid %u and gid %u are the only ids: the "
                  "guest's root acts as them, other guest users cannot "
                  "create files (EPERM), and host files of other owners "
                  "show as 65534", kinds[0].own, kinds[1].own);
    } else {
        vfsd_info("not root: the sandbox is in a user namespace with the "
                  "--uid-map/--gid-map ids: guest ids outside them cannot "
                  "create files (EPERM)");
    }
    /* Raising the hard limit takes CAP_SYS_RESOURCE of the host's */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max < 1000000) {
        vfsd_warn("not root: RLIMIT_NOFILE cannot go past its hard limit "
                  "of %llu, which bounds the files and (held by fds) the "
                  "inodes the guest keeps at once: ENFILE beyond",
                  (unsigned long long)rl.rlim_max);
    }
}

bool vfsd_userns_enter(const VfsdIdMap *uids, const VfsdIdMap *gids,
                       char **err)
{
    IdKind kinds[2] = {
        { "--uid-map", "uid", "newuidmap", "/etc/subuid", geteuid() },
        { "--gid-map", "gid", "newgidmap", "/etc/subgid", getegid() },
    };
    g_autofree char *report = NULL;
    pid_t target = getpid(), child;
    int sv[2], status, saved;

    plan(&kinds[0], uids);
    plan(&kinds[1], gids);
    if ((!kinds[0].direct || !kinds[1].direct) &&
        !check_helpers(kinds, err)) {
        return false;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        *err = g_strdup_printf("cannot create a socket pair: %s",
                               strerror(errno));
        return false;
    }
    child = fork();
    if (child < 0) {
        *err = g_strdup_printf("cannot fork the mapping child: %s",
                               strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return false;
    }
    if (child == 0) {
        close(sv[0]);
        map_child(kinds, target, sv[1]);
    }
    close(sv[1]);
    if (unshare(CLONE_NEWUSER) < 0) {
        saved = errno;
        close(sv[0]);
        wait_child(child, &status);
        *err = g_strdup_printf("--sandbox=namespace without root: cannot "
                               "create a user namespace: %s (are they "
                               "allowed? user.max_user_namespaces; else "
                               "use --sandbox=none)", strerror(saved));
        return false;
    }
    if (send(sv[0], "m", 1, MSG_NOSIGNAL) != 1) {
        saved = errno;
        close(sv[0]);
        wait_child(child, &status);
        *err = g_strdup_printf("the mapping child is gone: %s",
                               strerror(saved));
        return false;
    }
    report = read_report(sv[0]);
    close(sv[0]);
    wait_child(child, &status);
    if (*report || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        *err = g_strdup_printf("--sandbox=namespace without root: %s",
                               *report ? report
                                       : "the mapping child failed");
        return false;
    }
    /*
     * Files made for the guest must not pick up a group of ours
     * (CVE-2022-0358).  Where setgroups is denied (a gid_map written
     * without the helper) the groups cannot change, and are kept.
     */
    if (setgroups(0, NULL) < 0 && errno != EPERM) {
        *err = g_strdup_printf("cannot drop supplementary groups: %s",
                               strerror(errno));
        return false;
    }
    warn_limits(kinds);
    return true;
}

/*
 * virtiofsd: command line
 *
 * Two spellings are accepted: the current one (--shared-dir DIR
 * --cache never ...), and the "-o" list libvirt 9.0 still passes
 * (-o source=DIR,cache=X,sandbox=X,xattr,...).
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <cap-ng.h>
#include <errno.h>
#include <glib.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

#define VFSD_MAX_THREAD_POOL 1024
/* A range kept longer than this holds a file the guest is done with */
#define VFSD_MAX_DAX_UNMAP_DELAY 60000
/* A second of spinning per dry queue is already a core given away */
#define VFSD_MAX_POLL_US 1000000

/*
 * As the Rust daemon's: the negotiation modes tell libvirt that
 * --posix-acl and --security-label take =never|auto|always
 */
static const char capabilities[] =
    "{\n"
    "  \"type\": \"fs\",\n"
    "  \"features\": [\n"
    "    \"migrate-precopy\",\n"
    "    \"posix-acl-negotiation-mode\",\n"
    "    \"security-label-negotiation-mode\",\n"
    "    \"separate-options\"\n"
    "  ]\n"
    "}\n";

const char *vfsd_options_capabilities(void)
{
    return capabilities;
}

void vfsd_options_usage(const char *prog)
{
    printf("Usage: %s --socket-path=PATH | --fd=N  --shared-dir=DIR [options]\n"
           "\n"
           "  --socket-path=PATH        listen for the front-end on PATH\n"
           "  --socket-group=GROUP      group of the socket (a name or gid)\n"
           "  --fd=N                    the front-end's connection is fd N\n"
           "  --shared-dir=DIR          the directory to share\n"
           "  --cache=never|metadata|auto|always|adaptive   guest caching\n"
           "                            (auto; adaptive: as always, for as\n"
           "                            long as --adaptive-timeouts says)\n"
           "  --adaptive-timeouts=MIN:MAX[:FRACTION]   with --cache=adaptive,\n"
           "                            names and attributes are cached for\n"
           "                            FRACTION of the time the host left\n"
           "                            them unchanged, from MIN to MAX s\n"
           "                            (1:60:0.1): a host change shows in\n"
           "                            the guest within MAX s\n"
           "  --sandbox=namespace|chroot|none      (namespace)\n"
           "  --seccomp=kill|log|trap|none         (kill)\n"
           "                            what a call outside the system call\n"
           "                            filter does\n"
           "  --xattr, --no-xattr       extended attributes (off)\n"
           "  --xattrmap=RULES          translate extended attribute names\n"
           "                            (e.g. :map::user.virtiofs.:); turns\n"
           "                            --xattr on\n"
           "  --posix-acl[=never|auto|always]  POSIX ACLs, enforced by the\n"
           "                            guest; turns --xattr on (never;\n"
           "                            bare: always, the guest must have\n"
           "                            them; auto: if it has)\n"
           "  --security-label[=never|auto|always]  store the security\n"
           "                            label the guest sends with each\n"
           "                            creation on the new file; turns\n"
           "                            --xattr on (never; bare: always)\n"
           "  --posix-lock, --flock     pass POSIX/BSD locks to the host\n"
           "  --writeback               guest writeback cache\n"
           "  --announce-submounts      tell the guest about submounts (the\n"
           "                            default)\n"
           "  --no-announce-submounts   do not\n"
           "  --no-readdirplus          do not offer READDIRPLUS\n"
           "  --preserve-noatime        pass the guest's O_NOATIME on (off:\n"
           "                            dropped, so that opening a file the\n"
           "                            caller does not own cannot fail)\n"
           "  --inode-file-handles=never|prefer|mandatory  (prefer)\n"
           "                            hold the inodes the guest knows by\n"
           "                            file handle rather than by fd, so\n"
           "                            that they do not count against the\n"
           "                            fd limit (needs CAP_DAC_READ_SEARCH;\n"
           "                            prefer: fds where the file system or\n"
           "                            the privileges do not allow handles,\n"
           "                            and outside --sandbox=namespace;\n"
           "                            a process of their own opens them)\n"
           "  --inode-fd-cache=N        inodes held by handle that keep their\n"
           "                            fd once unused (default: a quarter\n"
           "                            of the fd limit; 0: none)\n"
           "  --modcaps=[+-]CAP[:[+-]CAP...]  add (+) or drop (-)\n"
           "                            capabilities, e.g. +sys_admin:-chown\n"
           "  --readonly                refuse every change\n"
           "  --no-killpriv-v2          do not offer FUSE_HANDLE_KILLPRIV_V2\n"
           "  --allow-direct-io         honour the guest's O_DIRECT (off:\n"
           "                            dropped, the host page cache serves)\n"
           "  --allow-mmap              let the guest mmap files with\n"
           "                            --cache=never (no DAX)\n"
           "  --watch-truncate          unmap the DAX ranges of files the\n"
           "                            host truncates (best effort)\n"
           "  --stats                   log per-request counts and service\n"
           "                            times when the session ends\n"
           "  --dax-policy=never|always|size:N|xattr|exec[:N]\n"
           "                            files with per-inode DAX (dax=inode)\n"
           "                            (size:2M; xattr: files carrying\n"
           "                            " VFSD_DAX_XATTR_NAME ";\n"
           "                            exec: executables, ELF objects and\n"
           "                            files of N (2M) bytes and more)\n"
           "  --tag=TAG                 the mount tag, for a front-end that\n"
           "                            reads the device's configuration\n"
           "                            from the back-end (upstream QEMU's\n"
           "                            vhost-user-test-device-pci)\n"
           "  --cache-size=SIZE         a DAX window of SIZE bytes (K/M/G/T)\n"
           "                            for such a front-end; a power of two\n"
           "                            from 2M to 1T\n"
           "  --dax-unmap-delay=MS      keep ranges the guest removes mapped\n"
           "                            until reused, at most MS ms (0:\n"
           "                            unmap at once, the default)\n"
           "  --uid-map=:NS:HOST:COUNT:, --gid-map=:NS:HOST:COUNT:\n"
           "                            the user namespace's map: ids NS..\n"
           "                            are host ids HOST..; others have\n"
           "                            none (repeatable)\n"
           "  --translate-uid=RULE, --translate-gid=RULE  (repeatable)\n"
           "                            map:G:H:N, guest:G:H:N, host:H:G:N,\n"
           "                            squash-guest:G:H:N, squash-host:H:G:N,\n"
           "                            forbid-guest:G:N; other ids pass\n"
           "  --migration-mode=find-paths|file-handles   how the source\n"
           "                            names each inode to the destination\n"
           "                            (find-paths)\n"
           "  --migration-on-error=abort|guest-error     what the\n"
           "                            destination does with a file it\n"
           "                            cannot find: fail the migration, or\n"
           "                            give the guest EIO there (abort)\n"
           "  --migration-verify-handles  find-paths: check by file handle\n"
           "                            that the destination opened the\n"
           "                            very same files\n"
           "  --migration-confirm-paths   accepted: paths are always found\n"
           "                            and checked at switch-over here\n"
           "  --no-migration            do not offer the front-end the\n"
           "                            back-end state transfer\n"
           "  --thread-pool-size=N      worker threads per queue (0: none)\n"
           "  --poll-us=N               after a request queue runs dry, look\n"
           "                            for more for N us before sleeping,\n"
           "                            the guest's kicks off meanwhile (a\n"
           "                            core spins; default 0: never)\n"
           "  --rlimit-nofile=N         set RLIMIT_NOFILE to N (default:\n"
           "                            min(1000000, fs.nr_open) where the\n"
           "                            hard limit can be raised, else the\n"
           "                            hard limit; 0: leave it as it is)\n"
           "  --log-level=error|warn|info|debug    (info)\n"
           "  --syslog                  log to syslog\n"
           "  --print-capabilities      print what libvirt needs to know\n"
           "  -o source=DIR,cache=X,sandbox=X,xattr|no_xattr,flock|no_flock,\n"
           "     posix_lock|no_posix_lock,posix_acl|no_posix_acl,...\n"
           "                            the older spelling\n"
           "  -V, --version, -h, --help\n", prog);
}

static bool parse_u64(const char *s, uint64_t *v, uint64_t max)
{
    char *end;

    if (!*s || *s == '-') {
        return false;
    }
    errno = 0;
    *v = g_ascii_strtoull(s, &end, 10);
    return !errno && !*end && *v <= max;
}

/* A size with an optional K, M, G or T suffix (binary) */
static bool parse_size(const char *s, uint64_t *v)
{
    char *end;
    unsigned int shift = 0;

    if (!*s || *s == '-') {
        return false;
    }
    errno = 0;
    *v = g_ascii_strtoull(s, &end, 10);
    if (errno || end == s) {
        return false;
    }
    switch (*end) {
    case '\0':
        break;
    case 'k': case 'K':
        shift = 10;
        break;
    case 'm': case 'M':
        shift = 20;
        break;
    case 'g': case 'G':
        shift = 30;
        break;
    case 't': case 'T':
        shift = 40;
        break;
    default:
        return false;
    }
    if (*end && end[1]) {
        return false;
    }
    if (shift && *v > (UINT64_MAX >> shift)) {
        return false;
    }
    *v <<= shift;
    return true;
}

static bool parse_cache(VfsdOptions *o, const char *v, char **err)
{
    if (!strcmp(v, "never") || !strcmp(v, "none")) {
        o->cache = VFSD_CACHE_NEVER;
    } else if (!strcmp(v, "metadata")) {
        o->cache = VFSD_CACHE_METADATA;
    } else if (!strcmp(v, "auto")) {
        o->cache = VFSD_CACHE_AUTO;
    } else if (!strcmp(v, "always")) {
        o->cache = VFSD_CACHE_ALWAYS;
    } else if (!strcmp(v, "adaptive")) {
        o->cache = VFSD_CACHE_ADAPTIVE;
    } else {
        *err = g_strdup_printf("invalid cache mode '%s' (never, metadata, "
                               "auto, always or adaptive)", v);
        return false;
    }
    return true;
}

/* A number of seconds (or a fraction) from 0 to @max, all of @v */
static bool parse_seconds(const char *v, double max, double *out)
{
    char *end;
    double d;

    if (!*v || g_ascii_isspace(*v)) {
        return false;
    }
    d = g_ascii_strtod(v, &end);
    if (*end || !(d >= 0 && d <= max)) {
        return false;
    }
    *out = d;
    return true;
}

static bool parse_adaptive(VfsdOptions *o, const char *v, char **err)
{
    g_auto(GStrv) f = g_strsplit(v, ":", 0);
    guint n = g_strv_length(f);
    double fraction = VFSD_ADAPTIVE_FRACTION;

    if (n < 2 || n > 3 ||
        !parse_seconds(f[0], VFSD_ADAPTIVE_LIMIT, &o->adaptive_min) ||
        !parse_seconds(f[1], VFSD_ADAPTIVE_LIMIT, &o->adaptive_max) ||
        o->adaptive_min > o->adaptive_max ||
        (n == 3 && (!parse_seconds(f[2], 1000, &fraction) || fraction == 0))) {
        *err = g_strdup_printf("invalid adaptive timeouts '%s' (MIN:MAX or "
                               "MIN:MAX:FRACTION, seconds from 0 to %.0f with "
                               "MIN <= MAX, FRACTION above 0)", v,
                               VFSD_ADAPTIVE_LIMIT);
        return false;
    }
    o->adaptive_fraction = fraction;
    o->adaptive_set = true;
    return true;
}

static bool parse_sandbox(VfsdOptions *o, const char *v, char **err)
{
    if (!strcmp(v, "namespace")) {
        o->sandbox = VFSD_SANDBOX_NAMESPACE;
    } else if (!strcmp(v, "chroot")) {
        o->sandbox = VFSD_SANDBOX_CHROOT;
    } else if (!strcmp(v, "none")) {
        o->sandbox = VFSD_SANDBOX_NONE;
    } else {
        *err = g_strdup_printf("invalid sandbox mode '%s' (namespace, "
                               "chroot or none)", v);
        return false;
    }
    return true;
}

static bool parse_migration_mode(VfsdOptions *o, const char *v, char **err)
{
    if (!strcmp(v, "find-paths")) {
        o->migration_mode = VFSD_MIG_FIND_PATHS;
    } else if (!strcmp(v, "file-handles")) {
        o->migration_mode = VFSD_MIG_FILE_HANDLES;
    } else {
        *err = g_strdup_printf("invalid migration mode '%s' (find-paths or "
                               "file-handles)", v);
        return false;
    }
    return true;
}

static bool parse_migration_on_error(VfsdOptions *o, const char *v,
                                     char **err)
{
    if (!strcmp(v, "abort")) {
        o->migration_on_error = VFSD_MIG_ABORT;
    } else if (!strcmp(v, "guest-error")) {
        o->migration_on_error = VFSD_MIG_GUEST_ERROR;
    } else {
        *err = g_strdup_printf("invalid --migration-on-error '%s' (abort or "
                               "guest-error)", v);
        return false;
    }
    return true;
}

static bool parse_seccomp(VfsdOptions *o, const char *v, char **err)
{
    if (!strcmp(v, "kill")) {
        o->seccomp = VFSD_SECCOMP_KILL;
    } else if (!strcmp(v, "log")) {
        o->seccomp = VFSD_SECCOMP_LOG;
    } else if (!strcmp(v, "trap")) {
        o->seccomp = VFSD_SECCOMP_TRAP;
    } else if (!strcmp(v, "none")) {
        o->seccomp = VFSD_SECCOMP_NONE;
    } else {
        *err = g_strdup_printf("invalid seccomp action '%s' (kill, log, "
                               "trap or none)", v);
        return false;
    }
    return true;
}

/* --posix-acl and --security-label: [=never|auto|always] */
static bool parse_negotiation(const char *opt, const char *v,
                              VfsdNegotiation *n, char **err)
{
    if (!strcmp(v, "never")) {
        *n = VFSD_NEGOTIATE_NEVER;
    } else if (!strcmp(v, "auto")) {
        *n = VFSD_NEGOTIATE_AUTO;
    } else if (!strcmp(v, "always")) {
        *n = VFSD_NEGOTIATE_ALWAYS;
    } else {
        *err = g_strdup_printf("invalid %s '%s' (never, auto or always)",
                               opt, v);
        return false;
    }
    return true;
}

static bool parse_posix_acl(VfsdOptions *o, const char *v, char **err)
{
    VfsdNegotiation n;

    if (!parse_negotiation("--posix-acl", v, &n, err)) {
        return false;
    }
    o->posix_acl = n != VFSD_NEGOTIATE_NEVER;
    o->posix_acl_always = n == VFSD_NEGOTIATE_ALWAYS;
    return true;
}

static bool parse_inode_fh(VfsdOptions *o, const char *v, char **err)
{
    if (!strcmp(v, "never")) {
        o->inode_file_handles = VFSD_INODE_FH_NEVER;
    } else if (!strcmp(v, "prefer") || !strcmp(v, "fallback")) {
        /* "fallback": the Rust daemon's older name for prefer */
        o->inode_file_handles = VFSD_INODE_FH_PREFER;
    } else if (!strcmp(v, "mandatory")) {
        o->inode_file_handles = VFSD_INODE_FH_MANDATORY;
    } else {
        *err = g_strdup_printf("invalid --inode-file-handles '%s' (never, "
                               "prefer or mandatory)", v);
        return false;
    }
    return true;
}

static bool parse_dax_policy(VfsdOptions *o, const char *v, char **err)
{
    if (!strcmp(v, "never")) {
        o->dax_policy = VFSD_DAX_NEVER;
    } else if (!strcmp(v, "always")) {
        o->dax_policy = VFSD_DAX_ALWAYS;
    } else if (!strcmp(v, "xattr")) {
        o->dax_policy = VFSD_DAX_XATTR;
    } else if (g_str_has_prefix(v, "size:") &&
               parse_size(v + 5, &o->dax_min_size)) {
        o->dax_policy = VFSD_DAX_SIZE;
    } else if (!strcmp(v, "exec")) {
        /* A size:N given before must not linger in exec's large files */
        o->dax_policy = VFSD_DAX_EXEC;
        o->dax_min_size = VFSD_DAX_DEFAULT_MIN_SIZE;
    } else if (g_str_has_prefix(v, "exec:") &&
               parse_size(v + 5, &o->dax_min_size)) {
        o->dax_policy = VFSD_DAX_EXEC;
    } else {
        *err = g_strdup_printf("invalid DAX policy '%s' (never, always, "
                               "size:N, xattr, exec or exec:N)", v);
        return false;
    }
    return true;
}

static bool parse_log_level(VfsdOptions *o, const char *v, char **err)
{
    if (!vfsd_log_parse_level(v, &o->log_level)) {
        *err = g_strdup_printf("invalid log level '%s' (error, warn, info "
                               "or debug)", v);
        return false;
    }
    return true;
}

static bool set_shared_dir(VfsdOptions *o, const char *v, char **err)
{
    if (!*v) {
        *err = g_strdup("the shared directory must not be empty");
        return false;
    }
    g_free(o->shared_dir);
    o->shared_dir = g_strdup(v);
    return true;
}

static bool set_xattrmap(VfsdOptions *o, const char *v, char **err)
{
    VfsdXattrMap *map = vfsd_xattrmap_parse(v, err);

    if (!map) {
        return false;
    }
    vfsd_xattrmap_free(o->xattrmap);
    o->xattrmap = map;
    return true;
}

/*
 * --modcaps: a colon-separated list of capability names (as capabilities(7)
 * spells them, with or without "cap_", in any case), each with + to add it
 * to the daemon's default set or - to drop it.  Whether the daemon may hold
 * an added one is checked when it drops its capabilities.
 */
static bool parse_modcaps(VfsdOptions *o, const char *v, char **err)
{
    g_auto(GStrv) items = g_strsplit(v, ":", -1);
    unsigned int i;

    if (!*v) {
        *err = g_strdup("invalid --modcaps '': expected a list like "
                        "+sys_admin:-chown");
        return false;
    }
    for (i = 0; items[i]; i++) {
        const char *it = items[i];
        g_autofree char *name = NULL;
        int cap;

        if (it[0] != '+' && it[0] != '-') {
            *err = g_strdup_printf("invalid --modcaps item '%s': each "
                                   "capability needs a + or a -", it);
            return false;
        }
        name = g_ascii_strdown(it + 1, -1);
        cap = capng_name_to_capability(g_str_has_prefix(name, "cap_") ?
                                       name + 4 : name);
        if (cap < 0 || cap >= 64) {
            *err = g_strdup_printf("invalid --modcaps item '%s': unknown "
                                   "capability '%s'", it, it + 1);
            return false;
        }
        if (it[0] == '+') {
            o->caps_add |= 1ULL << cap;
            o->caps_drop &= ~(1ULL << cap);
        } else {
            o->caps_drop |= 1ULL << cap;
            o->caps_add &= ~(1ULL << cap);
        }
    }
    return true;
}

/* One item of the "-o" list */
static bool parse_legacy(VfsdOptions *o, const char *item, char **err)
{
    static const struct {
        const char *name;
        size_t offset;
        bool value;
    } flags[] = {
        { "xattr", offsetof(VfsdOptions, xattr), true },
        { "no_xattr", offsetof(VfsdOptions, xattr), false },
        { "flock", offsetof(VfsdOptions, flock), true },
        { "no_flock", offsetof(VfsdOptions, flock), false },
        { "posix_lock", offsetof(VfsdOptions, posix_lock), true },
        { "no_posix_lock", offsetof(VfsdOptions, posix_lock), false },
        { "writeback", offsetof(VfsdOptions, writeback), true },
        { "no_writeback", offsetof(VfsdOptions, writeback), false },
        { "announce_submounts", offsetof(VfsdOptions, announce_submounts),
          true },
        { "readonly", offsetof(VfsdOptions, readonly), true },
        { "killpriv_v2", offsetof(VfsdOptions, killpriv_v2), true },
        { "no_killpriv_v2", offsetof(VfsdOptions, killpriv_v2), false },
        { "allow_mmap", offsetof(VfsdOptions, allow_mmap), true },
        { "allow_direct_io", offsetof(VfsdOptions, allow_direct_io), true },
        { "no_allow_direct_io", offsetof(VfsdOptions, allow_direct_io),
          false },
        { "posix_acl", offsetof(VfsdOptions, posix_acl), true },
        { "no_posix_acl", offsetof(VfsdOptions, posix_acl), false },
        { "security_label", offsetof(VfsdOptions, security_label_on), true },
        { "no_security_label", offsetof(VfsdOptions, security_label_on),
          false },
        { "watch_truncate", offsetof(VfsdOptions, watch_truncate), true },
        { "readdirplus", offsetof(VfsdOptions, no_readdirplus), false },
        { "no_readdirplus", offsetof(VfsdOptions, no_readdirplus), true },
        { "no_watch_truncate", offsetof(VfsdOptions, watch_truncate), false },
    };
    const char *eq = strchr(item, '=');
    g_autofree char *key = eq ? g_strndup(item, eq - item) : g_strdup(item);
    const char *val = eq ? eq + 1 : NULL;
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(flags); i++) {
        if (!strcmp(key, flags[i].name) && !val) {
            *(bool *)((char *)o + flags[i].offset) = flags[i].value;
            return true;
        }
    }
    if (!strcmp(key, "source") && val) {
        return set_shared_dir(o, val, err);
    } else if (!strcmp(key, "cache") && val) {
        return parse_cache(o, val, err);
    } else if (!strcmp(key, "sandbox") && val) {
        return parse_sandbox(o, val, err);
    } else if (!strcmp(key, "log_level") && val) {
        return parse_log_level(o, val, err);
    } else if (!strcmp(key, "dax_policy") && val) {
        return parse_dax_policy(o, val, err);
    } else if (!strcmp(key, "xattrmap") && val) {
        return set_xattrmap(o, val, err);
    } else if (!strcmp(key, "modcaps") && val) {
        return parse_modcaps(o, val, err);
    }
    *err = g_strdup_printf("unknown or malformed option '-o %s'", item);
    return false;
}

/* The "-o" list: items separated by commas, empty ones ignored */
static bool parse_legacy_list(VfsdOptions *o, const char *v, char **err)
{
    g_auto(GStrv) items = g_strsplit(v, ",", -1);
    unsigned int i;

    for (i = 0; items[i]; i++) {
        if (*items[i] && !parse_legacy(o, items[i], err)) {
            return false;
        }
    }
    return true;
}

void vfsd_options_free(VfsdOptions *opts)
{
    g_free(opts->socket_path);
    g_free(opts->shared_dir);
    g_free(opts->tag);
    opts->socket_path = opts->shared_dir = opts->tag = NULL;
    vfsd_xattrmap_free(opts->xattrmap);
    opts->xattrmap = NULL;
}

/* Options that take a value, as --name=value or --name value */
enum {
    OPT_SOCKET_PATH,
    OPT_SOCKET_GROUP,
    OPT_FD,
    OPT_SHARED_DIR,
    OPT_CACHE,
    OPT_SANDBOX,
    OPT_SECCOMP,
    OPT_THREAD_POOL_SIZE,
    OPT_RLIMIT_NOFILE,
    OPT_LOG_LEVEL,
    OPT_DAX_POLICY,
    OPT_DAX_UNMAP_DELAY,
    OPT_INODE_FD_CACHE,
    OPT_POLL_US,
    OPT_TAG,
    OPT_CACHE_SIZE,
    OPT_ADAPTIVE_TIMEOUTS,
    OPT_UID_MAP,
    OPT_XATTRMAP,
    OPT_GID_MAP,
    OPT_MODCAPS,
    OPT_TRANSLATE_UID,
    OPT_TRANSLATE_GID,
    OPT_MIGRATION_MODE,
    OPT_MIGRATION_ON_ERROR,
    OPT_O,
    OPT_INODE_FILE_HANDLES,
    /* [=VALUE] only, as the Rust daemon has them: bare, they mean always */
    OPT_SECURITY_LABEL,
    OPT_POSIX_ACL,
    OPT_FLAG_FIRST,
    OPT_XATTR = OPT_FLAG_FIRST,
    OPT_NO_XATTR,
    OPT_POSIX_LOCK,
    OPT_FLOCK,
    OPT_WRITEBACK,
    OPT_ANNOUNCE_SUBMOUNTS,
    OPT_READONLY,
    OPT_NO_KILLPRIV_V2,
    OPT_KILLPRIV_V2,
    OPT_SYSLOG,
    OPT_PRINT_CAPS,
    OPT_FOREGROUND,
    OPT_DEBUG,
    OPT_HELP,
    OPT_VERSION,
    OPT_ALLOW_MMAP,
    OPT_ALLOW_DIRECT_IO,
    OPT_WATCH_TRUNCATE,
    OPT_STATS,
    OPT_NO_ANNOUNCE_SUBMOUNTS,
    OPT_NO_READDIRPLUS,
    OPT_PRESERVE_NOATIME,
    OPT_MIGRATION_VERIFY_HANDLES,
    OPT_MIGRATION_CONFIRM_PATHS,
    OPT_NO_MIGRATION,
};

static const struct {
    const char *name;
    int id;
} option_names[] = {
    { "--socket-path", OPT_SOCKET_PATH },
    { "--socket", OPT_SOCKET_PATH },
    { "--socket-group", OPT_SOCKET_GROUP },
    { "--fd", OPT_FD },
    { "--shared-dir", OPT_SHARED_DIR },
    { "--cache", OPT_CACHE },
    { "--sandbox", OPT_SANDBOX },
    { "--seccomp", OPT_SECCOMP },
    { "--thread-pool-size", OPT_THREAD_POOL_SIZE },
    { "--rlimit-nofile", OPT_RLIMIT_NOFILE },
    { "--log-level", OPT_LOG_LEVEL },
    { "--dax-policy", OPT_DAX_POLICY },
    { "--uid-map", OPT_UID_MAP },
    { "--xattrmap", OPT_XATTRMAP },
    { "--gid-map", OPT_GID_MAP },
    { "-o", OPT_O },
    { "--xattr", OPT_XATTR },
    { "--no-xattr", OPT_NO_XATTR },
    { "--posix-lock", OPT_POSIX_LOCK },
    { "--flock", OPT_FLOCK },
    { "--writeback", OPT_WRITEBACK },
    { "--announce-submounts", OPT_ANNOUNCE_SUBMOUNTS },
    { "--readonly", OPT_READONLY },
    { "--no-killpriv-v2", OPT_NO_KILLPRIV_V2 },
    { "--killpriv-v2", OPT_KILLPRIV_V2 },
    { "--syslog", OPT_SYSLOG },
    { "--print-capabilities", OPT_PRINT_CAPS },
    { "-f", OPT_FOREGROUND },
    { "-d", OPT_DEBUG },
    { "--debug", OPT_DEBUG },
    { "-h", OPT_HELP },
    { "--help", OPT_HELP },
    { "-V", OPT_VERSION },
    { "--version", OPT_VERSION },
    { "--posix-acl", OPT_POSIX_ACL },
    { "--allow-mmap", OPT_ALLOW_MMAP },
    { "--allow-direct-io", OPT_ALLOW_DIRECT_IO },
    { "--watch-truncate", OPT_WATCH_TRUNCATE },
    { "--stats", OPT_STATS },
    { "--dax-unmap-delay", OPT_DAX_UNMAP_DELAY },
    { "--inode-fd-cache", OPT_INODE_FD_CACHE },
    { "--poll-us", OPT_POLL_US },
    { "--tag", OPT_TAG },
    { "--cache-size", OPT_CACHE_SIZE },
    { "--adaptive-timeouts", OPT_ADAPTIVE_TIMEOUTS },
    { "--modcaps", OPT_MODCAPS },
    { "--translate-uid", OPT_TRANSLATE_UID },
    { "--translate-gid", OPT_TRANSLATE_GID },
    { "--no-announce-submounts", OPT_NO_ANNOUNCE_SUBMOUNTS },
    { "--no-readdirplus", OPT_NO_READDIRPLUS },
    { "--preserve-noatime", OPT_PRESERVE_NOATIME },
    { "--inode-file-handles", OPT_INODE_FILE_HANDLES },
    { "--security-label", OPT_SECURITY_LABEL },
    { "--migration-mode", OPT_MIGRATION_MODE },
    { "--migration-on-error", OPT_MIGRATION_ON_ERROR },
    { "--migration-verify-handles", OPT_MIGRATION_VERIFY_HANDLES },
    { "--migration-confirm-paths", OPT_MIGRATION_CONFIRM_PATHS },
    { "--no-migration", OPT_NO_MIGRATION },
};

/* Options without a value; false if @id is not one of them */
static bool apply_flag(VfsdOptions *o, int id)
{
    switch (id) {
    case OPT_XATTR:
        o->xattr = true;
        return true;
    case OPT_NO_XATTR:
        o->xattr = false;
        return true;
    case OPT_POSIX_LOCK:
        o->posix_lock = true;
        return true;
    case OPT_FLOCK:
        o->flock = true;
        return true;
    case OPT_WRITEBACK:
        o->writeback = true;
        return true;
    case OPT_ANNOUNCE_SUBMOUNTS:
        o->announce_submounts = true;
        return true;
    case OPT_READONLY:
        o->readonly = true;
        return true;
    case OPT_NO_KILLPRIV_V2:
        o->killpriv_v2 = false;
        return true;
    case OPT_KILLPRIV_V2:
        o->killpriv_v2 = true;
        return true;
    case OPT_SYSLOG:
        o->syslog = true;
        return true;
    case OPT_PRINT_CAPS:
        o->print_capabilities = true;
        return true;
    case OPT_FOREGROUND:
        /* We always run in the foreground */
        return true;
    case OPT_DEBUG:
        o->log_level = VFSD_LOG_DEBUG;
        return true;
    case OPT_HELP:
        o->help = true;
        return true;
    case OPT_VERSION:
        o->version = true;
        return true;
    case OPT_ALLOW_MMAP:
        o->allow_mmap = true;
        return true;
    case OPT_ALLOW_DIRECT_IO:
        o->allow_direct_io = true;
        return true;
    case OPT_WATCH_TRUNCATE:
        o->watch_truncate = true;
        return true;
    case OPT_STATS:
        o->stats = true;
        return true;
    case OPT_NO_ANNOUNCE_SUBMOUNTS:
        o->announce_submounts = false;
        return true;
    case OPT_NO_READDIRPLUS:
        o->no_readdirplus = true;
        return true;
    case OPT_PRESERVE_NOATIME:
        o->preserve_noatime = true;
        return true;
    case OPT_MIGRATION_VERIFY_HANDLES:
        o->migration_verify_handles = true;
        return true;
    case OPT_MIGRATION_CONFIRM_PATHS:
        o->migration_confirm_paths = true;
        return true;
    case OPT_NO_MIGRATION:
        o->no_migration = true;
        return true;
    }
    return false;
}

/* Options whose value is a number */
static bool apply_number(VfsdOptions *o, int id, const char *val, char **err)
{
    uint64_t n;

    switch (id) {
    case OPT_SOCKET_GROUP: {
        /* Resolved now: an unknown group is a usage error like any other */
        struct group *gr = getgrnam(val);

        if (gr) {
            o->socket_gid = gr->gr_gid;
        } else if (parse_u64(val, &n, INT_MAX)) {
            o->socket_gid = n;
        } else {
            *err = g_strdup_printf("unknown group '%s' for --socket-group",
                                   val);
            return false;
        }
        return true;
    }
    case OPT_FD:
        if (!parse_u64(val, &n, INT_MAX)) {
            *err = g_strdup_printf("invalid file descriptor '%s'", val);
            return false;
        }
        o->fd = n;
        return true;
    case OPT_THREAD_POOL_SIZE:
        if (!parse_u64(val, &n, VFSD_MAX_THREAD_POOL)) {
            *err = g_strdup_printf("invalid thread pool size '%s' (0 to %d)",
                                   val, VFSD_MAX_THREAD_POOL);
            return false;
        }
        o->thread_pool_size = n;
        return true;
    case OPT_RLIMIT_NOFILE:
        if (!parse_u64(val, &n, INT_MAX)) {
            *err = g_strdup_printf("invalid file limit '%s'", val);
            return false;
        }
        /* 0: the limit stays as it is, as with the Rust daemon */
        o->rlimit_nofile = n;
        o->rlimit_keep = n == 0;
        return true;
    case OPT_POLL_US:
        if (!parse_u64(val, &n, VFSD_MAX_POLL_US)) {
            *err = g_strdup_printf("invalid --poll-us '%s' (0 to %d)", val,
                                   VFSD_MAX_POLL_US);
            return false;
        }
        o->poll_us = n;
        return true;
    case OPT_INODE_FD_CACHE:
        if (!parse_u64(val, &n, INT_MAX)) {
            *err = g_strdup_printf("invalid --inode-fd-cache '%s'", val);
            return false;
        }
        o->inode_fd_cache = n;
        return true;
    case OPT_DAX_UNMAP_DELAY:
        if (!parse_u64(val, &n, VFSD_MAX_DAX_UNMAP_DELAY)) {
            *err = g_strdup_printf("invalid DAX unmap delay '%s' (0 to %d "
                                   "ms)", val, VFSD_MAX_DAX_UNMAP_DELAY);
            return false;
        }
        o->dax_unmap_delay_ms = n;
        return true;
    case OPT_CACHE_SIZE:
        if (!parse_size(val, &n) || !n || (n & (n - 1)) ||
            n < VFSD_CACHE_SIZE_MIN || n > VFSD_CACHE_SIZE_MAX) {
            *err = g_strdup_printf("invalid cache size '%s' (a power of two "
                                   "from 2M to 1T)", val);
            return false;
        }
        o->cache_size = n;
        return true;
    }
    g_assert_not_reached();
}

/*
 * --translate-uid/gid translate inside the daemon, --uid/gid-map name the
 * user namespace's mapping; idmap.c keeps both in one VfsdIdMap.
 */
static bool parse_ids(VfsdOptions *o, int id, const char *val, char **err)
{
    bool uids = id == OPT_TRANSLATE_UID || id == OPT_UID_MAP;
    const char *name = id == OPT_TRANSLATE_UID ? "--translate-uid" :
                       id == OPT_TRANSLATE_GID ? "--translate-gid" :
                       uids ? "--uid-map" : "--gid-map";
    VfsdIdMap *map = uids ? &o->uid_map : &o->gid_map;
    g_autofree char *why = NULL;
    bool ok;

    if (id == OPT_TRANSLATE_UID || id == OPT_TRANSLATE_GID) {
        ok = vfsd_idxlate_add(&map->xlate, val, &why);
    } else {
        ok = vfsd_idmap_add(map, val, &why);
    }
    if (!ok) {
        *err = g_strdup_printf("invalid %s '%s': %s", name, val, why);
    }
    return ok;
}

static bool apply_option(VfsdOptions *o, int id, const char *val, char **err)
{
    if (apply_flag(o, id)) {
        return true;
    }
    switch (id) {
    case OPT_SOCKET_PATH:
        if (!*val) {
            *err = g_strdup("the socket path must not be empty");
            return false;
        }
        g_free(o->socket_path);
        o->socket_path = g_strdup(val);
        return true;
    case OPT_SHARED_DIR:
        return set_shared_dir(o, val, err);
    case OPT_CACHE:
        return parse_cache(o, val, err);
    case OPT_ADAPTIVE_TIMEOUTS:
        return parse_adaptive(o, val, err);
    case OPT_SANDBOX:
        return parse_sandbox(o, val, err);
    case OPT_SECCOMP:
        return parse_seccomp(o, val, err);
    case OPT_INODE_FILE_HANDLES:
        return parse_inode_fh(o, val, err);
    case OPT_SECURITY_LABEL:
        o->security_label_on = false;
        return parse_negotiation("--security-label", val, &o->security_label,
                                 err);
    case OPT_POSIX_ACL:
        return parse_posix_acl(o, val, err);
    case OPT_LOG_LEVEL:
        return parse_log_level(o, val, err);
    case OPT_DAX_POLICY:
        return parse_dax_policy(o, val, err);
    case OPT_MODCAPS:
        return parse_modcaps(o, val, err);
    case OPT_MIGRATION_MODE:
        return parse_migration_mode(o, val, err);
    case OPT_MIGRATION_ON_ERROR:
        return parse_migration_on_error(o, val, err);
    case OPT_TRANSLATE_UID:
    case OPT_TRANSLATE_GID:
    case OPT_UID_MAP:
    case OPT_GID_MAP:
        return parse_ids(o, id, val, err);
    case OPT_XATTRMAP:
        return set_xattrmap(o, val, err);
    case OPT_O:
        return parse_legacy_list(o, val, err);
    case OPT_TAG:
        /* The guest sees the tag as it is: the Rust daemon's limits */
        if (!*val || strlen(val) > VFSD_TAG_MAX) {
            *err = g_strdup_printf("invalid tag '%s' (1 to %d bytes)", val,
                                   VFSD_TAG_MAX);
            return false;
        }
        g_free(o->tag);
        o->tag = g_strdup(val);
        return true;
    }
    return apply_number(o, id, val, err);
}

static void set_defaults(VfsdOptions *o)
{
    memset(o, 0, sizeof(*o));
    o->fd = -1;
    o->socket_gid = -1;
    o->cache = VFSD_CACHE_AUTO;
    o->adaptive_min = VFSD_ADAPTIVE_MIN;
    o->adaptive_max = VFSD_ADAPTIVE_MAX;
    o->adaptive_fraction = VFSD_ADAPTIVE_FRACTION;
    o->sandbox = VFSD_SANDBOX_NAMESPACE;
    o->seccomp = VFSD_SECCOMP_KILL;
    o->killpriv_v2 = true;
    o->log_level = VFSD_LOG_INFO;
    o->dax_policy = VFSD_DAX_SIZE;
    o->dax_min_size = VFSD_DAX_DEFAULT_MIN_SIZE;
    /* The Rust daemon's defaults since 1.14 */
    o->announce_submounts = true;
    o->inode_file_handles = VFSD_INODE_FH_PREFER;
    o->inode_fd_cache = -1;
}

/* The OPT_* of the first @len characters of @arg, or -1 */
static int option_id(const char *arg, size_t len)
{
    unsigned int j;

    for (j = 0; j < G_N_ELEMENTS(option_names); j++) {
        if (strlen(option_names[j].name) == len &&
            !strncmp(arg, option_names[j].name, len)) {
            return option_names[j].id;
        }
    }
    return -1;
}

/*
 * What no single option can check: the ones that need or exclude each
 * other, and those that turn others on.
 */
static bool settle_options(VfsdOptions *o, char **err)
{
    if (!o->shared_dir) {
        *err = g_strdup("no shared directory: use --shared-dir=DIR "
                        "(or -o source=DIR)");
        return false;
    }
    if ((o->socket_path != NULL) == (o->fd >= 0)) {
        *err = g_strdup("give exactly one of --socket-path=PATH and --fd=N");
        return false;
    }
    if (o->adaptive_set && o->cache != VFSD_CACHE_ADAPTIVE) {
        *err = g_strdup("--adaptive-timeouts needs --cache=adaptive");
        return false;
    }
    /* libvirt owns a socket it passes with --fd, group included */
    if (o->socket_gid >= 0 && !o->socket_path) {
        *err = g_strdup("--socket-group needs --socket-path");
        return false;
    }
    /* As with the Rust daemon, a map turns extended attributes on */
    if (o->xattrmap) {
        o->xattr = true;
    }
    /* -o security_label is the Rust daemon's always */
    if (o->security_label_on) {
        o->security_label = VFSD_NEGOTIATE_ALWAYS;
    }
    /*
     * ACLs and labels travel as extended attributes: as with the Rust
     * daemon, they turn them on
     */
    if (o->posix_acl || o->security_label != VFSD_NEGOTIATE_NEVER) {
        o->xattr = true;
    }
    /* As the Rust daemon: handles cannot be opened without it */
    if (o->inode_file_handles != VFSD_INODE_FH_NEVER &&
        (o->caps_drop & (1ULL << CAP_DAC_READ_SEARCH))) {
        *err = g_strdup_printf("--modcaps cannot drop dac_read_search with "
                               "--inode-file-handles=%s: file handles need "
                               "it", o->inode_file_handles ==
                               VFSD_INODE_FH_PREFER ? "prefer" :
                               "mandatory");
        return false;
    }
    return true;
}

bool vfsd_options_parse(VfsdOptions *o, int argc, char **argv, char **err)
{
    int i;

    set_defaults(o);
    for (i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *eq = g_str_has_prefix(arg, "--") ? strchr(arg, '=') : NULL;
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        const char *val = NULL;
        int id = option_id(arg, len);

        if (id < 0) {
            *err = g_strdup_printf("unknown option '%s' (see --help)", arg);
            return false;
        }
        if (id == OPT_SECURITY_LABEL || id == OPT_POSIX_ACL) {
            /* Never the next argument: "--posix-acl --xattr" is two */
            val = eq ? eq + 1 : "always";
        } else if (id >= OPT_FLAG_FIRST) {
            if (eq) {
                *err = g_strdup_printf("option '%.*s' takes no value",
                                       (int)len, arg);
                return false;
            }
        } else if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            *err = g_strdup_printf("option '%s' needs a value", arg);
            return false;
        }
        if (!apply_option(o, id, val, err)) {
            return false;
        }
    }

    if (o->help || o->version || o->print_capabilities) {
        return true;
    }
    return settle_options(o, err);
}

bool vfsd_options_open_by_handle(const VfsdOptions *o)
{
    return o->inode_file_handles != VFSD_INODE_FH_NEVER ||
           o->migration_mode == VFSD_MIG_FILE_HANDLES;
}

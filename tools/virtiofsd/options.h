/*
 * virtiofsd: command line
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_OPTIONS_H
#define VIRTIOFSD_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "idmap.h"
#include "log.h"
#include "xattrmap.h"

typedef enum VfsdCache {
    VFSD_CACHE_NEVER,
    VFSD_CACHE_METADATA,
    VFSD_CACHE_AUTO,
    VFSD_CACHE_ALWAYS,
    /*
     * As always, but a name's or an inode's timeout grows with how long
     * the host has left it unchanged, between the bounds below
     */
    VFSD_CACHE_ADAPTIVE,
} VfsdCache;

typedef enum VfsdSandbox {
    VFSD_SANDBOX_NAMESPACE,
    VFSD_SANDBOX_CHROOT,
    VFSD_SANDBOX_NONE,
} VfsdSandbox;

typedef enum VfsdDaxPolicy {
    VFSD_DAX_NEVER,
    VFSD_DAX_ALWAYS,
    VFSD_DAX_SIZE,      /* regular files of at least dax_min_size bytes */
    VFSD_DAX_XATTR,     /* files carrying VFSD_DAX_XATTR_NAME */
    /*
     * Files the guest maps as code: an execute bit or the ELF magic, and
     * the files of VFSD_DAX_SIZE (dax-policy.c, "The exec policy")
     */
    VFSD_DAX_EXEC,
} VfsdDaxPolicy;

#define VFSD_DAX_XATTR_NAME "user.virtiofsd.dax"

/*
 * The default policy gives the window to files of at least one of the
 * guest's DAX ranges (Linux maps 2 MiB at a time).  A smaller file would
 * take a whole range, and a map round trip to set it up, for data that
 * a READ or two brings as fast: on a source tree, every file in the
 * window made cp -a 26% slower and the whole tree group 9%, against 3%
 * (within the runs' spread) with this default (docs/benchmarks/tree.md).
 */
#define VFSD_DAX_DEFAULT_MIN_SIZE (2 * 1024 * 1024)

/* --inode-file-handles: how the inodes the guest knows are held */
typedef enum VfsdInodeFh {
    VFSD_INODE_FH_NEVER,        /* O_PATH fds */
    VFSD_INODE_FH_PREFER,       /* handles where the file system has them */
    VFSD_INODE_FH_MANDATORY,    /* handles, or no start / failed lookup */
} VfsdInodeFh;

/* A FUSE feature the guest may or may not offer: --security-label */
typedef enum VfsdNegotiation {
    VFSD_NEGOTIATE_NEVER,       /* not offered */
    VFSD_NEGOTIATE_AUTO,        /* used if the guest has it */
    VFSD_NEGOTIATE_ALWAYS,      /* INIT fails without it */
} VfsdNegotiation;

/* --migration-mode: how the source names each inode to the destination */
typedef enum VfsdMigMode {
    VFSD_MIG_FIND_PATHS,        /* its path under the shared directory */
    VFSD_MIG_FILE_HANDLES,      /* its file handle (same file system) */
} VfsdMigMode;

/* --migration-on-error: what the destination does with what it cannot find */
typedef enum VfsdMigOnError {
    VFSD_MIG_ABORT,             /* fail the migration */
    VFSD_MIG_GUEST_ERROR,       /* finish it; the guest gets EIO there */
} VfsdMigOnError;

/* What the system call filter does with a call it does not allow */
typedef enum VfsdSeccomp {
    VFSD_SECCOMP_KILL,          /* the kernel kills the process */
    VFSD_SECCOMP_LOG,           /* the kernel logs the call and allows it */
    VFSD_SECCOMP_TRAP,          /* SIGSYS: we report the call, then die */
    VFSD_SECCOMP_NONE,          /* no filter at all */
} VfsdSeccomp;

typedef struct VfsdOptions {
    char *socket_path;
    int fd;                     /* -1: listen on socket_path */
    int socket_gid;             /* group of socket_path; -1: ours */
    char *shared_dir;
    VfsdCache cache;
    /* --cache=adaptive: timeout = age * fraction, within [min, max] s */
    double adaptive_min;
    double adaptive_max;
    double adaptive_fraction;
    bool adaptive_set;          /* given on the command line */
    VfsdSandbox sandbox;
    VfsdSeccomp seccomp;
    VfsdInodeFh inode_file_handles;
    bool xattr;
    bool flock;
    bool posix_lock;
    bool writeback;
    bool announce_submounts;
    bool no_readdirplus;        /* do not offer FUSE_DO_READDIRPLUS */
    bool preserve_noatime;      /* pass the guest's O_NOATIME on */
    /*
     * --modcaps: capabilities (bit N: capability N) added to, dropped from
     * the daemon's default set
     */
    uint64_t caps_add;
    uint64_t caps_drop;
    bool readonly;
    bool killpriv_v2;
    bool allow_mmap;
    bool allow_direct_io;       /* honour the guest's O_DIRECT */
    bool posix_acl;             /* FUSE_POSIX_ACL; turns xattr on */
    bool posix_acl_always;      /* --posix-acl=always: INIT fails without */
    VfsdNegotiation security_label;     /* FUSE_SECURITY_CTX */
    bool security_label_on;     /* -o security_label: always */
    VfsdXattrMap *xattrmap;     /* name translation; NULL: none */
    VfsdIdMap uid_map;          /* guest <-> host ids; empty: identity */
    VfsdIdMap gid_map;
    unsigned int thread_pool_size;
    uint64_t rlimit_nofile;     /* 0: raise it to the hard limit */
    int64_t inode_fd_cache;     /* -1: a quarter of the fd limit */
    unsigned int poll_us;       /* a dry request queue polled that long */
    bool rlimit_keep;           /* --rlimit-nofile=0: leave it alone */
    VfsdLogLevel log_level;
    bool syslog;
    VfsdDaxPolicy dax_policy;
    uint64_t dax_min_size;
    bool print_capabilities;
    bool help;
    bool version;
    bool watch_truncate;        /* unmap DAX ranges of host-shrunk files */
    bool stats;                 /* log request counts and times at exit */
    unsigned int dax_unmap_delay_ms;    /* lazy unmaps; 0 (default): off */
    /*
     * For a front-end that asks the back-end about the device (upstream
     * QEMU's vhost-user-test-device-pci): the mount tag the config space
     * carries, and the size of the DAX window.  NULL / 0: not offered.
     */
    char *tag;
    uint64_t cache_size;
    VfsdMigMode migration_mode;
    VfsdMigOnError migration_on_error;
    bool migration_verify_handles;  /* find-paths: attach file handles */
    bool migration_confirm_paths;   /* always done here; accepted */
    bool no_migration;          /* do not offer the device state feature */
} VfsdOptions;

/* The virtio-fs config space's tag field: not NUL-terminated when full */
#define VFSD_TAG_MAX 36
/* As QEMU's cache-size property: a power of two in this range */
#define VFSD_CACHE_SIZE_MIN (2ULL << 20)
#define VFSD_CACHE_SIZE_MAX (1ULL << 40)
/* --adaptive-timeouts: its defaults, and the longest timeout it takes */
#define VFSD_ADAPTIVE_MIN 1.0
#define VFSD_ADAPTIVE_MAX 60.0
#define VFSD_ADAPTIVE_FRACTION 0.1
#define VFSD_ADAPTIVE_LIMIT 86400.0

/*
 * Parses argv into @opts (which it initializes with the defaults).
 * Returns false with a one-line message in @err (to be g_free'd).
 */
bool vfsd_options_parse(VfsdOptions *opts, int argc, char **argv,
                        char **err);
void vfsd_options_free(VfsdOptions *opts);
void vfsd_options_usage(const char *prog);
/*
 * Whether the daemon may open inodes by file handle: to hold them
 * (--inode-file-handles=prefer|mandatory) or, as a migration destination,
 * to find the inodes a file-handles source names only by handle.  That
 * takes CAP_DAC_READ_SEARCH, with which open_by_handle_at() opens any
 * inode of the file system, inside the shared directory or not: the
 * sandbox lets the call and the capability through only then.
 */
bool vfsd_options_open_by_handle(const VfsdOptions *opts);
/* What --print-capabilities prints, for libvirt */
const char *vfsd_options_capabilities(void);

#endif /* VIRTIOFSD_OPTIONS_H */

/*
 * virtiofsd tests: the DAX window bookkeeping, with a fake front-end
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "vfsd-test.h"
#include "compat.h"

#define MiB (1024 * 1024ULL)

/*
 * A front-end that enforces the contract's rules: no map over a map
 * (unless replacing mappings wholly inside), unmaps cover whole mappings.
 */
typedef struct FakeMap {
    uint64_t start, len, foffset, flags;
    struct stat st;
} FakeMap;

typedef struct Fake {
    /* Maps of concurrent requests come in on several threads */
    GMutex lock;
    GCond cond;
    GArray *maps;               /* FakeMap */
    GString *log;
    bool replace;
    bool fail_next;
    /* The front-end does not restore a migrated window (SHMEM_MIGRATE) */
    bool no_migrate;
    /*
     * A map waits, up to MEET_TIMEOUT_S, until @meet maps are in the
     * front-end at once: two queues' requests mapping at the same time.
     * If they never meet, the map fails and @meet_timed_out says so.
     */
    unsigned int meet;
    unsigned int arrived;
    bool meet_timed_out;
    /*
     * Run once, on a thread of its own, by the next map while it is in
     * the front-end, which waits for it up to MEET_TIMEOUT_S
     * (@beside_timed_out if not): a request racing with the map.
     */
    void (*beside)(void *arg);
    void *beside_arg;
    bool beside_done;
    bool beside_timed_out;
    GThread *beside_thread;
} Fake;

#define MEET_TIMEOUT_S 5

static bool fake_available(void *opaque)
{
    return true;
}

static bool fake_can_replace(void *opaque)
{
    Fake *f = opaque;

    return f->replace;
}

static bool fake_can_migrate(void *opaque)
{
    Fake *f = opaque;

    return !f->no_migrate;
}

/* Whether the maps met; f->lock held */
static bool fake_meet(Fake *f)
{
    gint64 deadline = g_get_monotonic_time() +
                      MEET_TIMEOUT_S * G_TIME_SPAN_SECOND;

    f->arrived++;
    g_cond_broadcast(&f->cond);
    while (f->arrived < f->meet) {
        if (!g_cond_wait_until(&f->cond, &f->lock, deadline)) {
            f->meet_timed_out = true;
            return false;
        }
    }
    return true;
}

static gpointer fake_beside_thread(gpointer opaque)
{
    Fake *f = opaque;

    f->beside(f->beside_arg);
    g_mutex_lock(&f->lock);
    f->beside_done = true;
    g_cond_broadcast(&f->cond);
    g_mutex_unlock(&f->lock);
    return NULL;
}

/* Runs f->beside, if set, and waits for it; f->lock held */
static void fake_run_beside(Fake *f)
{
    gint64 deadline = g_get_monotonic_time() +
                      MEET_TIMEOUT_S * G_TIME_SPAN_SECOND;

    if (!f->beside || f->beside_thread) {
        return;
    }
    f->beside_thread = g_thread_new("beside", fake_beside_thread, f);
    while (!f->beside_done) {
        if (!g_cond_wait_until(&f->cond, &f->lock, deadline)) {
            f->beside_timed_out = true;
            return;
        }
    }
}

static bool fake_map_locked(Fake *f, uint64_t fd_offset, uint64_t shm_offset,
                            uint64_t len, uint64_t flags, int fd);

static bool fake_map(void *opaque, uint64_t fd_offset, uint64_t shm_offset,
                     uint64_t len, uint64_t flags, int fd)
{
    Fake *f = opaque;
    bool ok;

    g_mutex_lock(&f->lock);
    ok = fake_map_locked(f, fd_offset, shm_offset, len, flags, fd);
    g_mutex_unlock(&f->lock);
    return ok;
}

static bool fake_map_locked(Fake *f, uint64_t fd_offset, uint64_t shm_offset,
                            uint64_t len, uint64_t flags, int fd)
{
    FakeMap m = {
        .start = shm_offset, .len = len, .foffset = fd_offset, .flags = flags,
    };
    int i;

    if (f->meet && !fake_meet(f)) {
        return false;
    }
    g_string_append_printf(f->log, "map %" G_GINT64_MODIFIER "x+%"
                           G_GINT64_MODIFIER "x %s%s;", shm_offset, len,
                           flags & VFSD_DAX_MAP_RW ? "rw" : "ro",
                           flags & VFSD_DAX_MAP_REPLACE ? " replace" : "");
    fake_run_beside(f);
    if (f->fail_next) {
        f->fail_next = false;
        return false;
    }
    g_assert_cmpint(fstat(fd, &m.st), ==, 0);
    g_assert_true(S_ISREG(m.st.st_mode));
    g_assert_cmpint(fcntl(fd, F_GETFL) & O_ACCMODE, ==,
                    flags & VFSD_DAX_MAP_RW ? O_RDWR : O_RDONLY);
    for (i = f->maps->len - 1; i >= 0; i--) {
        FakeMap *o = &g_array_index(f->maps, FakeMap, i);

        if (o->start < m.start + len && m.start < o->start + o->len) {
            if (!(flags & VFSD_DAX_MAP_REPLACE) || o->start < m.start ||
                o->start + o->len > m.start + len) {
                return false;
            }
            g_array_remove_index(f->maps, i);
        }
    }
    g_array_append_val(f->maps, m);
    return true;
}

static bool fake_unmap_locked(Fake *f, uint64_t shm_offset, uint64_t len);

static bool fake_unmap(void *opaque, uint64_t shm_offset, uint64_t len)
{
    Fake *f = opaque;
    bool ok;

    g_mutex_lock(&f->lock);
    ok = fake_unmap_locked(f, shm_offset, len);
    g_mutex_unlock(&f->lock);
    return ok;
}

static bool fake_unmap_locked(Fake *f, uint64_t shm_offset, uint64_t len)
{
    uint64_t covered = 0;
    int i;

    g_string_append_printf(f->log, "unmap %" G_GINT64_MODIFIER "x+%"
                           G_GINT64_MODIFIER "x;", shm_offset, len);
    for (i = f->maps->len - 1; i >= 0; i--) {
        FakeMap *o = &g_array_index(f->maps, FakeMap, i);

        if (o->start < shm_offset + len && shm_offset < o->start + o->len) {
            if (o->start < shm_offset ||
                o->start + o->len > shm_offset + len) {
                return false;
            }
            covered += o->len;
            g_array_remove_index(f->maps, i);
        }
    }
    /* Must be exactly whole adjacent mappings */
    return covered == len;
}

/* Same rules; the log tells which unmaps the daemon did not wait for */
static bool fake_unmap_nowait(void *opaque, uint64_t shm_offset, uint64_t len)
{
    Fake *f = opaque;
    bool ok;

    g_mutex_lock(&f->lock);
    g_string_append(f->log, "nowait ");
    ok = fake_unmap_locked(f, shm_offset, len);
    g_mutex_unlock(&f->lock);
    return ok;
}

/* Fixture variants, the test data */
#define FAKE_NO_REPLACE 1
#define FAKE_NOWAIT 2
#define FAKE_LAZY 4             /* and nowait */

#define LAZY_DELAY_MS 50

typedef struct DaxFixture {
    TestFs t;
    Fake fake;
    uint64_t ino;
    uint64_t fh;
} DaxFixture;

static void setup(DaxFixture *d, gconstpointer data)
{
    VfsdDaxBackend be = {
        .available = fake_available,
        .can_replace = fake_can_replace,
        .can_migrate = fake_can_migrate,
        .map = fake_map,
        .unmap = fake_unmap,
        .opaque = &d->fake,
    };

    d->fake.maps = g_array_new(false, true, sizeof(FakeMap));
    d->fake.log = g_string_new("");
    d->fake.replace = !(GPOINTER_TO_INT(data) & FAKE_NO_REPLACE);
    if (GPOINTER_TO_INT(data) & (FAKE_NOWAIT | FAKE_LAZY)) {
        be.unmap_nowait = fake_unmap_nowait;
    }
    test_fs_setup(&d->t, NULL);
    d->t.fs.dax = vfsd_dax_new(&be);
    if (GPOINTER_TO_INT(data) & FAKE_LAZY) {
        g_autofree char *err = NULL;

        g_assert_true(vfsd_dax_lazy_start(d->t.fs.dax, LAZY_DELAY_MS, &err));
    }
    test_fs_init_session(&d->t, FUSE_MAP_ALIGNMENT | FUSE_HAS_INODE_DAX);
    d->ino = test_create(&d->t, FUSE_ROOT_ID, "file", O_RDWR, &d->fh);
    g_assert_cmpint(test_write(&d->t, d->ino, d->fh, 8 * MiB - 1, "x", 1),
                    ==, 1);
}

static void teardown(DaxFixture *d, gconstpointer data)
{
    VfsdDax *dax = d->t.fs.dax;

    if (d->fake.beside_thread) {
        g_thread_join(d->fake.beside_thread);
    }
    test_fs_teardown(&d->t);
    vfsd_dax_free(dax);
    g_array_free(d->fake.maps, true);
    g_string_free(d->fake.log, true);
}

static int setup_mapping(DaxFixture *d, uint64_t foff, uint64_t moff,
                         uint64_t len, uint64_t flags)
{
    TestReq *r = test_req_new(FUSE_SETUPMAPPING, d->ino);
    struct fuse_setupmapping_in in = {
        .fh = UINT64_MAX, .foffset = foff, .len = len, .flags = flags,
        .moffset = moff,
    };

    test_req_add(r, &in, sizeof(in));
    return test_send(&d->t, r, 4096, NULL, 0, NULL);
}

static int remove_mapping(DaxFixture *d, const uint64_t (*ranges)[2],
                          uint32_t count, uint32_t claimed)
{
    TestReq *r = test_req_new(FUSE_REMOVEMAPPING, d->ino);
    struct fuse_removemapping_in in = { .count = claimed };
    uint32_t i;

    test_req_add(r, &in, sizeof(in));
    for (i = 0; i < count; i++) {
        struct fuse_removemapping_one one = {
            .moffset = ranges[i][0], .len = ranges[i][1],
        };

        test_req_add(r, &one, sizeof(one));
    }
    return test_send(&d->t, r, 4096, NULL, 0, NULL);
}

static void test_attr_flag(DaxFixture *d, gconstpointer data)
{
    struct fuse_attr attr;

    test_lookup(&d->t, FUSE_ROOT_ID, "file", &attr);
    g_assert_true(attr.flags & FUSE_ATTR_DAX);
}

/*
 * --dax=xattr looks at the file's xattr for every attribute reply: with
 * no fd left to the process, the answer must not change, as it would if
 * the daemon opened the file for it (an fd outside its fd accounting).
 */
static void test_xattr_policy_opens_nothing(DaxFixture *d,
                                            gconstpointer data)
{
    g_autoptr(GArray) fillers = g_array_new(false, false, sizeof(int));
    struct fuse_attr_out out;
    struct rlimit old, full;
    int fd, highest = 0;
    TestReq *r;
    guint i;

    d->t.opts.dax_policy = VFSD_DAX_XATTR;
    fd = openat(d->t.dir_fd, "file", O_RDONLY | O_CLOEXEC);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(fsetxattr(fd, VFSD_DAX_XATTR_NAME, "", 0, 0), ==, 0);
    close(fd);

    /* Every fd number taken up to the limit: the next open gets EMFILE */
    for (fd = 0; fd < 4096; fd++) {
        if (fcntl(fd, F_GETFD) >= 0) {
            highest = fd;
        }
    }
    do {
        fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        g_assert_cmpint(fd, >=, 0);
        g_array_append_val(fillers, fd);
    } while (fd < highest);
    g_assert_cmpint(getrlimit(RLIMIT_NOFILE, &old), ==, 0);
    full = old;
    full.rlim_cur = fd + 1;
    g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &full), ==, 0);
    g_assert_cmpint(open("/dev/null", O_RDONLY | O_CLOEXEC), ==, -1);

    /* A GETATTR needs no fd of its own */
    r = test_req_new(FUSE_GETATTR, d->ino);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(&d->t, r, 4096, &out, sizeof(out), NULL), ==,
                    0);

    g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &old), ==, 0);
    for (i = 0; i < fillers->len; i++) {
        close(g_array_index(fillers, int, i));
    }
    g_assert_true(out.attr.flags & FUSE_ATTR_DAX);
}

static void put_file(DaxFixture *d, const char *name, mode_t mode,
                     const void *data, size_t len, off_t size)
{
    int fd = openat(d->t.dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC |
                    O_CLOEXEC, mode);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(fchmod(fd, mode), ==, 0);
    g_assert_cmpint(pwrite(fd, data, len, 0), ==, len);
    g_assert_cmpint(ftruncate(fd, size), ==, 0);
    close(fd);
}

static bool dax_flag(DaxFixture *d, uint64_t nodeid)
{
    TestReq *r = test_req_new(FUSE_GETATTR, nodeid);
    struct fuse_attr_out out;

    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(&d->t, r, 4096, &out, sizeof(out), NULL), ==,
                    0);
    return out.attr.flags & FUSE_ATTR_DAX;
}

static uint64_t elf_checks(DaxFixture *d)
{
    return vfsd_stats_count(d->t.fs.stats, VFSD_STATS_DAX_ELF_CHECK);
}

/*
 * --dax-policy=exec: programs by their mode, libraries by their first
 * bytes (Debian installs them 0644), large files by their size; not a
 * small data file, not an empty program (one being written), not four
 * bytes of ELF magic too short to be an ELF object.
 */
static void test_exec_policy(DaxFixture *d, gconstpointer data)
{
    static const char elf[64] = { 0x7f, 'E', 'L', 'F', 2, 1, 1 };
    static const char text[64] = "#!/bin/sh\necho a script\n";
    static const struct {
        const char *name;
        mode_t mode;
        const char *data;
        off_t size;
        bool dax;
    } files[] = {
        { "prog", 0755, text, 64, true },
        { "lib.so", 0644, elf, 64, true },
        { "data", 0644, text, 64, false },
        { "empty-prog", 0755, text, 0, false },
        { "big", 0644, text, 2 * MiB, true },
        { "short-magic", 0644, elf, 4, false },
    };
    VfsdStats *stats = vfsd_stats_new();
    struct fuse_attr attr;
    uint64_t lib = 0, made, fh;
    unsigned int i;

    d->t.opts.dax_policy = VFSD_DAX_EXEC;
    d->t.opts.dax_min_size = 2 * MiB;
    d->t.fs.stats = stats;
    for (i = 0; i < G_N_ELEMENTS(files); i++) {
        uint64_t ino;

        put_file(d, files[i].name, files[i].mode, files[i].data,
                 MIN(files[i].size, 64), files[i].size);
        ino = test_lookup(&d->t, FUSE_ROOT_ID, files[i].name, &attr);
        g_test_message("%s: %s", files[i].name,
                       attr.flags & FUSE_ATTR_DAX ? "dax" : "nodax");
        g_assert_cmpint(!!(attr.flags & FUSE_ATTR_DAX), ==, files[i].dax);
        if (!strcmp(files[i].name, "lib.so")) {
            lib = ino;
        }
    }
    /* Only lib.so and data were read: the others' mode or size decided */
    g_assert_cmpuint(elf_checks(d), ==, 2);

    /* The verdict is kept */
    g_assert_true(dax_flag(d, lib));
    test_lookup(&d->t, FUSE_ROOT_ID, "lib.so", &attr);
    g_assert_true(attr.flags & FUSE_ATTR_DAX);
    g_assert_cmpuint(elf_checks(d), ==, 2);

    /*
     * A changed file is looked at again at the next entry reply (a size
     * of its own: an mtime of coarse granularity may not have moved); a
     * GETATTR repeats the guest's choice until then
     */
    put_file(d, "lib.so", 0644, text, 64, 65);
    g_assert_true(dax_flag(d, lib));
    test_lookup(&d->t, FUSE_ROOT_ID, "lib.so", &attr);
    g_assert_false(attr.flags & FUSE_ATTR_DAX);
    g_assert_false(dax_flag(d, lib));
    put_file(d, "lib.so", 0644, elf, 64, 64);
    test_lookup(&d->t, FUSE_ROOT_ID, "lib.so", &attr);
    g_assert_true(attr.flags & FUSE_ATTR_DAX);
    g_assert_cmpuint(elf_checks(d), ==, 4);

    /* A chmod alone is no reason to look again */
    g_assert_cmpint(fchmodat(d->t.dir_fd, "lib.so", 0640, 0), ==, 0);
    test_lookup(&d->t, FUSE_ROOT_ID, "lib.so", &attr);
    g_assert_true(attr.flags & FUSE_ATTR_DAX);
    g_assert_cmpuint(elf_checks(d), ==, 4);

    /*
     * What an unpack does: a file made empty, then written; its attribute
     * replies keep the creation's choice, and nothing is read for them
     */
    made = test_create(&d->t, FUSE_ROOT_ID, "made.so", O_RDWR, &fh);
    g_assert_cmpint(test_write(&d->t, made, fh, 0, elf, sizeof(elf)), ==,
                    sizeof(elf));
    g_assert_false(dax_flag(d, made));
    g_assert_cmpuint(elf_checks(d), ==, 4);
    test_lookup(&d->t, FUSE_ROOT_ID, "made.so", &attr);
    g_assert_true(attr.flags & FUSE_ATTR_DAX);
    g_assert_cmpuint(elf_checks(d), ==, 5);
    d->t.fs.stats = NULL;
    vfsd_stats_free(stats);
}

static void test_map_upgrade_remove(DaxFixture *d, gconstpointer data)
{
    const uint64_t R = FUSE_SETUPMAPPING_FLAG_READ;
    const uint64_t W = FUSE_SETUPMAPPING_FLAG_WRITE;

    /* What a 6.12 guest does: read mapping, then the same range writable */
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, R), ==, 0);
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, R | W), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "map 0+200000 ro;map 0+200000 rw replace;");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 1);

    g_assert_cmpint(setup_mapping(d, 2 * MiB, 2 * MiB, 2 * MiB, R), ==, 0);
    g_assert_cmpint(setup_mapping(d, 4 * MiB, 6 * MiB, 2 * MiB, R), ==, 0);
    g_string_truncate(d->fake.log, 0);

    /* Three ranges, two adjacent: merged into as few unmaps as possible */
    const uint64_t ranges[][2] = {
        { 6 * MiB, 2 * MiB }, { 0, 2 * MiB }, { 2 * MiB, 2 * MiB },
    };
    g_assert_cmpint(remove_mapping(d, ranges, 3, 3), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "unmap 0+400000;unmap 600000+200000;");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 0);
    g_assert_cmpuint(d->fake.maps->len, ==, 0);
}

/*
 * A removal the guest got wrong is refused whole: nothing of it is
 * unmapped, not even its good ranges, so that the guest's view and the
 * window never part.
 */
static void test_remove_refused_whole(DaxFixture *d, gconstpointer data)
{
    /* The same range twice would unmap, and free, one mapping twice */
    static const uint64_t overlapping[][2] = { { 0, 2 * MiB }, { 0, 2 * MiB } };
    static const uint64_t cutting[][2] = {
        { 0, 2 * MiB }, { 2 * MiB, 2 * MiB },
    };
    static const uint64_t unaligned[][2] = {
        { 0, 2 * MiB }, { 4096, 100 },
    };
    static const uint64_t wrapping[][2] = {
        { 0, 2 * MiB }, { UINT64_MAX - 2 * MiB + 1, 4 * MiB },
    };
    static const uint64_t both[][2] = { { 2 * MiB, 4 * MiB }, { 0, 2 * MiB } };

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_assert_cmpint(setup_mapping(d, 2 * MiB, 2 * MiB, 4 * MiB, 3), ==, 0);
    g_string_truncate(d->fake.log, 0);

    g_assert_cmpint(remove_mapping(d, overlapping, 2, 2), ==, -EINVAL);
    /* Half of the 4 MiB mapping at 2 MiB */
    g_assert_cmpint(remove_mapping(d, cutting, 2, 2), ==, -EINVAL);
    g_assert_cmpint(remove_mapping(d, unaligned, 2, 2), ==, -EINVAL);
    g_assert_cmpint(remove_mapping(d, wrapping, 2, 2), ==, -EINVAL);
    g_assert_cmpstr(d->fake.log->str, ==, "");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 2);

    /* Given in any order, adjacent ranges go in one unmap */
    g_assert_cmpint(remove_mapping(d, both, 2, 2), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 0+600000;");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 0);
}

static void test_without_replace(DaxFixture *d, gconstpointer data)
{
    /*
     * Upstream QEMU cannot replace a mapping: an upgrade to writable would
     * unmap the range under its readers.  The read gets a writable
     * mapping at once, and the upgrade finds nothing to do.
     */
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "map 0+200000 rw;");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 1);
}

static void test_without_replace_eof(DaxFixture *d, gconstpointer data)
{
    const uint64_t range[][2] = { { 0, 4 * MiB } };

    /* The file is 8 MiB: a range across its end stops there */
    g_assert_cmpint(setup_mapping(d, 6 * MiB, 0, 4 * MiB, 2), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "map 0+200000 rw;");
    /* ... and is removed as the one mapping the front-end has */
    g_assert_cmpint(remove_mapping(d, range, 1, 1), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "map 0+200000 rw;unmap 0+200000;");
    g_string_truncate(d->fake.log, 0);

    /* Wholly past the end: nothing is mapped until the file grows */
    g_assert_cmpint(setup_mapping(d, 8 * MiB, 0, 2 * MiB, 2), ==, 0);
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 1);
    g_assert_cmpint(remove_mapping(d, range, 1, 1), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "");

    /*
     * Ending on a partial page, which upstream QEMU cannot map: refused,
     * or the guest would read zeros for the file's last bytes.
     */
    g_assert_cmpint(test_write(&d->t, d->ino, d->fh, 8 * MiB, "x", 1),
                    ==, 1);
    g_assert_cmpint(setup_mapping(d, 8 * MiB, 0, 2 * MiB, 2), ==, -EIO);
    g_assert_cmpint(setup_mapping(d, 6 * MiB, 0, 4 * MiB, 2), ==, -EIO);
    g_assert_cmpstr(d->fake.log->str, ==, "");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 0);
    /* Inside the file, the partial page elsewhere does not matter */
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "map 0+200000 rw;");
}

static void test_without_replace_adjacent(DaxFixture *d, gconstpointer data)
{
    const uint64_t both[][2] = { { 0, 4 * MiB } };

    /* Upstream QEMU unmaps only whole single mappings: no merged runs */
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    g_assert_cmpint(setup_mapping(d, 2 * MiB, 2 * MiB, 2 * MiB, 2), ==, 0);
    g_assert_cmpint(remove_mapping(d, both, 1, 1), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "map 0+200000 rw;map 200000+200000 rw;"
                    "unmap 0+200000;unmap 200000+200000;");
}

static void test_bad_requests(DaxFixture *d, gconstpointer data)
{
    const uint64_t bad[][2] = { { 4096, 0 } };
    const uint64_t partial[][2] = { { 0, MiB } };
    const uint64_t overlap[][2] = { { 0, 2 * MiB }, { MiB, 2 * MiB } };
    TestReq *r;

    /* Unaligned, empty, overflowing, unknown flags */
    g_assert_cmpint(setup_mapping(d, 1, 0, 2 * MiB, 2), ==, -EINVAL);
    g_assert_cmpint(setup_mapping(d, 0, 100, 2 * MiB, 2), ==, -EINVAL);
    g_assert_cmpint(setup_mapping(d, 0, 0, 0, 2), ==, -EINVAL);
    g_assert_cmpint(setup_mapping(d, 0, UINT64_MAX - 4095, 8192, 2), ==,
                    -EINVAL);
    g_assert_cmpint(setup_mapping(d, UINT64_MAX - 4095, 0, 8192, 2), ==,
                    -EINVAL);
    g_assert_cmpint(setup_mapping(d, 0, 0, 4096, 1 << 7), ==, -EINVAL);
    g_assert_cmpstr(d->fake.log->str, ==, "");

    /* Over part of an existing mapping */
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    g_assert_cmpint(setup_mapping(d, 0, MiB, 2 * MiB, 2), ==, -EINVAL);

    /* Removals: empty, partial, overlapping, counts that lie */
    g_assert_cmpint(remove_mapping(d, bad, 1, 1), ==, -EINVAL);
    g_assert_cmpint(remove_mapping(d, partial, 1, 1), ==, -EINVAL);
    g_assert_cmpint(remove_mapping(d, overlap, 2, 2), ==, -EINVAL);
    g_assert_cmpint(remove_mapping(d, partial, 1, 2), ==, -EINVAL);
    g_assert_cmpint(remove_mapping(d, partial, 1, 0), ==, -EINVAL);
    g_assert_cmpint(remove_mapping(d, partial, 1, 100000), ==, -EINVAL);
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 1);

    /* Not a regular file */
    r = test_req_new(FUSE_SETUPMAPPING, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_setupmapping_in){ .len = 4096,
                                                    .flags = 2 },
                 sizeof(struct fuse_setupmapping_in));
    g_assert_cmpint(test_send(&d->t, r, 4096, NULL, 0, NULL), ==, -EINVAL);

    /* The front-end refuses: an error, and nothing recorded */
    d->fake.fail_next = true;
    g_assert_cmpint(setup_mapping(d, 0, 4 * MiB, 2 * MiB, 2), ==, -EIO);
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 1);
}

static bool replace_of(DaxFixture *d)
{
    return d->fake.replace;
}

static int guest_truncate(DaxFixture *d, uint64_t size)
{
    struct fuse_setattr_in in = { .valid = FATTR_SIZE, .size = size };
    TestReq *r = test_req_new(FUSE_SETATTR, d->ino);

    test_req_add(r, &in, sizeof(in));
    return test_send(&d->t, r, 4096, NULL, 0, NULL);
}

static void test_guest_shrink_cuts(DaxFixture *d, gconstpointer data)
{
    const uint64_t both[][2] = { { 0, 2 * MiB }, { 8 * MiB, 2 * MiB } };
    TestReq *r;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_assert_cmpint(setup_mapping(d, 4 * MiB, 8 * MiB, 2 * MiB, 3), ==, 0);
    g_string_truncate(d->fake.log, 0);

    /*
     * Before the file shrinks, nothing past its new end stays mapped; the
     * page that holds the end does.
     */
    g_assert_cmpint(guest_truncate(d, 4096), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "unmap 0+200000;map 0+1000 rw;unmap 800000+200000;");

    /* A punched hole is still part of the file: it stays mapped */
    g_string_truncate(d->fake.log, 0);
    r = test_req_new(FUSE_FALLOCATE, d->ino);
    test_req_add(r, &(struct fuse_fallocate_in){
                     .fh = d->fh, .offset = 0, .length = 2 * MiB,
                     .mode = 0x01 | 0x02 /* KEEP_SIZE | PUNCH_HOLE */ },
                 sizeof(struct fuse_fallocate_in));
    g_assert_cmpint(test_send(&d->t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "");

    test_open(&d->t, d->ino, O_RDWR | O_TRUNC);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 0+1000;");
    g_assert_cmpuint(d->fake.maps->len, ==, 0);

    /*
     * The guest keeps its ranges and writes through them once the file
     * is long again: they map the file whole before it can know.
     */
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 2);
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(guest_truncate(d, 8 * MiB), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "map 0+200000 rw;map 800000+200000 rw;");
    g_assert_cmpuint(d->fake.maps->len, ==, 2);

    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(remove_mapping(d, both, 2, 2), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "unmap 0+200000;unmap 800000+200000;");
    g_assert_cmpuint(d->fake.maps->len, ==, 0);
}

/* CREATE with O_TRUNC of a file that exists cuts like OPEN with O_TRUNC */
static void test_create_trunc_cuts(DaxFixture *d, gconstpointer data)
{
    TestReq *r;
    struct stat st;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_assert_cmpint(setup_mapping(d, 4 * MiB, 8 * MiB, 2 * MiB, 3), ==, 0);
    g_string_truncate(d->fake.log, 0);

    r = test_req_new(FUSE_CREATE, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_create_in){ .flags = O_RDWR | O_TRUNC,
                                              .mode = S_IFREG | 0644 },
                 sizeof(struct fuse_create_in));
    test_req_add_str(r, "file");
    g_assert_cmpint(test_send(&d->t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpint(fstatat(d->t.dir_fd, "file", &st, 0), ==, 0);
    g_assert_cmpint(st.st_size, ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "unmap 0+200000;unmap 800000+200000;");
    g_assert_cmpuint(d->fake.maps->len, ==, 0);
}

static void test_destroy_unmaps_all(DaxFixture *d, gconstpointer data)
{
    TestReq *r;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    g_assert_cmpint(setup_mapping(d, 0, 4 * MiB, 2 * MiB, 3), ==, 0);
    g_string_truncate(d->fake.log, 0);
    r = test_req_new(FUSE_DESTROY, 0);
    g_assert_cmpint(test_send(&d->t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "unmap 0+200000;unmap 400000+200000;");
    g_assert_cmpuint(d->fake.maps->len, ==, 0);
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 0);
}

/*
 * With a front-end that takes unmaps without answering, the ranges the
 * guest gives back go that way; the daemon's own unmaps (the guest
 * shrinking a file, DESTROY) still wait, since what follows them relies
 * on the range being gone.
 */
static void test_remove_does_not_wait(DaxFixture *d, gconstpointer data)
{
    const uint64_t ranges[][2] = { { 0, 2 * MiB }, { 2 * MiB, 2 * MiB } };
    struct fuse_setattr_in in = { .valid = FATTR_SIZE, .size = 1 * MiB };
    TestReq *r;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    g_assert_cmpint(setup_mapping(d, 2 * MiB, 2 * MiB, 2 * MiB, 2), ==, 0);
    g_assert_cmpint(setup_mapping(d, 4 * MiB, 4 * MiB, 2 * MiB, 2), ==, 0);
    g_assert_cmpint(setup_mapping(d, 6 * MiB, 8 * MiB, 2 * MiB, 2), ==, 0);
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(remove_mapping(d, ranges, 2, 2), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "nowait unmap 0+400000;");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 2);

    /* A range given back can be mapped again at once */
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    g_string_truncate(d->fake.log, 0);

    r = test_req_new(FUSE_SETATTR, d->ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(&d->t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "unmap 0+200000;map 0+100000 ro;"
                    "unmap 400000+200000;unmap 800000+200000;");
    g_string_truncate(d->fake.log, 0);

    r = test_req_new(FUSE_DESTROY, 0);
    g_assert_cmpint(test_send(&d->t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 0+100000;");
    g_assert_cmpuint(d->fake.maps->len, ==, 0);
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 0);
}

/*
 * Lazy unmaps: a range the guest removes stays mapped until a map takes
 * the slot over (one replace instead of an unmap and a map) or the delay
 * runs out.
 */
static void test_lazy_takeover(DaxFixture *d, gconstpointer data)
{
    const uint64_t first[][2] = { { 0, 2 * MiB } };

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    g_assert_cmpint(setup_mapping(d, 2 * MiB, 2 * MiB, 2 * MiB, 2), ==, 0);
    g_string_truncate(d->fake.log, 0);

    g_assert_cmpint(remove_mapping(d, first, 1, 1), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 1);
    g_assert_cmpuint(d->fake.maps->len, ==, 2);

    /* Removing it again (a retry) finds nothing to do */
    g_assert_cmpint(remove_mapping(d, first, 1, 1), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "");

    /* Another part of the file into the same slot */
    g_assert_cmpint(setup_mapping(d, 4 * MiB, 0, 2 * MiB, 3), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "map 0+200000 rw replace;");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 2);
    g_assert_cmpuint(d->fake.maps->len, ==, 2);
    g_assert_cmpuint(g_array_index(d->fake.maps, FakeMap, 1).foffset, ==,
                     4 * MiB);

    /* Taken over, it is live again: nothing is unmapped behind it */
    g_assert_cmpint(poll(&(struct pollfd){
                             .fd = vfsd_dax_flush_fd(d->t.fs.dax),
                             .events = POLLIN }, 1, 4 * LAZY_DELAY_MS),
                    ==, 1);
    vfsd_dax_flush(&d->t.fs);
    g_assert_cmpstr(d->fake.log->str, ==, "map 0+200000 rw replace;");
    g_assert_cmpuint(d->fake.maps->len, ==, 2);
}

static void test_lazy_flush(DaxFixture *d, gconstpointer data)
{
    const uint64_t ranges[][2] = {
        { 6 * MiB, 2 * MiB }, { 0, 2 * MiB }, { 2 * MiB, 2 * MiB },
    };
    struct pollfd pfd = {
        .fd = vfsd_dax_flush_fd(d->t.fs.dax), .events = POLLIN,
    };
    gint64 start;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    g_assert_cmpint(setup_mapping(d, 2 * MiB, 2 * MiB, 2 * MiB, 2), ==, 0);
    g_assert_cmpint(setup_mapping(d, 4 * MiB, 6 * MiB, 2 * MiB, 2), ==, 0);
    g_string_truncate(d->fake.log, 0);

    start = g_get_monotonic_time();
    g_assert_cmpint(remove_mapping(d, ranges, 3, 3), ==, 0);
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 0);
    g_assert_cmpint(poll(&pfd, 1, 0), ==, 0);

    /* Not before the delay; then all at once, adjacent ranges merged */
    g_assert_cmpint(poll(&pfd, 1, 20 * LAZY_DELAY_MS), ==, 1);
    g_assert_cmpint(g_get_monotonic_time() - start, >=,
                    LAZY_DELAY_MS * 1000);
    vfsd_dax_flush(&d->t.fs);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "nowait unmap 0+400000;nowait unmap 600000+200000;");
    g_assert_cmpuint(d->fake.maps->len, ==, 0);
    g_assert_cmpint(poll(&pfd, 1, 2 * LAZY_DELAY_MS), ==, 0);
}

/* A new mapping that only partly covers a kept range unmaps it first */
static void test_lazy_in_the_way(DaxFixture *d, gconstpointer data)
{
    const uint64_t first[][2] = { { 0, 2 * MiB } };

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    g_assert_cmpint(remove_mapping(d, first, 1, 1), ==, 0);
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(setup_mapping(d, 0, MiB, 2 * MiB, 2), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "nowait unmap 0+200000;map 100000+200000 ro;");
    g_assert_cmpuint(d->fake.maps->len, ==, 1);
}

/*
 * Shrinking the file drops the kept ranges it cuts through, rather than
 * cutting them like live ones; DESTROY drops all of them.
 */
static void test_lazy_shrink_destroy(DaxFixture *d, gconstpointer data)
{
    const uint64_t ranges[][2] = { { 2 * MiB, 2 * MiB }, { 4 * MiB, 2 * MiB } };
    TestReq *r;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_assert_cmpint(setup_mapping(d, 0, 2 * MiB, 2 * MiB, 3), ==, 0);
    g_assert_cmpint(setup_mapping(d, 4 * MiB, 4 * MiB, 2 * MiB, 3), ==, 0);
    g_assert_cmpint(remove_mapping(d, ranges, 2, 2), ==, 0);
    g_string_truncate(d->fake.log, 0);

    g_assert_cmpint(guest_truncate(d, 3 * MiB), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 400000+200000;");
    g_assert_cmpuint(d->fake.maps->len, ==, 2);

    g_string_truncate(d->fake.log, 0);
    r = test_req_new(FUSE_DESTROY, 0);
    g_assert_cmpint(test_send(&d->t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 0+400000;");
    g_assert_cmpuint(d->fake.maps->len, ==, 0);
}

/* Without replace, a kept range would cost an unmap anyway: none kept */
static void test_lazy_without_replace(DaxFixture *d, gconstpointer data)
{
    const uint64_t first[][2] = { { 0, 2 * MiB } };

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(remove_mapping(d, first, 1, 1), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "nowait unmap 0+200000;");
    g_assert_cmpuint(d->fake.maps->len, ==, 0);
}

static void test_mapping_keeps_inode(DaxFixture *d, gconstpointer data)
{
    struct fuse_forget_in fin = { .nlookup = 1 };
    TestReq *r;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    /* The guest forgets the inode while it is still mapped */
    r = test_req_new(FUSE_RELEASE, d->ino);
    test_req_add(r, &(struct fuse_release_in){ .fh = d->fh },
                 sizeof(struct fuse_release_in));
    g_assert_cmpint(test_send(&d->t, r, 4096, NULL, 0, NULL), ==, 0);
    r = test_req_new(FUSE_FORGET, d->ino);
    test_req_add(r, &fin, sizeof(fin));
    g_assert_cmpint(test_send(&d->t, r, 4096, NULL, 0, NULL), ==, 1);
    /* Its mapping is still tracked, and still removable */
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 1);
    const uint64_t ranges[][2] = { { 0, 2 * MiB } };
    g_assert_cmpint(remove_mapping(d, ranges, 1, 1), ==, 0);
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 0);
}

/*
 * Without a window a SETUPMAPPING is EOPNOTSUPP whatever its flags
 * (@data): ones we do not know are EINVAL (server.c) only where there is
 * a window to map into, the order dax.c kept when it checked them itself.
 */
static void test_no_window(gconstpointer data)
{
    TestFs t;
    TestReq *r;
    uint64_t fh, ino;

    test_fs_setup(&t, NULL);
    test_fs_init_session(&t, FUSE_MAP_ALIGNMENT);
    ino = test_create(&t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    r = test_req_new(FUSE_SETUPMAPPING, ino);
    test_req_add(r, &(struct fuse_setupmapping_in){
                     .len = 4096, .flags = GPOINTER_TO_UINT(data) },
                 sizeof(struct fuse_setupmapping_in));
    g_assert_cmpint(test_send(&t, r, 4096, NULL, 0, NULL), ==, -EOPNOTSUPP);
    test_fs_teardown(&t);
}

/*
 * --watch-truncate.  The host side of the file is the scratch dir; the
 * events are handled by calling vfsd_dax_watch_events() directly, as the
 * daemon's watch thread does when the inotify fd is readable.
 */
static void watch_setup(DaxFixture *d, gconstpointer data)
{
    g_autofree char *err = NULL;

    setup(d, data);
    g_assert_true(vfsd_dax_watch_start(d->t.fs.dax, 1, &err));
}

static void host_truncate_file(DaxFixture *d, const char *name,
                               uint64_t size)
{
    int fd = openat(d->t.dir_fd, name, O_WRONLY | O_CLOEXEC);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, size), ==, 0);
    close(fd);
}

static void host_truncate(DaxFixture *d, uint64_t size)
{
    host_truncate_file(d, "file", size);
}

/* inotify watches on the daemon's inotify fd, as the kernel counts them */
static unsigned int count_watches(DaxFixture *d)
{
    g_autofree char *path = g_strdup_printf(
        "/proc/self/fdinfo/%d", vfsd_dax_watch_fd(d->t.fs.dax));
    g_autofree char *info = NULL;
    unsigned int n = 0;
    const char *p;

    g_assert_true(g_file_get_contents(path, &info, NULL, NULL));
    for (p = info; (p = strstr(p, "inotify wd:")); p++) {
        n++;
    }
    return n;
}

static int getattr(DaxFixture *d, struct fuse_attr_out *out)
{
    TestReq *r = test_req_new(FUSE_GETATTR, d->ino);

    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    return test_send(&d->t, r, 4096, out, sizeof(*out), NULL);
}

static void test_watch_cut_and_remove(DaxFixture *d, gconstpointer data)
{
    const uint64_t all[][2] = {
        { 0, 2 * MiB }, { 2 * MiB, 2 * MiB }, { 6 * MiB, 2 * MiB },
    };

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_assert_cmpint(setup_mapping(d, 2 * MiB, 2 * MiB, 2 * MiB, 3), ==, 0);
    g_assert_cmpint(setup_mapping(d, 4 * MiB, 6 * MiB, 2 * MiB, 2), ==, 0);
    /* One file, one watch */
    g_assert_cmpuint(count_watches(d), ==, 1);
    g_string_truncate(d->fake.log, 0);

    /*
     * The new end falls inside the second range: its head is mapped
     * again up to the page holding the end; the third range is wholly
     * past the end and goes.  The first is still backed.
     */
    host_truncate(d, 3 * MiB + 100);
    vfsd_dax_watch_events(&d->t.fs);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "unmap 200000+200000;map 200000+101000 rw;"
                    "unmap 600000+200000;");
    g_assert_cmpuint(d->fake.maps->len, ==, 2);
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 3);

    /* Nothing changed since: nothing to do */
    g_string_truncate(d->fake.log, 0);
    vfsd_dax_watch_events(&d->t.fs);
    g_assert_cmpstr(d->fake.log->str, ==, "");

    /*
     * The guest drops its three ranges: the front-end is asked to unmap
     * exactly what it still maps (the fake refuses anything else).
     */
    g_assert_cmpint(remove_mapping(d, all, 3, 3), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 0+301000;");
    g_assert_cmpuint(d->fake.maps->len, ==, 0);
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 0);
    /* The last mapping gone, so is the watch */
    g_assert_cmpuint(count_watches(d), ==, 0);
}

static void test_watch_grow_back(DaxFixture *d, gconstpointer data)
{
    bool replace = GPOINTER_TO_INT(data) == 0;

    g_assert_cmpint(setup_mapping(d, 2 * MiB, 0, 2 * MiB, 3), ==, 0);
    g_assert_cmpint(setup_mapping(d, 6 * MiB, 2 * MiB, 2 * MiB, 2), ==, 0);
    host_truncate(d, 3 * MiB);
    vfsd_dax_watch_events(&d->t.fs);
    g_string_truncate(d->fake.log, 0);

    /* The host makes the file long again: both ranges mapped whole */
    host_truncate(d, 8 * MiB);
    vfsd_dax_watch_events(&d->t.fs);
    g_assert_cmpstr(d->fake.log->str, ==, replace ?
                    "map 0+200000 rw replace;map 200000+200000 ro;" :
                    "unmap 0+100000;map 0+200000 rw;map 200000+200000 rw;");
    g_assert_cmpuint(d->fake.maps->len, ==, 2);

    /* Whole again, they go in one unmap (upstream QEMU: one each) */
    g_string_truncate(d->fake.log, 0);
    const uint64_t both[][2] = { { 0, 4 * MiB } };
    g_assert_cmpint(remove_mapping(d, both, 1, 1), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, replace ? "unmap 0+400000;" :
                    "unmap 0+200000;unmap 200000+200000;");
}

static void test_watch_remap_cut_range(DaxFixture *d, gconstpointer data)
{
    bool replace = GPOINTER_TO_INT(data) == 0;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    g_assert_cmpint(setup_mapping(d, 2 * MiB, 2 * MiB, 2 * MiB, 2), ==, 0);
    host_truncate(d, 4096);
    vfsd_dax_watch_events(&d->t.fs);
    g_string_truncate(d->fake.log, 0);

    if (!replace) {
        /*
         * Upstream QEMU: the page the file still has stays as it is,
         * writable already, and the range past the end maps nothing.
         */
        g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
        g_assert_cmpint(setup_mapping(d, 2 * MiB, 2 * MiB, 2 * MiB, 3), ==,
                        0);
        g_assert_cmpstr(d->fake.log->str, ==, "");
        g_assert_cmpuint(d->fake.maps->len, ==, 1);
        g_assert_cmpuint(count_watches(d), ==, 1);
        return;
    }
    /*
     * The guest maps its ranges anew (e.g. upgrading to writable): the
     * part still mapped is replaced, still only up to the end of the
     * file; the range wholly past the end stays unmapped.
     */
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_assert_cmpint(setup_mapping(d, 2 * MiB, 2 * MiB, 2 * MiB, 3), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, replace ?
                    "map 0+1000 rw replace;" :
                    "unmap 0+1000;map 0+1000 rw;");
    g_assert_cmpuint(d->fake.maps->len, ==, 1);
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 2);
    g_assert_cmpuint(count_watches(d), ==, 1);
}

static void test_watch_guest_shrink(DaxFixture *d, gconstpointer data)
{
    struct fuse_setattr_in in = { .valid = FATTR_SIZE, .size = 4096 };
    TestReq *r;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_assert_cmpint(setup_mapping(d, 4 * MiB, 8 * MiB, 2 * MiB, 3), ==, 0);
    g_string_truncate(d->fake.log, 0);

    /*
     * As without the watch, cut before the truncate; the events that
     * follow find the size they expect and change nothing.
     */
    r = test_req_new(FUSE_SETATTR, d->ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(&d->t, r, 4096, NULL, 0, NULL), ==, 0);
    test_open(&d->t, d->ino, O_RDWR | O_TRUNC);
    vfsd_dax_watch_events(&d->t.fs);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 0+200000;map 0+1000 rw;"
                    "unmap 800000+200000;unmap 0+1000;");
    g_assert_cmpuint(d->fake.maps->len, ==, 0);
}

static void test_watch_before_event(DaxFixture *d, gconstpointer data)
{
    struct fuse_attr_out out;

    g_assert_cmpint(setup_mapping(d, 4 * MiB, 0, 2 * MiB, 3), ==, 0);
    g_string_truncate(d->fake.log, 0);

    /*
     * The guest asks for the size before the watch thread got to the
     * event: the reply does not wait for it.
     */
    host_truncate(d, 0);
    g_assert_cmpint(getattr(d, &out), ==, 0);
    g_assert_cmpuint(out.attr.size, ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 0+200000;");
    vfsd_dax_watch_events(&d->t.fs);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 0+200000;");

    /*
     * The guest extends the file itself, then writes through its range:
     * the range must map the file again before the write's reply.
     */
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(test_write(&d->t, d->ino, d->fh, 5 * MiB, "y", 1),
                    ==, 1);
    g_assert_cmpstr(d->fake.log->str, ==, "map 0+101000 rw;");
    g_assert_cmpuint(d->fake.maps->len, ==, 1);
}

static void test_watch_limit(DaxFixture *d, gconstpointer data)
{
    uint64_t ino1 = d->ino, fh;
    uint64_t ino2 = test_create(&d->t, FUSE_ROOT_ID, "other", O_RDWR, &fh);
    TestReq *r;

    g_assert_cmpint(test_write(&d->t, ino2, fh, 4 * MiB - 1, "z", 1), ==, 1);
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    /* The fixture allows one watched file: the second is not watched */
    d->ino = ino2;
    g_assert_cmpint(setup_mapping(d, 0, 2 * MiB, 2 * MiB, 2), ==, 0);
    g_assert_cmpuint(count_watches(d), ==, 1);
    g_string_truncate(d->fake.log, 0);

    /* Its truncate goes unheard... */
    host_truncate_file(d, "other", 0);
    vfsd_dax_watch_events(&d->t.fs);
    g_assert_cmpstr(d->fake.log->str, ==, "");

    /* ...until the size is read for the guest */
    r = test_req_new(FUSE_GETATTR, ino2);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(&d->t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 200000+200000;");

    /* The first file's watch gone, a file mapped afresh gets one */
    const uint64_t first[][2] = { { 0, 2 * MiB } };
    d->ino = ino1;
    g_assert_cmpint(remove_mapping(d, first, 1, 1), ==, 0);
    g_assert_cmpuint(count_watches(d), ==, 0);
    g_assert_cmpint(setup_mapping(d, 0, 4 * MiB, 2 * MiB, 2), ==, 0);
    g_assert_cmpuint(count_watches(d), ==, 1);
}

static void test_watch_off(DaxFixture *d, gconstpointer data)
{
    g_assert_cmpint(setup_mapping(d, 4 * MiB, 0, 2 * MiB, 3), ==, 0);
    g_string_truncate(d->fake.log, 0);
    host_truncate(d, 0);
    /* Without the option, the size the guest is told still counts */
    g_assert_cmpint(getattr(d, &(struct fuse_attr_out){ 0 }), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 0+200000;");
}

/*
 * A range past the end of a small file: only the pages the file has are
 * mapped, and the mapping grows with the file before the guest can know,
 * from its own extending write or from attributes after a host write.
 */
static void test_never_past_eof(DaxFixture *d, gconstpointer data)
{
    g_autofree char *buf = g_malloc0(64 * 1024);
    uint64_t fh;
    int fd;

    d->ino = test_create(&d->t, FUSE_ROOT_ID, "small", O_RDWR, &fh);
    g_assert_cmpint(test_write(&d->t, d->ino, fh, 0, buf, 4200), ==, 4200);
    g_string_truncate(d->fake.log, 0);

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_assert_cmpint(setup_mapping(d, 2 * MiB, 2 * MiB, 2 * MiB, 2), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "map 0+2000 rw;");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 2);

    /* Within the last page: nothing to do */
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(test_write(&d->t, d->ino, fh, 4200, buf, 100), ==, 100);
    g_assert_cmpstr(d->fake.log->str, ==, "");
    /* 4300 + 64 KiB: 18 pages, in one step over the old mapping */
    g_assert_cmpint(test_write(&d->t, d->ino, fh, 4300, buf, 64 * 1024),
                    ==, 64 * 1024);
    g_assert_cmpstr(d->fake.log->str, ==,
                    replace_of(d) ? "map 0+12000 rw replace;" :
                    "unmap 0+2000;map 0+12000 rw;");

    /* On the host, past the first range: the guest learns it from LOOKUP */
    fd = openat(d->t.dir_fd, "small", O_WRONLY | O_CLOEXEC);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pwrite(fd, "z", 1, 3 * MiB), ==, 1);
    close(fd);
    g_string_truncate(d->fake.log, 0);
    test_lookup(&d->t, FUSE_ROOT_ID, "small", NULL);
    g_assert_cmpstr(d->fake.log->str, ==, replace_of(d) ?
                    "map 0+200000 rw replace;map 200000+101000 ro;" :
                    "unmap 0+12000;map 0+200000 rw;map 200000+101000 ro;");

    /* Told again, nothing changes */
    g_string_truncate(d->fake.log, 0);
    test_lookup(&d->t, FUSE_ROOT_ID, "small", NULL);
    g_assert_cmpstr(d->fake.log->str, ==, "");
}

/*
 * Sizes read before the window's lock may be stale: another request
 * grew the file meanwhile.  The guest writes through the ranges that
 * growth mapped, so acting on the old size would cut them, and its
 * writes would be lost.
 */
static void test_stale_size(DaxFixture *d, gconstpointer data)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(&d->t.fs, d->ino);

    g_assert_cmpint(setup_mapping(d, 4 * MiB, 0, 2 * MiB, 3), ==, 0);
    g_string_truncate(d->fake.log, 0);
    /* A statx from before the file reached 8 MiB */
    vfsd_dax_size_seen(&d->t.fs, inode, 4096);
    g_assert_cmpstr(d->fake.log->str, ==, "");
    g_assert_cmpuint(g_array_index(d->fake.maps, FakeMap, 0).len, ==,
                     2 * MiB);
}

/*
 * Between the cut before one of our truncates and the truncate itself,
 * the file still has its old size: a size read then must not map the
 * cut range again, or it would be past the end once the truncate is done.
 */
static void test_truncate_holds_off_growth(DaxFixture *d, gconstpointer data)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(&d->t.fs, d->ino);
    int fd;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_string_truncate(d->fake.log, 0);
    vfsd_dax_truncate_begin(&d->t.fs, inode->dev, inode->ino, inode->fd,
                            4096);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 0+200000;map 0+1000 rw;");
    g_string_truncate(d->fake.log, 0);
    vfsd_dax_size_seen(&d->t.fs, inode, 8 * MiB);
    vfsd_dax_guest_grew(&d->t.fs, inode);
    g_assert_cmpstr(d->fake.log->str, ==, "");

    fd = openat(d->t.dir_fd, "file", O_WRONLY | O_CLOEXEC);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, 4096), ==, 0);
    close(fd);
    vfsd_dax_truncate_end(&d->t.fs, inode->dev, inode->ino, inode->fd);
    g_assert_cmpstr(d->fake.log->str, ==, "");
    g_assert_cmpuint(g_array_index(d->fake.maps, FakeMap, 0).len, ==, 4096);
}

/*
 * One host file reached through two mounts is two of our inodes; the
 * guest truncating it through one must cut what it mapped through the
 * other.  The second inode is made by giving the first one another
 * mount id, as if it had been looked up through another mount.
 */
static void test_truncate_other_inode(DaxFixture *d, gconstpointer data)
{
    VfsdInodeStore *st = &d->t.fs.inodes;
    g_autoptr(VfsdInode) first = vfsd_inode_get(&d->t.fs, d->ino);
    uint64_t other;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_mutex_lock(&st->lock);
    g_assert_true(g_hash_table_steal(st->by_key, first));
    first->mnt_id ^= 1ULL << 40;
    g_hash_table_insert(st->by_key, first, first);
    g_mutex_unlock(&st->lock);
    other = test_lookup(&d->t, FUSE_ROOT_ID, "file", NULL);
    g_assert_cmpuint(other, !=, d->ino);
    g_string_truncate(d->fake.log, 0);

    d->ino = other;
    g_assert_cmpint(guest_truncate(d, 4096), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 0+200000;map 0+1000 rw;");

    /* And grows back with it */
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(guest_truncate(d, 8 * MiB), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "map 0+200000 rw replace;");
}

/*
 * Migration: the table one window saves, loaded into a new window on the
 * same file system, as a destination daemon finds its inodes restored
 * under the guest's node ids.
 */
#define STATE_HEADER 12
#define STATE_RECORD 40

static GByteArray *save_state(DaxFixture *d)
{
    VfsdMigWriter w = { .buf = g_byte_array_new() };
    g_autofree char *err = NULL;

    g_assert_true(vfsd_dax_save(&d->t.fs, &w, &err));
    return w.buf;
}

/* The source window goes away; a new one, with nothing mapped, takes over */
static void new_window(DaxFixture *d)
{
    VfsdDaxBackend be = {
        .available = fake_available,
        .can_replace = fake_can_replace,
        .can_migrate = fake_can_migrate,
        .map = fake_map,
        .unmap = fake_unmap,
        .opaque = &d->fake,
    };

    vfsd_dax_forget_all(&d->t.fs);
    vfsd_dax_free(d->t.fs.dax);
    d->t.fs.dax = vfsd_dax_new(&be);
    g_array_set_size(d->fake.maps, 0);
    g_string_truncate(d->fake.log, 0);
}

static bool load_state(DaxFixture *d, const void *p, size_t len, char **err)
{
    VfsdMigReader r;

    vfsd_mig_reader_init(&r, p, len);
    return vfsd_dax_load(&d->t.fs, &r, err);
}

static int cmp_fake_map(gconstpointer a, gconstpointer b)
{
    const FakeMap *x = a, *y = b;

    return x->start < y->start ? -1 : x->start > y->start;
}

static void test_migrate_roundtrip(DaxFixture *d, gconstpointer data)
{
    g_autoptr(GByteArray) state = NULL;
    g_autoptr(GArray) before = NULL;
    g_autofree char *err = NULL;
    const uint64_t ranges[][2] = { { 4 * MiB, 2 * MiB } };
    guint i;

    /* Nothing mapped: no section, as for a guest without DAX */
    state = save_state(d);
    g_assert_cmpuint(state->len, ==, 0);
    g_clear_pointer(&state, g_byte_array_unref);

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB,
                                  FUSE_SETUPMAPPING_FLAG_READ), ==, 0);
    g_assert_cmpint(setup_mapping(d, 2 * MiB, 4 * MiB, 2 * MiB,
                                  FUSE_SETUPMAPPING_FLAG_READ |
                                  FUSE_SETUPMAPPING_FLAG_WRITE), ==, 0);
    /* Half past the end of the 8 MiB file: only what the file backs */
    g_assert_cmpint(setup_mapping(d, 6 * MiB, 10 * MiB, 4 * MiB,
                                  FUSE_SETUPMAPPING_FLAG_READ), ==, 0);
    before = g_array_copy(d->fake.maps);
    g_array_sort(before, cmp_fake_map);
    g_assert_cmpuint(before->len, ==, 3);

    state = save_state(d);
    g_assert_cmpuint(state->len, ==, STATE_HEADER + 3 * STATE_RECORD);
    new_window(d);

    g_assert_true(load_state(d, state->data, state->len, &err));
    /* Nothing is mapped while the rest of the state may still come */
    g_assert_cmpuint(d->fake.maps->len, ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "");
    g_assert_true(vfsd_dax_restore(&d->t.fs, &err));
    g_assert_null(err);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "map 0+200000 ro;map 400000+200000 rw;"
                    "map a00000+200000 ro;");

    g_array_sort(d->fake.maps, cmp_fake_map);
    g_assert_cmpuint(d->fake.maps->len, ==, before->len);
    for (i = 0; i < before->len; i++) {
        FakeMap *a = &g_array_index(before, FakeMap, i);
        FakeMap *b = &g_array_index(d->fake.maps, FakeMap, i);

        g_assert_cmphex(a->start, ==, b->start);
        g_assert_cmphex(a->len, ==, b->len);
        g_assert_cmphex(a->foffset, ==, b->foffset);
        g_assert_cmphex(a->flags, ==, b->flags);
        g_assert_cmpuint(a->st.st_ino, ==, b->st.st_ino);
        g_assert_cmpuint(a->st.st_dev, ==, b->st.st_dev);
    }
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 3);

    /* The records are back too: the guest removes what it mapped */
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(remove_mapping(d, ranges, 1, 1), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 400000+200000;");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 2);
}

/*
 * A file mapped writable is written back when the state is saved (for a
 * destination on another host); when that cannot be done, the save fails
 * rather than leave the guest's writes behind.  A read-only one is not.
 */
static void test_migrate_write_back(DaxFixture *d, gconstpointer data)
{
    VfsdMigWriter w = { .buf = g_byte_array_new() };
    g_autoptr(GByteArray) buf = w.buf;
    g_autofree char *err = NULL;
    int fds_max = d->t.fs.fds_max;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB,
                                  FUSE_SETUPMAPPING_FLAG_READ), ==, 0);
    /* No fd to spare: fine while nothing is mapped writable */
    d->t.fs.fds_max = d->t.fs.fds_open;
    g_assert_true(vfsd_dax_save(&d->t.fs, &w, &err));
    d->t.fs.fds_max = fds_max;

    g_assert_cmpint(setup_mapping(d, 2 * MiB, 2 * MiB, 2 * MiB,
                                  FUSE_SETUPMAPPING_FLAG_READ |
                                  FUSE_SETUPMAPPING_FLAG_WRITE), ==, 0);
    g_byte_array_set_size(buf, 0);
    g_assert_true(vfsd_dax_save(&d->t.fs, &w, &err));
    d->t.fs.fds_max = d->t.fs.fds_open;
    g_byte_array_set_size(buf, 0);
    g_assert_false(vfsd_dax_save(&d->t.fs, &w, &err));
    d->t.fs.fds_max = fds_max;
    g_assert_nonnull(strstr(err, "cannot write back"));
}

/* Ranges the guest removed and we keep mapped for a while do not move */
static void test_migrate_skips_released(DaxFixture *d, gconstpointer data)
{
    g_autoptr(GByteArray) state = NULL;
    g_autofree char *err = NULL;
    const uint64_t ranges[][2] = { { 0, 2 * MiB } };

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB,
                                  FUSE_SETUPMAPPING_FLAG_READ), ==, 0);
    g_assert_cmpint(setup_mapping(d, 2 * MiB, 2 * MiB, 2 * MiB,
                                  FUSE_SETUPMAPPING_FLAG_READ), ==, 0);
    g_assert_cmpint(remove_mapping(d, ranges, 1, 1), ==, 0);
    /* Still mapped, lazily */
    g_assert_cmpuint(d->fake.maps->len, ==, 2);

    state = save_state(d);
    g_assert_cmpuint(state->len, ==, STATE_HEADER + STATE_RECORD);
    new_window(d);
    g_assert_true(load_state(d, state->data, state->len, &err));
    g_assert_true(vfsd_dax_restore(&d->t.fs, &err));
    g_assert_cmpstr(d->fake.log->str, ==, "map 200000+200000 ro;");
}

static void put_u64(GByteArray *b, size_t at, uint64_t v)
{
    v = GUINT64_TO_LE(v);
    memcpy(b->data + at, &v, sizeof(v));
}

static void put_u32(GByteArray *b, size_t at, uint32_t v)
{
    v = GUINT32_TO_LE(v);
    memcpy(b->data + at, &v, sizeof(v));
}

/* Fails to load, leaves nothing to map, and says why */
static void assert_refused(DaxFixture *d, GByteArray *b, const char *why)
{
    g_autofree char *err = NULL;
    g_autofree char *err2 = NULL;

    g_assert_false(load_state(d, b->data, b->len, &err));
    g_assert_nonnull(err);
    if (why && !strstr(err, why)) {
        g_error("refused with \"%s\", expected \"%s\"", err, why);
    }
    g_assert_true(vfsd_dax_restore(&d->t.fs, &err2));
    g_assert_cmpuint(d->fake.maps->len, ==, 0);
}

/* The stream comes from another host: nothing in it is trusted */
static void test_migrate_bad_streams(DaxFixture *d, gconstpointer data)
{
    g_autoptr(GByteArray) good = NULL;
    g_autofree char *err = NULL;
    g_autofree char *err2 = NULL;
    struct {
        size_t at;
        int width;
        uint64_t value;
        const char *why;
    } bad[] = {
        { 0, 4, 2, "version 2" },
        { 4, 8, UINT64_MAX, "bad count" },
        { 4, 8, 3, "bad count" },
        { 4, 8, 0, "empty" },
        { STATE_HEADER + 0, 8, 4096 + 512, "bad mapping" },
        { STATE_HEADER + 8, 8, 0, "bad mapping" },
        { STATE_HEADER + 16, 8, 1, "bad mapping" },
        { STATE_HEADER + 16, 8, (uint64_t)INT64_MAX - 4095, "bad mapping" },
        { STATE_HEADER + 32, 4, 2, "bad mapping" },
        { STATE_HEADER + 36, 4, 1, "bad mapping" },
        /* Overlapping, and out of order */
        { STATE_HEADER + STATE_RECORD, 8, 2 * MiB - 4096, "bad mapping" },
        { STATE_HEADER + STATE_RECORD, 8, 0, "bad mapping" },
        { STATE_HEADER + 0, 8, UINT64_MAX - 4095, "bad mapping" },
        { STATE_HEADER + 24, 8, 12345, "not known here" },
        { STATE_HEADER + 24, 8, FUSE_ROOT_ID, "not a regular file" },
    };
    size_t n;
    guint i;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB,
                                  FUSE_SETUPMAPPING_FLAG_READ), ==, 0);
    g_assert_cmpint(setup_mapping(d, 2 * MiB, 2 * MiB, 2 * MiB,
                                  FUSE_SETUPMAPPING_FLAG_READ |
                                  FUSE_SETUPMAPPING_FLAG_WRITE), ==, 0);
    good = save_state(d);
    new_window(d);

    /* Cut anywhere */
    for (n = 0; n < good->len; n++) {
        g_autoptr(GByteArray) b = g_byte_array_new();

        g_byte_array_append(b, good->data, n);
        assert_refused(d, b, NULL);
    }
    for (i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GByteArray) b = g_byte_array_new();

        g_byte_array_append(b, good->data, good->len);
        if (bad[i].width == 8) {
            put_u64(b, bad[i].at, bad[i].value);
        } else {
            put_u32(b, bad[i].at, bad[i].value);
        }
        assert_refused(d, b, bad[i].why);
    }
    /* A writable mapping on a read-only share */
    d->t.opts.readonly = true;
    assert_refused(d, good, "read-only");
    d->t.opts.readonly = false;
    /* A front-end that would not serve the restore's map requests */
    d->fake.no_migrate = true;
    assert_refused(d, good, "no SHMEM_MIGRATE");
    d->fake.no_migrate = false;
    /* A destination with a smaller window (its --cache-size) says so */
    d->t.opts.cache_size = 2 * MiB;
    assert_refused(d, good, "bad mapping 0x200000+0x200000 ends past this "
                   "daemon's window of 0x200000 bytes");
    d->t.opts.cache_size = 0;

    /* And the good one still loads after all that, but only once */
    g_assert_true(load_state(d, good->data, good->len, &err));
    g_assert_false(load_state(d, good->data, good->len, &err2));
    g_assert_nonnull(strstr(err2, "in use"));
    g_assert_true(vfsd_dax_restore(&d->t.fs, &err));
    g_assert_cmpuint(d->fake.maps->len, ==, 2);
}

/* A range the front-end does not map again fails the whole migration */
static void test_migrate_restore_fails(DaxFixture *d, gconstpointer data)
{
    g_autoptr(GByteArray) state = NULL;
    g_autofree char *err = NULL;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB,
                                  FUSE_SETUPMAPPING_FLAG_READ), ==, 0);
    state = save_state(d);
    new_window(d);
    g_assert_true(load_state(d, state->data, state->len, &err));
    d->fake.fail_next = true;
    g_assert_false(vfsd_dax_restore(&d->t.fs, &err));
    g_assert_nonnull(strstr(err, "cannot map node"));
}

/* A file the destination cannot open again: no zeros where it was */
static void test_migrate_cannot_reopen(DaxFixture *d, gconstpointer data)
{
    g_autoptr(GByteArray) state = NULL;
    g_autofree char *err = NULL;

    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB,
                                  FUSE_SETUPMAPPING_FLAG_READ), ==, 0);
    state = save_state(d);
    new_window(d);
    g_assert_true(load_state(d, state->data, state->len, &err));
    /* No more fds for the daemon: the file cannot be opened again */
    d->t.fs.fds_max = d->t.fs.fds_open;
    g_assert_false(vfsd_dax_restore(&d->t.fs, &err));
    g_assert_nonnull(strstr(err, "cannot map node"));
    g_assert_cmpuint(d->fake.maps->len, ==, 0);
}

/*
 * The map path: the front-end round trip of a SETUPMAPPING is made
 * without the window's lock.
 */
typedef struct MapThread {
    DaxFixture *d;
    uint64_t ino;
    uint64_t moffset;
    int ret;
} MapThread;

static gpointer map_thread(gpointer opaque)
{
    MapThread *t = opaque;

    t->ret = vfsd_op_setupmapping(&t->d->t.fs, t->ino, 0, 2 * MiB,
                                  t->moffset, true);
    return NULL;
}

static const FakeMap *fake_map_at(DaxFixture *d, uint64_t start)
{
    unsigned int i;

    for (i = 0; i < d->fake.maps->len; i++) {
        const FakeMap *m = &g_array_index(d->fake.maps, FakeMap, i);

        if (m->start == start) {
            return m;
        }
    }
    return NULL;
}

/*
 * Two queues map two files at once: both maps must be in the front-end
 * together, which the fake checks by making each wait for the other.
 */
static void test_two_queues_map(DaxFixture *d, gconstpointer data)
{
    const uint64_t ranges[][2] = { { 0, 2 * MiB }, { 2 * MiB, 2 * MiB } };
    MapThread t[2] = {
        { .d = d, .ino = d->ino, .moffset = 0 },
        { .d = d, .moffset = 2 * MiB },
    };
    GThread *th[2];
    struct stat st[2];
    uint64_t fh;
    int i, fd;

    t[1].ino = test_create(&d->t, FUSE_ROOT_ID, "second", O_RDWR, &fh);
    g_assert_cmpint(test_write(&d->t, t[1].ino, fh, 4 * MiB - 1, "y", 1),
                    ==, 1);
    g_string_truncate(d->fake.log, 0);

    d->fake.meet = 2;
    for (i = 0; i < 2; i++) {
        th[i] = g_thread_new("queue", map_thread, &t[i]);
    }
    for (i = 0; i < 2; i++) {
        g_thread_join(th[i]);
    }
    d->fake.meet = 0;
    if (d->fake.meet_timed_out) {
        g_test_message("a map waited %d s in the front-end: the other "
                       "never reached it", MEET_TIMEOUT_S);
    }
    g_assert_false(d->fake.meet_timed_out);
    g_assert_cmpuint(d->fake.arrived, ==, 2);
    g_assert_cmpint(t[0].ret, ==, 0);
    g_assert_cmpint(t[1].ret, ==, 0);

    /* Each file where it was asked, and recorded */
    for (i = 0; i < 2; i++) {
        fd = openat(d->t.dir_fd, i ? "second" : "file", O_RDONLY | O_CLOEXEC);
        g_assert_cmpint(fd, >=, 0);
        g_assert_cmpint(fstat(fd, &st[i]), ==, 0);
        close(fd);
        g_assert_nonnull(fake_map_at(d, ranges[i][0]));
        g_assert_cmpuint(fake_map_at(d, ranges[i][0])->st.st_ino, ==,
                         st[i].st_ino);
        g_assert_cmpuint(fake_map_at(d, ranges[i][0])->len, ==, 2 * MiB);
    }
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 2);
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(remove_mapping(d, ranges, 2, 2), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, replace_of(d) ? "unmap 0+400000;" :
                    "unmap 0+200000;unmap 200000+200000;");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 0);
}

/* The front-end refuses a map: the reservation is undone */
static void test_map_rollback(DaxFixture *d, gconstpointer data)
{
    const uint64_t whole[][2] = { { 0, 2 * MiB } };

    d->fake.fail_next = true;
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, -EIO);
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 0);
    /* The range is free again */
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 2), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "map 0+200000 ro;");

    /* An upgrade refused: the read-only mapping stays, and is recorded */
    d->fake.fail_next = true;
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, -EIO);
    g_assert_cmpstr(d->fake.log->str, ==, "map 0+200000 rw replace;");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 1);
    g_assert_cmpuint(d->fake.maps->len, ==, 1);
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "map 0+200000 rw replace;");
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(remove_mapping(d, whole, 1, 1), ==, 0);
    g_assert_cmpstr(d->fake.log->str, ==, "unmap 0+200000;");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 0);
}

/* Requests that race with a map, run while it is in the front-end */
static void truncate_begin_4k(void *opaque)
{
    DaxFixture *d = opaque;
    g_autoptr(VfsdInode) inode = vfsd_inode_get(&d->t.fs, d->ino);

    vfsd_dax_truncate_begin(&d->t.fs, inode->dev, inode->ino, inode->fd,
                            4096);
}

static void host_resize(DaxFixture *d, uint64_t size)
{
    int fd = openat(d->t.dir_fd, "file", O_WRONLY | O_CLOEXEC);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, size), ==, 0);
    close(fd);
}

static void truncate_to_4k(void *opaque)
{
    DaxFixture *d = opaque;
    g_autoptr(VfsdInode) inode = vfsd_inode_get(&d->t.fs, d->ino);

    truncate_begin_4k(d);
    host_resize(d, 4096);
    vfsd_dax_truncate_end(&d->t.fs, inode->dev, inode->ino, inode->fd);
}

static void grow_and_tell(void *opaque)
{
    DaxFixture *d = opaque;
    g_autoptr(VfsdInode) inode = vfsd_inode_get(&d->t.fs, d->ino);

    host_resize(d, 8 * MiB);
    vfsd_dax_size_seen(&d->t.fs, inode, 8 * MiB);
}

static void race_with_map(DaxFixture *d, void (*fn)(void *opaque))
{
    d->fake.beside = fn;
    d->fake.beside_arg = d;
}

/*
 * A truncate of ours, all of it while the map is in the front-end: the
 * mapping it could not cut is cut before the SETUPMAPPING replies.
 */
static void test_truncate_during_map(DaxFixture *d, gconstpointer data)
{
    race_with_map(d, truncate_to_4k);
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_assert_false(d->fake.beside_timed_out);
    g_assert_true(d->fake.beside_done);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "map 0+200000 rw;unmap 0+200000;map 0+1000 rw;");
    g_assert_cmpuint(fake_map_at(d, 0)->len, ==, 4096);
}

/*
 * A truncate of ours begins while the map is in the front-end and is
 * still under way when it is recorded: no more than it keeps is mapped,
 * and its end finds nothing left to do.
 */
static void test_truncate_begins_during_map(DaxFixture *d,
                                            gconstpointer data)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(&d->t.fs, d->ino);

    race_with_map(d, truncate_begin_4k);
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_assert_false(d->fake.beside_timed_out);
    g_assert_true(d->fake.beside_done);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "map 0+200000 rw;unmap 0+200000;map 0+1000 rw;");
    g_string_truncate(d->fake.log, 0);
    host_resize(d, 4096);
    vfsd_dax_truncate_end(&d->t.fs, inode->dev, inode->ino, inode->fd);
    g_assert_cmpstr(d->fake.log->str, ==, "");
    g_assert_cmpuint(fake_map_at(d, 0)->len, ==, 4096);
}

/*
 * The file grows while the map is in the front-end, and the guest is
 * told (an attribute reply): the mapping grows before the SETUPMAPPING
 * replies, or the guest's writes past the old end would be lost.
 */
static void test_grow_during_map(DaxFixture *d, gconstpointer data)
{
    host_resize(d, 7 * MiB);
    race_with_map(d, grow_and_tell);
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(setup_mapping(d, 6 * MiB, 0, 2 * MiB, 3), ==, 0);
    g_assert_false(d->fake.beside_timed_out);
    g_assert_true(d->fake.beside_done);
    g_assert_cmpstr(d->fake.log->str, ==,
                    "map 0+100000 rw;map 0+200000 rw replace;");
    g_assert_cmpuint(fake_map_at(d, 0)->len, ==, 2 * MiB);
}

/*
 * The guest removing, or mapping another file into, a range that is
 * being set up races with its own request: refused, and the map goes
 * through.  (Another range of the same file would wait for the map: one
 * file's ranges are set up in order.)
 */
static uint64_t other_ino;

static void remove_and_map_over(void *opaque)
{
    DaxFixture *d = opaque;
    const VfsdDaxRange r = { .moffset = 0, .len = 2 * MiB };

    g_assert_cmpint(vfsd_op_removemapping(&d->t.fs, &r, 1), ==, -EINVAL);
    g_assert_cmpint(vfsd_op_setupmapping(&d->t.fs, other_ino, 0, 2 * MiB,
                                         0, false), ==, -EINVAL);
}

static void test_remove_during_map(DaxFixture *d, gconstpointer data)
{
    uint64_t fh;

    other_ino = test_create(&d->t, FUSE_ROOT_ID, "second", O_RDWR, &fh);
    g_assert_cmpint(test_write(&d->t, other_ino, fh, 4 * MiB - 1, "y", 1),
                    ==, 1);
    race_with_map(d, remove_and_map_over);
    g_string_truncate(d->fake.log, 0);
    g_assert_cmpint(setup_mapping(d, 0, 0, 2 * MiB, 3), ==, 0);
    g_assert_false(d->fake.beside_timed_out);
    g_assert_true(d->fake.beside_done);
    g_assert_cmpstr(d->fake.log->str, ==, "map 0+200000 rw;");
    g_assert_cmpuint(vfsd_dax_count(&d->t.fs), ==, 1);
}

static void unpack_trapped(int sig, siginfo_t *info, void *uc)
{
    char msg[64];
    int n = snprintf(msg, sizeof(msg), "forbidden system call %d\n",
                     info->si_syscall);

    if (write(STDERR_FILENO, msg, n) < 0) {
        _exit(4);
    }
    _exit(3);
}

static void unpack_setattr(TestFs *t, uint64_t ino,
                           const struct fuse_setattr_in *in)
{
    struct fuse_attr_out out;
    TestReq *r = test_req_new(FUSE_SETATTR, ino);

    test_req_add(r, in, sizeof(*in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
}

/*
 * A file of an unpack, as the guest's root sends it (LOOKUP, CREATE,
 * WRITE, SETATTR of times, owner and mode, RELEASE), with a window: it
 * makes none of the calls that only set again or check again what is so
 * already.  No credential switch (the caller acts as the thread does),
 * no check or flag change of a file the O_EXCL open just made, no size
 * of a file that was never mapped, no chmod through /proc/self/fd where
 * the kernel chmods an O_PATH fd (fchmodat2).  A child runs it under a
 * filter that traps them.
 */
static void test_unpack_calls(DaxFixture *d, gconstpointer data)
{
    static const int forbidden[] = {
        SCMP_SYS(setfsuid), SCMP_SYS(setfsgid), SCMP_SYS(geteuid),
        SCMP_SYS(getegid), SCMP_SYS(fcntl), SCMP_SYS(fstat),
        SCMP_SYS(newfstatat),
    };
    TestFs *t = &d->t;
    bool fchmodat2 = syscall(__NR_fchmodat2, t->dir_fd, "absent", 0644, 0) < 0
                     && errno != ENOSYS;
    struct stat st;
    int status;
    pid_t pid;

    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        struct sigaction sa = { .sa_sigaction = unpack_trapped,
                                .sa_flags = SA_SIGINFO };
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        char page[4096] = { 1 };
        uint64_t ino, fh;
        unsigned int i;

        sigaction(SIGSYS, &sa, NULL);
        for (i = 0; i < G_N_ELEMENTS(forbidden); i++) {
            seccomp_rule_add(ctx, SCMP_ACT_TRAP, forbidden[i], 0);
        }
        if (fchmodat2) {
            seccomp_rule_add(ctx, SCMP_ACT_TRAP, SCMP_SYS(fchmodat), 0);
        }
        if (seccomp_load(ctx) < 0) {
            _exit(5);
        }
        g_assert_cmpint(test_lookup_err(t, FUSE_ROOT_ID, "u1"), ==, -ENOENT);
        ino = test_create(t, FUSE_ROOT_ID, "u1", O_WRONLY | O_EXCL, &fh);
        g_assert_cmpint(test_write(t, ino, fh, 0, page, sizeof(page)), ==,
                        sizeof(page));
        unpack_setattr(t, ino, &(struct fuse_setattr_in){
            .valid = FATTR_FH | FATTR_ATIME | FATTR_MTIME, .fh = fh,
            .atime = 1000000000, .mtime = 1500000000 });
        unpack_setattr(t, ino, &(struct fuse_setattr_in){
            .valid = FATTR_FH | FATTR_UID | FATTR_GID, .fh = fh,
            .uid = 4242, .gid = 4343 });
        unpack_setattr(t, ino, &(struct fuse_setattr_in){
            .valid = FATTR_FH | FATTR_MODE, .fh = fh,
            .mode = S_IFREG | 0644 });
        {
            TestReq *r = test_req_new(FUSE_RELEASE, ino);

            test_req_add(r, &(struct fuse_release_in){ .fh = fh },
                         sizeof(struct fuse_release_in));
            g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
        }
        _exit(0);
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    if (!fchmodat2) {
        g_test_message("no fchmodat2() here: chmod through /proc allowed");
    }
    /* What the child did is on the host */
    g_assert_cmpint(fstatat(t->dir_fd, "u1", &st, AT_SYMLINK_NOFOLLOW), ==, 0);
    g_assert_cmpuint(st.st_mode, ==, S_IFREG | 0644);
    g_assert_cmpuint(st.st_uid, ==, 4242);
    g_assert_cmpuint(st.st_gid, ==, 4343);
    g_assert_cmpuint(st.st_size, ==, 4096);
    g_assert_cmpint(st.st_mtim.tv_sec, ==, 1500000000);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    vfsd_log_init(false, VFSD_LOG_ERROR);

#define ADD(path, fn, noreplace)                                       \
    g_test_add("/virtiofsd/dax/" path, DaxFixture,                     \
               GINT_TO_POINTER(noreplace), setup, fn, teardown)

    ADD("attr-flag", test_attr_flag, 0);
    ADD("unpack-calls", test_unpack_calls, 0);
    ADD("map-upgrade-remove", test_map_upgrade_remove, 0);
    ADD("remove-refused-whole", test_remove_refused_whole, 0);
    ADD("xattr-policy-opens-nothing", test_xattr_policy_opens_nothing, 0);
    ADD("exec-policy", test_exec_policy, 0);
    ADD("without-replace", test_without_replace, 1);
    ADD("without-replace/eof", test_without_replace_eof, 1);
    ADD("without-replace/adjacent", test_without_replace_adjacent, 1);
    ADD("bad-requests", test_bad_requests, 0);
    ADD("guest-shrink-cuts", test_guest_shrink_cuts, 0);
    ADD("create-trunc-cuts", test_create_trunc_cuts, 0);
    ADD("destroy-unmaps-all", test_destroy_unmaps_all, 0);
    ADD("mapping-keeps-inode", test_mapping_keeps_inode, 0);
    ADD("remove-does-not-wait", test_remove_does_not_wait, FAKE_NOWAIT);
    ADD("lazy/takeover", test_lazy_takeover, FAKE_LAZY);
    ADD("lazy/flush", test_lazy_flush, FAKE_LAZY);
    ADD("lazy/in-the-way", test_lazy_in_the_way, FAKE_LAZY);
    ADD("lazy/shrink-destroy", test_lazy_shrink_destroy, FAKE_LAZY);
    ADD("lazy/without-replace", test_lazy_without_replace,
        FAKE_LAZY | FAKE_NO_REPLACE);
    /* 2: FUSE_SETUPMAPPING_FLAG_WRITE; 1 << 7: no flag we know */
    g_test_add_data_func("/virtiofsd/dax/no-window", GUINT_TO_POINTER(2),
                         test_no_window);
    g_test_add_data_func("/virtiofsd/dax/no-window-unknown-flags",
                         GUINT_TO_POINTER(1 << 7), test_no_window);

#define ADD_WATCH(path, fn, noreplace)                                 \
    g_test_add("/virtiofsd/dax/watch/" path, DaxFixture,               \
               GINT_TO_POINTER(noreplace), watch_setup, fn, teardown)

    ADD_WATCH("cut-and-remove", test_watch_cut_and_remove, 0);
    ADD_WATCH("grow-back", test_watch_grow_back, 0);
    ADD_WATCH("grow-back-without-replace", test_watch_grow_back, 1);
    ADD_WATCH("remap-cut-range", test_watch_remap_cut_range, 0);
    ADD_WATCH("remap-cut-range-without-replace",
              test_watch_remap_cut_range, 1);
    ADD_WATCH("guest-shrink", test_watch_guest_shrink, 0);
    ADD_WATCH("before-event", test_watch_before_event, 0);
    ADD_WATCH("limit", test_watch_limit, 0);
    ADD("watch-off", test_watch_off, 0);
    /*
     * A front-end without replace is upstream QEMU, which maps no partial
     * page at all: without-replace/eof covers it.
     */
    ADD("never-past-eof", test_never_past_eof, 0);
    ADD_WATCH("stale-size", test_stale_size, 0);
    ADD("truncate-holds-off-growth", test_truncate_holds_off_growth, 0);
    ADD("truncate-other-inode", test_truncate_other_inode, 0);
    ADD("migrate/roundtrip", test_migrate_roundtrip, 0);
    ADD("migrate/skips-released", test_migrate_skips_released, FAKE_LAZY);
    ADD("migrate/write-back", test_migrate_write_back, 0);
    ADD("migrate/bad-streams", test_migrate_bad_streams, 0);
    ADD("migrate/restore-fails", test_migrate_restore_fails, 0);
    ADD("migrate/cannot-reopen", test_migrate_cannot_reopen, 0);
    ADD("map-path/two-queues", test_two_queues_map, 0);
    ADD("map-path/two-queues-without-replace", test_two_queues_map, 1);
    ADD("map-path/rollback", test_map_rollback, 0);
    ADD("map-path/truncate-during-map", test_truncate_during_map, 0);
    ADD("map-path/truncate-begins-during-map",
        test_truncate_begins_during_map, 0);
    ADD("map-path/grow-during-map", test_grow_during_map, 0);
    ADD("map-path/remove-during-map", test_remove_during_map, 0);
    return g_test_run();
}

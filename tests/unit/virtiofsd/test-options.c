/*
 * virtiofsd tests: command line parsing
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <glib.h>
#include <string.h>

#include "options.h"

static bool parse(VfsdOptions *o, char **err, const char *line)
{
    g_auto(GStrv) argv = NULL;
    g_autofree char *full = g_strconcat("virtiofsd ", line, NULL);
    int argc;

    g_assert_true(g_shell_parse_argv(full, &argc, &argv, NULL));
    return vfsd_options_parse(o, argc, argv, err);
}

static void test_new_style(void)
{
    VfsdOptions o;
    g_autofree char *err = NULL;

    g_assert_true(parse(&o, &err, "--socket-path=/tmp/s --shared-dir /srv "
                        "--cache never --sandbox=chroot --xattr "
                        "--thread-pool-size=16 --rlimit-nofile 4096 "
                        "--log-level=debug --writeback --announce-submounts "
                        "--readonly --dax-policy=size:64K"));
    g_assert_cmpstr(o.socket_path, ==, "/tmp/s");
    g_assert_cmpstr(o.shared_dir, ==, "/srv");
    g_assert_cmpint(o.fd, ==, -1);
    g_assert_cmpint(o.cache, ==, VFSD_CACHE_NEVER);
    g_assert_cmpint(o.sandbox, ==, VFSD_SANDBOX_CHROOT);
    g_assert_true(o.xattr);
    g_assert_cmpuint(o.thread_pool_size, ==, 16);
    g_assert_cmpuint(o.rlimit_nofile, ==, 4096);
    g_assert_cmpint(o.log_level, ==, VFSD_LOG_DEBUG);
    g_assert_true(o.writeback && o.announce_submounts && o.readonly);
    g_assert_cmpint(o.dax_policy, ==, VFSD_DAX_SIZE);
    g_assert_cmpuint(o.dax_min_size, ==, 65536);
    vfsd_options_free(&o);

    /* What libvirt passes to a daemon with "separate-options" */
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir /srv --cache always "
                        "--sandbox namespace --xattr --thread-pool-size=0 "
                        "--dax-policy xattr --no-xattr"));
    g_assert_cmpint(o.fd, ==, 3);
    g_assert_cmpint(o.cache, ==, VFSD_CACHE_ALWAYS);
    g_assert_false(o.xattr);
    g_assert_cmpint(o.dax_policy, ==, VFSD_DAX_XATTR);
    vfsd_options_free(&o);

    /* Defaults */
    g_assert_true(parse(&o, &err, "--fd=5 --shared-dir=/x"));
    g_assert_cmpint(o.cache, ==, VFSD_CACHE_AUTO);
    g_assert_cmpint(o.sandbox, ==, VFSD_SANDBOX_NAMESPACE);
    g_assert_true(o.seccomp);
    g_assert_false(o.xattr || o.flock || o.posix_lock || o.readonly);
    g_assert_cmpint(o.dax_policy, ==, VFSD_DAX_ALWAYS);
    vfsd_options_free(&o);
}

static void test_legacy(void)
{
    VfsdOptions o;
    g_autofree char *err = NULL;

    /* libvirt 9.0 */
    g_assert_true(parse(&o, &err, "--fd=3 -o source=/srv/share,cache=none,"
                        "sandbox=chroot,xattr,flock,posix_lock"));
    g_assert_cmpint(o.fd, ==, 3);
    g_assert_cmpstr(o.shared_dir, ==, "/srv/share");
    g_assert_cmpint(o.cache, ==, VFSD_CACHE_NEVER);
    g_assert_cmpint(o.sandbox, ==, VFSD_SANDBOX_CHROOT);
    g_assert_true(o.xattr && o.flock && o.posix_lock);
    vfsd_options_free(&o);

    g_assert_true(parse(&o, &err, "--socket-path=/s -o source=/a -o "
                        "cache=always,no_xattr,no_flock,no_posix_lock "
                        "-o announce_submounts,log_level=warn"));
    g_assert_cmpstr(o.socket_path, ==, "/s");
    g_assert_cmpint(o.cache, ==, VFSD_CACHE_ALWAYS);
    g_assert_false(o.xattr || o.flock || o.posix_lock);
    g_assert_true(o.announce_submounts);
    g_assert_cmpint(o.log_level, ==, VFSD_LOG_WARN);
    vfsd_options_free(&o);
}

static void test_errors(void)
{
    static const struct {
        const char *line;
        const char *msg;
    } cases[] = {
        { "--shared-dir=/x", "exactly one of" },
        { "--fd=3 --socket-path=/s --shared-dir=/x", "exactly one of" },
        { "--fd=3", "no shared directory" },
        { "--fd=-1 --shared-dir=/x", "invalid file descriptor" },
        { "--fd=3x --shared-dir=/x", "invalid file descriptor" },
        { "--fd=3 --shared-dir=/x --cache=sometimes", "invalid cache mode" },
        { "--fd=3 --shared-dir=/x --sandbox=jail", "invalid sandbox" },
        { "--fd=3 --shared-dir=/x --thread-pool-size=100000",
          "invalid thread pool" },
        { "--fd=3 --shared-dir=/x --dax-policy=size:", "invalid DAX" },
        { "--fd=3 --shared-dir=/x --dax-policy=size:12Q", "invalid DAX" },
        { "--fd=3 --shared-dir=/x --log-level=loud", "invalid log level" },
        { "--fd=3 --shared-dir=/x --uid-map=:0:1000:1:", "not supported" },
        { "--fd=3 --shared-dir=/x --gid-map=:0:1000:1:", "not supported" },
        { "--fd=3 --shared-dir=/x --frobnicate", "unknown option" },
        { "--fd=3 --shared-dir=/x --xattr=yes", "takes no value" },
        { "--fd=3 --shared-dir", "needs a value" },
        { "--fd=3 -o source=/x,bogus", "unknown or malformed" },
        { "--fd=3 -o source=/x,cache=maybe", "invalid cache mode" },
        { "--fd=3 -o source=", "must not be empty" },
    };
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        VfsdOptions o;
        g_autofree char *err = NULL;

        g_assert_false(parse(&o, &err, cases[i].line));
        g_assert_nonnull(err);
        g_assert_null(strchr(err, '\n'));
        if (!strstr(err, cases[i].msg)) {
            g_error("'%s': got '%s', expected '%s'", cases[i].line, err,
                    cases[i].msg);
        }
        vfsd_options_free(&o);
    }
}

static void test_capabilities(void)
{
    VfsdOptions o;
    g_autofree char *err = NULL;
    const char *caps = vfsd_options_capabilities();

    /* Needs nothing else */
    g_assert_true(parse(&o, &err, "--print-capabilities"));
    g_assert_true(o.print_capabilities);
    g_assert_nonnull(strstr(caps, "\"type\": \"fs\""));
    g_assert_nonnull(strstr(caps, "\"separate-options\""));
    /* We do not migrate */
    g_assert_null(strstr(caps, "migrate"));
    vfsd_options_free(&o);
}

static void test_watch_truncate(void)
{
    VfsdOptions o;
    g_autofree char *err = NULL;

    /* Off unless asked for, in either spelling */
    g_assert_true(parse(&o, &err, "--fd=5 --shared-dir=/x"));
    g_assert_false(o.watch_truncate);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=5 --shared-dir=/x --watch-truncate"));
    g_assert_true(o.watch_truncate);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=5 -o source=/x,watch_truncate"));
    g_assert_true(o.watch_truncate);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=5 -o source=/x,watch_truncate "
                        "-o no_watch_truncate"));
    g_assert_false(o.watch_truncate);
    vfsd_options_free(&o);
    g_assert_false(parse(&o, &err, "--fd=5 -o source=/x,watch_truncate=1"));
    g_assert_nonnull(strstr(err, "unknown or malformed"));
    vfsd_options_free(&o);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/virtiofsd/options/new-style", test_new_style);
    g_test_add_func("/virtiofsd/options/legacy", test_legacy);
    g_test_add_func("/virtiofsd/options/errors", test_errors);
    g_test_add_func("/virtiofsd/options/capabilities", test_capabilities);
    g_test_add_func("/virtiofsd/options/watch-truncate", test_watch_truncate);
    return g_test_run();
}

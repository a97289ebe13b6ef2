/*
 * virtiofsd tests: command line parsing
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
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
                        "--readonly --dax-policy=size:64K "
                        "--dax-unmap-delay=250"));
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
    g_assert_cmpuint(o.dax_unmap_delay_ms, ==, 250);
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
    g_assert_cmpint(o.seccomp, ==, VFSD_SECCOMP_KILL);
    g_assert_false(o.xattr || o.flock || o.posix_lock || o.readonly);
    /* Files of at least one 2 MiB DAX range */
    g_assert_cmpint(o.dax_policy, ==, VFSD_DAX_SIZE);
    g_assert_cmpuint(o.dax_min_size, ==, 2 * 1024 * 1024);
    g_assert_cmpuint(o.dax_unmap_delay_ms, ==, 0);
    vfsd_options_free(&o);

    /* exec: its large files at the default size, or at its own */
    g_assert_true(parse(&o, &err, "--fd=5 --shared-dir=/x "
                        "--dax-policy=size:64K --dax-policy=exec"));
    g_assert_cmpint(o.dax_policy, ==, VFSD_DAX_EXEC);
    g_assert_cmpuint(o.dax_min_size, ==, 2 * 1024 * 1024);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=5 --shared-dir=/x "
                        "--dax-policy exec:1M"));
    g_assert_cmpint(o.dax_policy, ==, VFSD_DAX_EXEC);
    g_assert_cmpuint(o.dax_min_size, ==, 1024 * 1024);
    vfsd_options_free(&o);
    g_assert_false(parse(&o, &err, "--fd=5 --shared-dir=/x "
                         "--dax-policy=exec:"));
    g_assert_nonnull(strstr(err, "exec:N"));
    g_clear_pointer(&err, g_free);
    vfsd_options_free(&o);

    g_assert_true(parse(&o, &err, "--fd=5 --shared-dir=/x "
                        "--dax-unmap-delay 1000"));
    g_assert_cmpuint(o.dax_unmap_delay_ms, ==, 1000);
    vfsd_options_free(&o);
}

static void test_seccomp(void)
{
    static const struct {
        const char *arg;
        VfsdSeccomp action;
    } cases[] = {
        { "--seccomp=kill", VFSD_SECCOMP_KILL },
        { "--seccomp=log", VFSD_SECCOMP_LOG },
        { "--seccomp trap", VFSD_SECCOMP_TRAP },
        { "--seccomp=none", VFSD_SECCOMP_NONE },
        /* The last one wins */
        { "--seccomp=none --seccomp=trap", VFSD_SECCOMP_TRAP },
    };
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *line = g_strdup_printf("--fd=3 --shared-dir=/x %s",
                                                cases[i].arg);
        g_autofree char *err = NULL;
        VfsdOptions o;

        g_assert_true(parse(&o, &err, line));
        g_assert_cmpint(o.seccomp, ==, cases[i].action);
        vfsd_options_free(&o);
    }
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

    g_assert_true(parse(&o, &err, "--fd=3 -o source=/a,xattr,posix_acl"));
    g_assert_true(o.xattr && o.posix_acl);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=3 -o source=/a,posix_acl,"
                        "no_posix_acl"));
    g_assert_false(o.posix_acl);
    vfsd_options_free(&o);
}

static void test_posix_acl(void)
{
    VfsdOptions o;
    g_autofree char *err = NULL;

    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x --posix-acl "
                        "--xattr"));
    g_assert_true(o.posix_acl && o.xattr && o.posix_acl_always);
    vfsd_options_free(&o);
    /* As in the Rust daemon: it turns --xattr on; auto is not required */
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--posix-acl=auto"));
    g_assert_true(o.posix_acl && o.xattr && !o.posix_acl_always);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--posix-acl=never"));
    g_assert_false(o.posix_acl || o.xattr);
    vfsd_options_free(&o);

    /* --security-label: never by default, bare is always */
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x"));
    g_assert_cmpint(o.security_label, ==, VFSD_NEGOTIATE_NEVER);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--security-label --readonly"));
    g_assert_cmpint(o.security_label, ==, VFSD_NEGOTIATE_ALWAYS);
    g_assert_true(o.xattr && o.readonly);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--security-label=auto"));
    g_assert_cmpint(o.security_label, ==, VFSD_NEGOTIATE_AUTO);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=3 -o source=/x,posix_acl"));
    g_assert_true(o.posix_acl && o.xattr);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=3 -o source=/x,security_label"));
    g_assert_cmpint(o.security_label, ==, VFSD_NEGOTIATE_ALWAYS);
    vfsd_options_free(&o);
    /* Off by default */
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x --xattr"));
    g_assert_false(o.posix_acl);
    vfsd_options_free(&o);
}

static void test_adaptive(void)
{
    VfsdOptions o;
    g_autofree char *err = NULL;

    /* The defaults, as the manual gives them */
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x --cache=adaptive"));
    g_assert_cmpint(o.cache, ==, VFSD_CACHE_ADAPTIVE);
    g_assert_cmpfloat(o.adaptive_min, ==, 1);
    g_assert_cmpfloat(o.adaptive_max, ==, 60);
    g_assert_cmpfloat(o.adaptive_fraction, ==, 0.1);
    vfsd_options_free(&o);

    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--adaptive-timeouts 0.5:30 -o cache=adaptive"));
    g_assert_cmpfloat(o.adaptive_min, ==, 0.5);
    g_assert_cmpfloat(o.adaptive_max, ==, 30);
    g_assert_cmpfloat(o.adaptive_fraction, ==, 0.1);
    vfsd_options_free(&o);

    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x --cache=adaptive "
                        "--adaptive-timeouts=0:0:2"));
    g_assert_cmpfloat(o.adaptive_min, ==, 0);
    g_assert_cmpfloat(o.adaptive_max, ==, 0);
    g_assert_cmpfloat(o.adaptive_fraction, ==, 2);
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
        { "--fd=3 --shared-dir=/x --adaptive-timeouts=1:60",
          "--adaptive-timeouts needs --cache=adaptive" },
        { "--fd=3 --shared-dir=/x --cache=adaptive --adaptive-timeouts=5:1",
          "invalid adaptive timeouts '5:1'" },
        { "--fd=3 --shared-dir=/x --cache=adaptive --adaptive-timeouts=1",
          "invalid adaptive timeouts" },
        { "--fd=3 --shared-dir=/x --cache=adaptive --adaptive-timeouts=1:2:0",
          "invalid adaptive timeouts" },
        { "--fd=3 --shared-dir=/x --cache=adaptive "
          "--adaptive-timeouts=1:86401", "invalid adaptive timeouts" },
        { "--fd=3 --shared-dir=/x --cache=adaptive --adaptive-timeouts=1:x",
          "invalid adaptive timeouts" },
        { "--fd=3 --shared-dir=/x --cache=adaptive "
          "--adaptive-timeouts=-1:5", "invalid adaptive timeouts" },
        { "--fd=3 --shared-dir=/x --cache=adaptive "
          "--adaptive-timeouts=1:5:nan", "invalid adaptive timeouts" },
        { "--fd=3 --shared-dir=/x --sandbox=jail", "invalid sandbox" },
        { "--fd=3 --shared-dir=/x --thread-pool-size=100000",
          "invalid thread pool" },
        { "--fd=3 --shared-dir=/x --dax-policy=size:", "invalid DAX" },
        { "--fd=3 --shared-dir=/x --dax-policy=size:12Q", "invalid DAX" },
        { "--fd=3 --shared-dir=/x --dax-unmap-delay=60001",
          "invalid DAX unmap delay '60001' (0 to 60000 ms)" },
        { "--fd=3 --shared-dir=/x --dax-unmap-delay=-1",
          "invalid DAX unmap delay" },
        { "--fd=3 --shared-dir=/x --log-level=loud", "invalid log level" },
        { "--fd=3 --shared-dir=/x --seccomp=allow", "invalid seccomp" },
        { "--fd=3 --shared-dir=/x --modcaps=sys_admin", "needs a + or a -" },
        { "--fd=3 --shared-dir=/x --modcaps=+sys_admin:-nosuch",
          "unknown capability 'nosuch'" },
        { "--fd=3 --shared-dir=/x --modcaps=", "expected a list" },
        { "--fd=3 --shared-dir=/x --modcaps=+", "unknown capability" },
        { "--fd=3 --shared-dir=/x --translate-uid=map:1:2",
          "expected map:GUEST:HOST:COUNT" },
        { "--fd=3 --shared-dir=/x --translate-gid=forbid-guest:1:2:3",
          "expected forbid-guest:GUEST:COUNT" },
        { "--fd=3 --shared-dir=/x --translate-uid=squash-host:1:x:3",
          "'x' is not a number" },
        { "--fd=3 --shared-dir=/x --translate-uid=:0:1:1:",
          "expected guest:, host:, map:" },
        { "--fd=3 --shared-dir=/x --translate-uid=map:0:1:0",
          "count must not be 0" },
        { "--fd=3 --shared-dir=/x --translate-uid=map:0:100:10 "
          "--translate-uid=guest:5:200:1", "guest ids overlap" },
        { "--fd=3 --shared-dir=/x --translate-uid=map:0:100:10 "
          "--translate-uid=host:105:7:1", "host ids overlap" },
        { "--fd=3 --shared-dir=/x --no-readdirplus=1", "takes no value" },
        { "--fd=3 --shared-dir=/x --inode-file-handles=always",
          "invalid --inode-file-handles 'always' (never, prefer or "
          "mandatory)" },
        { "--fd=3 --shared-dir=/x --seccomp=", "invalid seccomp" },
        /* Maps: the message names the option and says why */
        { "--fd=3 --shared-dir=/x --uid-map=0:1000:1", "invalid --uid-map "
          "'0:1000:1': expected :guest_id:host_id:count:" },
        { "--fd=3 --shared-dir=/x --gid-map=:0:1000:1", "invalid --gid-map" },
        { "--fd=3 --shared-dir=/x --uid-map=:", "expected" },
        { "--fd=3 --shared-dir=/x --uid-map=::", "expected" },
        { "--fd=3 --shared-dir=/x --uid-map=::::", "three numbers" },
        { "--fd=3 --shared-dir=/x --uid-map=:0:1000:", "three numbers" },
        { "--fd=3 --shared-dir=/x --uid-map=:0:1000:1:2:", "three numbers" },
        { "--fd=3 --shared-dir=/x --uid-map=:-1:1000:1:", "three numbers" },
        { "--fd=3 --shared-dir=/x --uid-map=:+1:1000:1:", "three numbers" },
        { "--fd=3 --shared-dir=/x --uid-map=: 1:1000:1:", "three numbers" },
        { "--fd=3 --shared-dir=/x --uid-map=:0x10:1000:1:", "three numbers" },
        { "--fd=3 --shared-dir=/x --uid-map=:0:1000:1e3:", "three numbers" },
        { "--fd=3 --shared-dir=/x --uid-map=:4294967296:0:1:",
          "three numbers" },
        { "--fd=3 --shared-dir=/x --uid-map=:0:0:18446744073709551617:",
          "three numbers" },
        { "--fd=3 --shared-dir=/x --gid-map=:0:1000:0:", "must not be 0" },
        { "--fd=3 --shared-dir=/x --uid-map=:4294967295:0:1:",
          "past id 4294967294" },
        { "--fd=3 --shared-dir=/x --uid-map=:0:4294967295:1:",
          "past id 4294967294" },
        { "--fd=3 --shared-dir=/x --uid-map=:1:0:4294967295:",
          "past id 4294967294" },
        { "--fd=3 --shared-dir=/x --uid-map=:4294967294:0:2:",
          "past id 4294967294" },
        { "--fd=3 --shared-dir=/x --uid-map=:0:100000:65536: "
          "--uid-map=:65535:300000:10:", "guest ids overlap :0:100000:65536:" },
        { "--fd=3 --shared-dir=/x --gid-map=:100:1000:10: "
          "--gid-map=:0:1009:1:", "host ids overlap :100:1000:10:" },
        { "--fd=3 --shared-dir=/x --uid-map=:5:5:1: --uid-map=:5:5:1:",
          "guest ids overlap" },
        { "--fd=3 --shared-dir=/x --uid-map", "needs a value" },
        { "--fd=3 --shared-dir=/x --frobnicate", "unknown option" },
        { "--fd=3 --shared-dir=/x --posix-acl=yes",
          "invalid --posix-acl 'yes' (never, auto or always)" },
        { "--fd=3 --shared-dir=/x --security-label=selinux",
          "invalid --security-label 'selinux' (never, auto or always)" },
        { "--fd=3 --shared-dir=/x --inode-file-handles=prefer "
          "--modcaps=-dac_read_search", "--modcaps cannot drop "
          "dac_read_search with --inode-file-handles=prefer" },
        /* prefer is the default: as with the Rust daemon 1.14 */
        { "--fd=3 --shared-dir=/x --modcaps=-dac_read_search",
          "--modcaps cannot drop dac_read_search with "
          "--inode-file-handles=prefer" },
        { "--fd=3 --shared-dir=/x --xattr --posix-acl=yes",
          "invalid --posix-acl 'yes'" },
        { "--fd=3 -o source=/x,posix_acl=1", "unknown or malformed" },
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

        if (parse(&o, &err, cases[i].line)) {
            g_error("%s: accepted", cases[i].line);
        }
        g_assert_nonnull(err);
        g_assert_null(strchr(err, '\n'));
        if (!strstr(err, cases[i].msg)) {
            g_error("'%s': got '%s', expected '%s'", cases[i].line, err,
                    cases[i].msg);
        }
        vfsd_options_free(&o);
    }
}

static void test_id_maps(void)
{
    g_autoptr(GString) line = g_string_new("--fd=3 --shared-dir=/x");
    g_autofree char *err = NULL;
    VfsdOptions o;
    unsigned int i;

    /* No map: both kinds of ids pass unchanged */
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x"));
    g_assert_false(vfsd_idmap_active(&o.uid_map));
    g_assert_false(vfsd_idmap_active(&o.gid_map));
    vfsd_options_free(&o);

    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--uid-map=:0:100000:65536: --uid-map :65536:1000:1: "
                        "--gid-map=:0:4294967294:1:"));
    g_assert_cmpuint(o.uid_map.n, ==, 2);
    g_assert_cmpuint(o.uid_map.r[0].guest, ==, 0);
    g_assert_cmpuint(o.uid_map.r[0].host, ==, 100000);
    g_assert_cmpuint(o.uid_map.r[0].count, ==, 65536);
    g_assert_cmpuint(o.uid_map.r[1].guest, ==, 65536);
    g_assert_cmpuint(o.uid_map.r[1].host, ==, 1000);
    g_assert_cmpuint(o.gid_map.n, ==, 1);
    g_assert_cmpuint(o.gid_map.r[0].host, ==, 4294967294u);
    vfsd_options_free(&o);

    /* Adjacent ranges are fine, one more than the maximum is not */
    for (i = 0; i < VFSD_IDMAP_MAX; i++) {
        g_string_append_printf(line, " --uid-map=:%u:%u:1:", i, 1000 + i);
    }
    g_assert_true(parse(&o, &err, line->str));
    g_assert_cmpuint(o.uid_map.n, ==, VFSD_IDMAP_MAX);
    vfsd_options_free(&o);
    g_string_append(line, " --uid-map=:5000:5000:1:");
    g_assert_false(parse(&o, &err, line->str));
    g_assert_nonnull(strstr(err, "more than 64 ranges"));
    vfsd_options_free(&o);
}

static void test_idmap_translate(void)
{
    VfsdIdMap m = { 0 }, g = { 0 };
    g_autofree char *err = NULL;

    /* Empty: identity, even for the extremes */
    g_assert_cmpuint(vfsd_idmap_to_host(&m, 0), ==, 0);
    g_assert_cmpuint(vfsd_idmap_to_host(&m, UINT32_MAX), ==, UINT32_MAX);
    g_assert_cmpuint(vfsd_idmap_to_guest(&m, 12345), ==, 12345);

    g_assert_true(vfsd_idmap_add(&m, ":0:100000:1000:", &err));
    g_assert_true(vfsd_idmap_add(&m, ":1000:5:1:", &err));
    g_assert_true(vfsd_idmap_add(&m, ":4294967293:7:2:", &err));
    g_assert_cmpuint(vfsd_idmap_to_host(&m, 0), ==, 100000);
    g_assert_cmpuint(vfsd_idmap_to_host(&m, 999), ==, 100999);
    g_assert_cmpuint(vfsd_idmap_to_host(&m, 1000), ==, 5);
    g_assert_cmpuint(vfsd_idmap_to_host(&m, 1001), ==, VFSD_NO_ID);
    g_assert_cmpuint(vfsd_idmap_to_host(&m, 4294967294u), ==, 8);
    g_assert_cmpuint(vfsd_idmap_to_host(&m, UINT32_MAX), ==, VFSD_NO_ID);
    g_assert_cmpuint(vfsd_idmap_to_guest(&m, 100000), ==, 0);
    g_assert_cmpuint(vfsd_idmap_to_guest(&m, 100999), ==, 999);
    g_assert_cmpuint(vfsd_idmap_to_guest(&m, 101000), ==, VFSD_OVERFLOW_ID);
    g_assert_cmpuint(vfsd_idmap_to_guest(&m, 99999), ==, VFSD_OVERFLOW_ID);
    g_assert_cmpuint(vfsd_idmap_to_guest(&m, 5), ==, 1000);
    g_assert_cmpuint(vfsd_idmap_to_guest(&m, 0), ==, VFSD_OVERFLOW_ID);
    g_assert_cmpuint(vfsd_idmap_to_guest(&m, 8), ==, 4294967294u);
    g_assert_cmpuint(vfsd_idmap_to_guest(&m, UINT32_MAX), ==,
                     VFSD_OVERFLOW_ID);
    /* A failed add leaves the map as it was */
    g_assert_false(vfsd_idmap_add(&m, ":999:1:2:", &err));
    g_assert_cmpuint(m.n, ==, 3);

    g_assert_true(vfsd_idmap_add(&g, ":100:200:10:", &err));
    {
        /* user_obj, user 5, user 7777 (unmapped), group 105, mask, other */
        static const uint32_t ent[][2] = {
            { 0x01 | (7 << 16), UINT32_MAX }, { 0x02 | (6 << 16), 5 },
            { 0x02 | (4 << 16), 7777 }, { 0x08 | (5 << 16), 105 },
            { 0x10 | (7 << 16), UINT32_MAX }, { 0x20, UINT32_MAX },
        };
        uint32_t acl[1 + 2 * G_N_ELEMENTS(ent)];
        uint32_t copy[G_N_ELEMENTS(acl)];
        unsigned int i;

        acl[0] = GUINT32_TO_LE(2);
        for (i = 0; i < G_N_ELEMENTS(ent); i++) {
            acl[1 + 2 * i] = GUINT32_TO_LE(ent[i][0]);
            acl[2 + 2 * i] = GUINT32_TO_LE(ent[i][1]);
        }
        /* Host to guest: unmapped ids become the overflow id */
        memcpy(copy, acl, sizeof(acl));
        g_assert_cmpint(vfsd_idmap_acl(&m, &g, copy, sizeof(copy), false),
                        ==, 0);
        g_assert_cmpuint(GUINT32_FROM_LE(copy[4]), ==, 1000);
        g_assert_cmpuint(GUINT32_FROM_LE(copy[6]), ==, VFSD_OVERFLOW_ID);
        g_assert_cmpuint(GUINT32_FROM_LE(copy[8]), ==, VFSD_OVERFLOW_ID);
        /* Entries without an id are left alone */
        g_assert_cmpuint(GUINT32_FROM_LE(copy[2]), ==, UINT32_MAX);
        g_assert_cmpuint(GUINT32_FROM_LE(copy[10]), ==, UINT32_MAX);
        g_assert_cmpmem(&copy[9], 4, &acl[9], 4);

        /* Guest to host: the unmapped user 7777 refuses the whole ACL */
        memcpy(copy, acl, sizeof(acl));
        g_assert_cmpint(vfsd_idmap_acl(&m, &g, copy, sizeof(copy), true),
                        ==, -EINVAL);
        g_assert_cmpmem(copy, sizeof(copy), acl, sizeof(acl));
        acl[6] = GUINT32_TO_LE(1000);
        memcpy(copy, acl, sizeof(acl));
        g_assert_cmpint(vfsd_idmap_acl(&m, &g, copy, sizeof(copy), true),
                        ==, 0);
        g_assert_cmpuint(GUINT32_FROM_LE(copy[4]), ==, 100005);
        g_assert_cmpuint(GUINT32_FROM_LE(copy[6]), ==, 5);
        g_assert_cmpuint(GUINT32_FROM_LE(copy[8]), ==, 205);

        /* Not an ACL: wrong version, torn entry, too short */
        memcpy(copy, acl, sizeof(acl));
        copy[0] = GUINT32_TO_LE(1);
        g_assert_cmpint(vfsd_idmap_acl(&m, &g, copy, sizeof(copy), true),
                        ==, -EINVAL);
        g_assert_cmpint(vfsd_idmap_acl(&m, &g, acl, sizeof(acl) - 1, false),
                        ==, -EINVAL);
        g_assert_cmpint(vfsd_idmap_acl(&m, &g, acl, 3, false), ==, -EINVAL);
        g_assert_cmpint(vfsd_idmap_acl(&m, &g, acl, 4, false), ==, 0);
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
    g_assert_nonnull(strstr(caps, "\"posix-acl-negotiation-mode\""));
    g_assert_nonnull(strstr(caps, "\"security-label-negotiation-mode\""));
    /* As the Rust daemon says it: back-end state for precopy migration */
    g_assert_nonnull(strstr(caps, "\"migrate-precopy\""));
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

static void test_stats(void)
{
    VfsdOptions o;
    g_autofree char *err = NULL;

    g_assert_true(parse(&o, &err, "--fd=5 --shared-dir=/x"));
    g_assert_false(o.stats);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=5 --shared-dir=/x --stats"));
    g_assert_true(o.stats);
    vfsd_options_free(&o);
}

/* Options of the Rust virtiofsd that libvirt users pass by hand */
static void test_socket_group_direct_io(void)
{
    VfsdOptions o;
    g_autofree char *err = NULL;

    g_assert_true(parse(&o, &err, "--socket-path=/tmp/s --shared-dir=/x"));
    g_assert_cmpint(o.socket_gid, ==, -1);
    g_assert_false(o.allow_direct_io);
    vfsd_options_free(&o);

    /* A group name or number; "root" is gid 0 everywhere */
    g_assert_true(parse(&o, &err, "--socket-path=/tmp/s --shared-dir=/x "
                        "--socket-group=root --allow-direct-io"));
    g_assert_cmpint(o.socket_gid, ==, 0);
    g_assert_true(o.allow_direct_io);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--socket-path=/tmp/s --shared-dir=/x "
                        "--socket-group 4242 -o allow_direct_io"));
    g_assert_cmpint(o.socket_gid, ==, 4242);
    g_assert_true(o.allow_direct_io);
    vfsd_options_free(&o);

    g_assert_false(parse(&o, &err, "--socket-path=/tmp/s --shared-dir=/x "
                         "--socket-group=no-such-group-here"));
    g_assert_nonnull(strstr(err, "no-such-group-here"));
    g_clear_pointer(&err, g_free);
    vfsd_options_free(&o);
    /* libvirt's --fd socket is libvirt's to give away */
    g_assert_false(parse(&o, &err, "--fd=3 --shared-dir=/x "
                         "--socket-group=root"));
    g_assert_nonnull(strstr(err, "--socket-path"));
    vfsd_options_free(&o);
}

/* --xattrmap as the Rust daemon takes it, and its legacy -o form */
static void test_xattrmap(void)
{
    VfsdOptions o;
    char host[VFSD_XATTR_NAME_MAX + 1];

    {
        g_autofree char *err = NULL;

        /* The map alone turns extended attributes on, --no-xattr or not */
        g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/a --no-xattr "
                            "--xattrmap=:map::user.virtiofs.:"));
        g_assert_true(o.xattr);
        g_assert_nonnull(o.xattrmap);
        g_assert_cmpint(vfsd_xattrmap_to_host(o.xattrmap, VFSD_XATTR_OP_SET,
                                              "trusted.a", host), ==, 0);
        g_assert_cmpstr(host, ==, "user.virtiofs.trusted.a");
        vfsd_options_free(&o);
        g_assert_null(o.xattrmap);
    }
    {
        g_autofree char *err = NULL;

        /* New lines between rules, as a shell script might pass them */
        g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/a --xattrmap "
                            "'/prefix/all/trusted./user.vm./\n/ok/all///'"));
        g_assert_cmpuint(vfsd_xattrmap_rule_count(o.xattrmap), ==, 2);
        vfsd_options_free(&o);
    }
    {
        g_autofree char *err = NULL;

        g_assert_true(parse(&o, &err, "--fd=3 -o source=/a,xattrmap=:bad:"
                            "all:::,no_xattr"));
        g_assert_true(o.xattr);
        g_assert_cmpint(vfsd_xattrmap_to_host(o.xattrmap, VFSD_XATTR_OP_SET,
                                              "user.a", host), ==, -EPERM);
        vfsd_options_free(&o);
    }
    {
        g_autofree char *err = NULL;

        g_assert_false(parse(&o, &err, "--fd=3 --shared-dir=/a "
                             "--xattrmap=:ok:all:::/bad/all//"));
        g_assert_cmpstr(err, ==, "--xattrmap: rule 2 ('/bad/all//'): it "
                        "ends before its last field (every field, the last "
                        "included, ends with '/')");
    }
    {
        g_autofree char *err = NULL;

        g_assert_false(parse(&o, &err, "--fd=3 -o source=/a,xattrmap="));
        g_assert_cmpstr(err, ==, "--xattrmap: no rules given");
    }
}

/* The Rust virtiofsd's spellings, as its users write them */
static void test_rust_options(void)
{
    VfsdOptions o;
    g_autofree char *err = NULL;
    uint32_t id;

    /* Defaults as in the Rust daemon 1.14 */
    g_assert_true(parse(&o, &err, "--socket-path=/tmp/s --shared-dir=/x"));
    g_assert_cmpint(o.inode_file_handles, ==, VFSD_INODE_FH_PREFER);
    g_assert_false(o.no_readdirplus);
    g_assert_false(o.preserve_noatime);
    g_assert_true(o.announce_submounts);
    g_assert_cmpuint(o.caps_add | o.caps_drop, ==, 0);
    vfsd_options_free(&o);

    g_assert_true(parse(&o, &err, "--socket /tmp/s --shared-dir=/x "
                        "--no-readdirplus --preserve-noatime "
                        "--announce-submounts --no-announce-submounts "
                        "--inode-file-handles=never "
                        "--modcaps=+sys_admin:-CHOWN:+cap_sys_ptrace:"
                        "-sys_ptrace"));
    g_assert_cmpstr(o.socket_path, ==, "/tmp/s");
    g_assert_true(o.no_readdirplus);
    g_assert_cmpint(o.inode_file_handles, ==, VFSD_INODE_FH_NEVER);
    g_assert_true(o.preserve_noatime);
    g_assert_false(o.announce_submounts);
    /* The last word on a capability wins */
    g_assert_cmphex(o.caps_add, ==, 1ULL << 21 /* CAP_SYS_ADMIN */);
    g_assert_cmphex(o.caps_drop, ==,
                    (1ULL << 0 /* CAP_CHOWN */) |
                    (1ULL << 19 /* CAP_SYS_PTRACE */));
    vfsd_options_free(&o);

    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--inode-file-handles=prefer"));
    g_assert_cmpint(o.inode_file_handles, ==, VFSD_INODE_FH_PREFER);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--inode-file-handles=never "
                        "--modcaps=-dac_read_search"));
    vfsd_options_free(&o);
    /* 0 leaves the fd limit as it is */
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--rlimit-nofile=0"));
    g_assert_true(o.rlimit_keep);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--rlimit-nofile=100"));
    g_assert_true(!o.rlimit_keep && o.rlimit_nofile == 100);
    vfsd_options_free(&o);
    /* The Rust daemon's older name for prefer */
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--inode-file-handles=fallback "
                        "--inode-file-handles mandatory"));
    g_assert_cmpint(o.inode_file_handles, ==, VFSD_INODE_FH_MANDATORY);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--inode-file-handles=fallback"));
    g_assert_cmpint(o.inode_file_handles, ==, VFSD_INODE_FH_PREFER);
    vfsd_options_free(&o);
    /* The Rust daemon's migration options, defaults first */
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x"));
    g_assert_cmpint(o.migration_mode, ==, VFSD_MIG_FIND_PATHS);
    g_assert_cmpint(o.migration_on_error, ==, VFSD_MIG_ABORT);
    g_assert_false(o.migration_verify_handles || o.no_migration);
    vfsd_options_free(&o);
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--migration-mode=file-handles "
                        "--migration-on-error guest-error "
                        "--migration-verify-handles "
                        "--migration-confirm-paths --no-migration"));
    g_assert_cmpint(o.migration_mode, ==, VFSD_MIG_FILE_HANDLES);
    g_assert_cmpint(o.migration_on_error, ==, VFSD_MIG_GUEST_ERROR);
    g_assert_true(o.migration_verify_handles && o.migration_confirm_paths &&
                  o.no_migration);
    vfsd_options_free(&o);
    g_assert_false(parse(&o, &err, "--fd=3 --shared-dir=/x "
                         "--migration-mode=paths"));
    g_assert_nonnull(strstr(err, "find-paths or file-handles"));
    vfsd_options_free(&o);
    g_clear_pointer(&err, g_free);
    g_assert_false(parse(&o, &err, "--fd=3 --shared-dir=/x "
                         "--migration-on-error=ignore"));
    g_assert_nonnull(strstr(err, "abort or guest-error"));
    vfsd_options_free(&o);
    g_clear_pointer(&err, g_free);

    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x -o "
                        "no_readdirplus,modcaps=-fowner"));
    g_assert_true(o.no_readdirplus);
    g_assert_cmphex(o.caps_drop, ==, 1ULL << 3 /* CAP_FOWNER */);
    vfsd_options_free(&o);

    /* Each rule form, in the spellings kata, microvm.nix and users use */
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--translate-uid map:1000:4000:10 "
                        "--translate-uid=guest:0:100:1 "
                        "--translate-uid=host:200:7:2 "
                        "--translate-uid=squash-guest:50000:65534:1000 "
                        "--translate-uid=squash-host:300:9:50 "
                        "--translate-uid=forbid-guest:60000:5 "
                        "--translate-gid=map:0:1234:1"));
    g_assert_cmpuint(o.uid_map.xlate.n, ==, 6);
    g_assert_cmpuint(o.uid_map.n, ==, 0);
    g_assert_cmpuint(vfsd_idmap_to_host(&o.uid_map, 1009), ==, 4009);
    g_assert_cmpuint(vfsd_idmap_to_guest(&o.uid_map, 4009), ==, 1009);
    g_assert_cmpuint(vfsd_idmap_to_host(&o.uid_map, 0), ==, 100);
    g_assert_cmpuint(vfsd_idmap_to_guest(&o.uid_map, 100), ==, 100);
    g_assert_cmpuint(vfsd_idmap_to_guest(&o.uid_map, 201), ==, 8);
    g_assert_cmpuint(vfsd_idmap_to_host(&o.uid_map, 8), ==, 8);
    g_assert_cmpuint(vfsd_idmap_to_host(&o.uid_map, 50999), ==, 65534);
    g_assert_cmpuint(vfsd_idmap_to_guest(&o.uid_map, 349), ==, 9);
    g_assert_cmpuint(vfsd_idmap_to_host(&o.uid_map, 60004), ==, VFSD_NO_ID);
    g_assert_true(vfsd_idmap_forbidden(&o.uid_map, 60000));
    g_assert_false(vfsd_idmap_forbidden(&o.uid_map, 60005));
    g_assert_cmpuint(vfsd_idmap_to_host(&o.uid_map, 60005), ==, 60005);
    g_assert_cmpuint(vfsd_idmap_to_host(&o.gid_map, 0), ==, 1234);
    g_assert_cmpuint(vfsd_idmap_to_guest(&o.gid_map, 1234), ==, 0);
    vfsd_options_free(&o);

    /*
     * Both: the rules act as a daemon inside the namespace would, so a
     * guest id goes through the rule, then the namespace's map.
     */
    g_assert_true(parse(&o, &err, "--fd=3 --shared-dir=/x "
                        "--uid-map=:0:100000:65536: "
                        "--translate-uid=map:1000:0:1"));
    id = vfsd_idmap_to_host(&o.uid_map, 1000);
    g_assert_cmpuint(id, ==, 100000);
    g_assert_cmpuint(vfsd_idmap_to_guest(&o.uid_map, id), ==, 1000);
    g_assert_cmpuint(vfsd_idmap_to_guest(&o.uid_map, 5), ==, 65534);
    vfsd_options_free(&o);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/virtiofsd/options/new-style", test_new_style);
    g_test_add_func("/virtiofsd/options/legacy", test_legacy);
    g_test_add_func("/virtiofsd/options/seccomp", test_seccomp);
    g_test_add_func("/virtiofsd/options/posix-acl", test_posix_acl);
    g_test_add_func("/virtiofsd/options/id-maps", test_id_maps);
    g_test_add_func("/virtiofsd/idmap/translate", test_idmap_translate);
    g_test_add_func("/virtiofsd/options/errors", test_errors);
    g_test_add_func("/virtiofsd/options/adaptive", test_adaptive);
    g_test_add_func("/virtiofsd/options/rust-spellings", test_rust_options);
    g_test_add_func("/virtiofsd/options/capabilities", test_capabilities);
    g_test_add_func("/virtiofsd/options/watch-truncate", test_watch_truncate);
    g_test_add_func("/virtiofsd/options/stats", test_stats);
    g_test_add_func("/virtiofsd/options/xattrmap", test_xattrmap);
    g_test_add_func("/virtiofsd/options/socket-group-direct-io",
                    test_socket_group_direct_io);
    return g_test_run();
}

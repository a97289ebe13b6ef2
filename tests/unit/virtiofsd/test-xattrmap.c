/*
 * virtiofsd tests: --xattrmap rules, parsed and applied to names and lists
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "xattrmap.h"

static VfsdXattrMap *parse_ok(const char *rules)
{
    g_autofree char *err = NULL;
    VfsdXattrMap *map = vfsd_xattrmap_parse(rules, &err);

    if (!map) {
        g_test_message("'%s': %s", rules, err);
    }
    g_assert_nonnull(map);
    g_assert_null(err);
    return map;
}

/* The error line, which must name the rule and say why */
static char *parse_err(const char *rules)
{
    char *err = NULL;
    VfsdXattrMap *map = vfsd_xattrmap_parse(rules, &err);

    g_assert_null(map);
    g_assert_nonnull(err);
    g_assert_null(strchr(err, '\n'));
    g_test_message("'%s' -> %s", rules, err);
    return err;
}

/* The host name of @name, or "-ERRNO" */
static char *to_host(VfsdXattrMap *map, VfsdXattrOp op, const char *name)
{
    char host[VFSD_XATTR_NAME_MAX + 1];
    int ret = vfsd_xattrmap_to_host(map, op, name, host);

    if (ret < 0) {
        return g_strdup_printf("-%s", g_strerror(-ret));
    }
    g_assert_cmpuint(strlen(host), <=, VFSD_XATTR_NAME_MAX);
    return g_strdup(host);
}

#define ERR(e) (g_strdup_printf("-%s", g_strerror(e)))

static void check_host(VfsdXattrMap *map, VfsdXattrOp op, const char *name,
                       const char *want)
{
    g_autofree char *got = to_host(map, op, name);

    g_assert_cmpstr(got, ==, want);
}

static void check_host_err(VfsdXattrMap *map, VfsdXattrOp op,
                           const char *name, int e)
{
    g_autofree char *want = ERR(e);

    check_host(map, op, name, want);
}

/* The guest's name for host name @name, or NULL when it is hidden */
static char *to_guest(VfsdXattrMap *map, const char *name)
{
    size_t skip = 99;

    if (!vfsd_xattrmap_to_guest(map, name, strlen(name), &skip)) {
        return NULL;
    }
    g_assert_cmpuint(skip, <, strlen(name));
    return g_strdup(name + skip);
}

static void check_guest(VfsdXattrMap *map, const char *name, const char *want)
{
    g_autofree char *got = to_guest(map, name);

    g_assert_cmpstr(got, ==, want);
}

/* A listxattr() answer through the map; '|' stands for NUL */
static void check_list(VfsdXattrMap *map, const char *in, const char *want)
{
    g_autofree char *buf = g_strdup(in);
    size_t len = strlen(in);
    g_autofree char *out = g_malloc(len + 1);
    ssize_t n;
    size_t i;

    g_strdelimit(buf, "|", '\0');
    n = vfsd_xattrmap_list(map, buf, len, out, len + 1);
    g_assert_cmpint(n, >=, 0);
    for (i = 0; i < (size_t)n; i++) {
        if (!out[i]) {
            out[i] = '|';
        }
    }
    g_assert_cmpmem(out, n, want, strlen(want));
}

static void test_prefix(void)
{
    g_autoptr(VfsdXattrMap) client = NULL;
    g_autoptr(VfsdXattrMap) server = NULL;
    g_autoptr(VfsdXattrMap) all = NULL;

    /* The key selects guest names; the prefix is added, not substituted */
    client = parse_ok(":prefix:client:trusted.:user.virtiofs.: :ok:all:::");
    g_assert_cmpuint(vfsd_xattrmap_rule_count(client), ==, 2);
    check_host(client, VFSD_XATTR_OP_SET, "trusted.overlay.opaque",
               "user.virtiofs.trusted.overlay.opaque");
    check_host(client, VFSD_XATTR_OP_GET, "user.x", "user.x");
    /* A client rule does nothing to host names */
    check_guest(client, "user.virtiofs.trusted.a", "user.virtiofs.trusted.a");

    /* The prepend selects host names and is stripped */
    server = parse_ok(":prefix:server::user.virtiofs.: :ok:all:::");
    check_guest(server, "user.virtiofs.trusted.a", "trusted.a");
    check_guest(server, "user.other", "user.other");
    check_host(server, VFSD_XATTR_OP_SET, "trusted.a", "trusted.a");
    /* A host name that is only the prefix would be empty: dropped */
    g_assert_null(to_guest(server, "user.virtiofs."));

    all = parse_ok(":prefix:all:trusted.:user.virtiofs.: :ok:all:::");
    check_host(all, VFSD_XATTR_OP_REMOVE, "trusted.a",
               "user.virtiofs.trusted.a");
    check_guest(all, "user.virtiofs.trusted.a", "trusted.a");
}

static void test_ok(void)
{
    g_autoptr(VfsdXattrMap) map = NULL;

    map = parse_ok(":ok:client:user.:: :ok:server::security.: :bad:all:::");
    check_host(map, VFSD_XATTR_OP_SET, "user.a", "user.a");
    check_guest(map, "security.selinux", "security.selinux");
    /* ok:client does not let host user.* names through, nor the reverse */
    g_assert_null(to_guest(map, "user.a"));
    check_host_err(map, VFSD_XATTR_OP_SET, "security.selinux", EPERM);
    g_assert_cmpuint(vfsd_xattrmap_unmatched(map), ==, 0);
}

static void test_bad(void)
{
    g_autoptr(VfsdXattrMap) map = NULL;

    map = parse_ok("/bad/all/security./security./ /ok/all///");
    /* Refused with EPERM, except getxattr, which reads it as absent */
    check_host_err(map, VFSD_XATTR_OP_SET, "security.selinux", EPERM);
    check_host_err(map, VFSD_XATTR_OP_REMOVE, "security.selinux", EPERM);
    check_host_err(map, VFSD_XATTR_OP_GET, "security.selinux", ENODATA);
    g_assert_null(to_guest(map, "security.selinux"));
    check_host(map, VFSD_XATTR_OP_GET, "user.a", "user.a");
    check_guest(map, "user.a", "user.a");
}

static void test_unsupported(void)
{
    g_autoptr(VfsdXattrMap) map = NULL;

    map = parse_ok(":unsupported:all:system.:system.: :ok:all:::");
    check_host_err(map, VFSD_XATTR_OP_GET, "system.posix_acl_access",
                   ENOTSUP);
    check_host_err(map, VFSD_XATTR_OP_SET, "system.posix_acl_access",
                   ENOTSUP);
    check_host_err(map, VFSD_XATTR_OP_REMOVE, "system.x", ENOTSUP);
    g_assert_null(to_guest(map, "system.posix_acl_access"));
    check_guest(map, "user.a", "user.a");
}

/* The first rule that matches decides; later ones are not looked at */
static void test_order(void)
{
    g_autoptr(VfsdXattrMap) a = NULL;
    g_autoptr(VfsdXattrMap) b = NULL;

    a = parse_ok(":ok:all:user.keep.:user.keep.: :bad:all:user.:user.: "
                 ":ok:all:::");
    check_host(a, VFSD_XATTR_OP_SET, "user.keep.x", "user.keep.x");
    check_host_err(a, VFSD_XATTR_OP_SET, "user.x", EPERM);
    check_guest(a, "user.keep.x", "user.keep.x");
    g_assert_null(to_guest(a, "user.x"));

    b = parse_ok(":bad:all:user.:user.: :ok:all:user.keep.:user.keep.: "
                 ":ok:all:::");
    check_host_err(b, VFSD_XATTR_OP_SET, "user.keep.x", EPERM);
    g_assert_null(to_guest(b, "user.keep.x"));
}

static void test_map_shorthand(void)
{
    g_autoptr(VfsdXattrMap) m = NULL;
    g_autoptr(VfsdXattrMap) l = NULL;
    g_autoptr(VfsdXattrMap) t = NULL;
    g_autoptr(VfsdXattrMap) tl = NULL;
    const char *guest[] = { "user.a", "trusted.b", "security.capability",
                            "user.virtiofs.c", "" };
    const char *host[] = { "user.virtiofs.user.a", "user.virtiofs.",
                           "trusted.b", "user.a", "user.virtiofs.trusted.x",
                           "security.selinux" };
    VfsdXattrOp op;
    unsigned int i;

    /* Everything under user.virtiofs., nothing else seen or reachable */
    m = parse_ok(":map::user.virtiofs.:");
    l = parse_ok(":prefix:all::user.virtiofs.: :bad:all:::");
    g_assert_cmpuint(vfsd_xattrmap_rule_count(m), ==, 2);
    check_host(m, VFSD_XATTR_OP_SET, "trusted.b", "user.virtiofs.trusted.b");
    check_guest(m, "user.virtiofs.trusted.b", "trusted.b");
    g_assert_null(to_guest(m, "security.selinux"));
    g_assert_cmpstr(vfsd_xattrmap_capability_name(m), ==,
                    "user.virtiofs.security.capability");

    /* Only trusted. moved; the guest may not reach the target directly */
    t = parse_ok("  /map/trusted./user.virtiofs./\n");
    tl = parse_ok("/prefix/all/trusted./user.virtiofs./\n"
                  "            /bad/server//trusted./\n"
                  "            /bad/client/user.virtiofs.//\n"
                  "            /ok/all///");
    g_assert_cmpuint(vfsd_xattrmap_rule_count(t), ==, 3);
    check_host(t, VFSD_XATTR_OP_SET, "trusted.b", "user.virtiofs.trusted.b");
    check_host_err(t, VFSD_XATTR_OP_SET, "user.virtiofs.x", EPERM);
    check_host(t, VFSD_XATTR_OP_SET, "user.a", "user.a");
    g_assert_null(to_guest(t, "trusted.b"));
    check_guest(t, "user.virtiofs.trusted.x", "trusted.x");
    check_guest(t, "user.a", "user.a");
    g_assert_null(vfsd_xattrmap_capability_name(t));

    /* Each shorthand means what its long form says, name for name */
    for (op = VFSD_XATTR_OP_GET; op <= VFSD_XATTR_OP_REMOVE; op++) {
        for (i = 0; i < G_N_ELEMENTS(guest); i++) {
            g_autofree char *a = to_host(m, op, guest[i]);
            g_autofree char *b = to_host(l, op, guest[i]);
            g_autofree char *c = to_host(t, op, guest[i]);
            g_autofree char *d = to_host(tl, op, guest[i]);

            g_assert_cmpstr(a, ==, b);
            g_assert_cmpstr(c, ==, d);
        }
    }
    for (i = 0; i < G_N_ELEMENTS(host); i++) {
        g_autofree char *a = to_guest(m, host[i]);
        g_autofree char *b = to_guest(l, host[i]);
        g_autofree char *c = to_guest(t, host[i]);
        g_autofree char *d = to_guest(tl, host[i]);

        g_assert_cmpstr(a, ==, b);
        g_assert_cmpstr(c, ==, d);
    }
}

static void test_syntax(void)
{
    g_autoptr(VfsdXattrMap) a = NULL;
    g_autoptr(VfsdXattrMap) b = NULL;
    g_autoptr(VfsdXattrMap) c = NULL;

    /* Each rule picks its own separator; white space between rules */
    a = parse_ok("\t:prefix:client:trusted.:user.vm.:\n"
                 "/ok/server//user.vm./  |bad|all|||\r\n");
    g_assert_cmpuint(vfsd_xattrmap_rule_count(a), ==, 3);
    check_host(a, VFSD_XATTR_OP_SET, "trusted.x", "user.vm.trusted.x");
    check_guest(a, "user.vm.trusted.x", "user.vm.trusted.x");
    check_host_err(a, VFSD_XATTR_OP_SET, "user.x", EPERM);

    /* Any character separates, a letter or a dot included */
    b = parse_ok("xokxallxxx");
    check_host(b, VFSD_XATTR_OP_SET, "user.x", "user.x");

    /* Rules may follow one another with no space in between */
    c = parse_ok(".prefix.all..user:.:ok:all:::");
    g_assert_cmpuint(vfsd_xattrmap_rule_count(c), ==, 2);
    check_host(c, VFSD_XATTR_OP_SET, "x", "user:x");
}

static void test_bad_rules(void)
{
    static const struct {
        const char *rules;
        const char *says;
    } cases[] = {
        { "", "no rules" },
        { "\t\n\t", "no rules" },
        { ":prefix:client:hi", "rule 1 (':prefix:client:hi'): it ends" },
        { ":ok:all:::  :prefix:all::x", "rule 2 (':prefix:all::x')" },
        { ":ok:all::", "ends before its last field" },
        { ":ok", "ends before" },
        { ":", "ends before" },
        { ":TOMATO:all:::", "rule 1 (':TOMATO:all:::'): type 'TOMATO'" },
        { ":OK:all:::", "type 'OK'" },
        { "/prefix/helloworld/// :ok:all:::",
          "rule 1 ('/prefix/helloworld///'): scope 'helloworld'" },
        { ":ok: all:::", "scope ' all'" },
        { ":map:trusted.:virtiofs.user.::map:trusted.:virtiofs.user.:",
          "rule 1 (':map:trusted.:virtiofs.user.:'): a 'map' rule must be" },
        { ":map::user.virtiofs.: :ok:all:::", "must be the last" },
        { ":map::x", "rule 1 (':map::x'): it ends" },
        { "/ok/all/a\nb/", "rule 1 ('/ok/all/a\\nb/'): it ends" },
        /* Rules the Rust daemon would refuse at start (it panics) */
        { ":ok:client:user.:: :ok:server:::", "security.capability" },
        { ":ok:server:::", "security.capability" },
        { ":ok:all:\xc3\xa9::", "byte 8 is not ASCII" },
    };
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *err = parse_err(cases[i].rules);

        g_assert_true(g_str_has_prefix(err, "--xattrmap: "));
        if (!strstr(err, cases[i].says)) {
            g_test_message("'%s' should say '%s'", err, cases[i].says);
            g_test_fail();
        }
    }
}

/* Names at the kernel's limit, past it, and empty */
static void test_lengths(void)
{
    g_autoptr(VfsdXattrMap) ok = parse_ok(":ok:all:::");
    g_autoptr(VfsdXattrMap) pfx = parse_ok(":map::user.vm.:");
    char name[VFSD_XATTR_NAME_MAX + 2];
    size_t pl = strlen("user.vm.");
    g_autofree char *want = NULL;

    memset(name, 'a', sizeof(name));
    name[VFSD_XATTR_NAME_MAX] = '\0';
    check_host(ok, VFSD_XATTR_OP_SET, name, name);
    name[VFSD_XATTR_NAME_MAX] = 'a';
    name[VFSD_XATTR_NAME_MAX + 1] = '\0';
    check_host_err(ok, VFSD_XATTR_OP_SET, name, ERANGE);

    /* The host name is the one the kernel measures */
    name[VFSD_XATTR_NAME_MAX - pl] = '\0';
    want = g_strconcat("user.vm.", name, NULL);
    g_assert_cmpuint(strlen(want), ==, VFSD_XATTR_NAME_MAX);
    check_host(pfx, VFSD_XATTR_OP_SET, name, want);
    name[VFSD_XATTR_NAME_MAX - pl] = 'a';
    name[VFSD_XATTR_NAME_MAX - pl + 1] = '\0';
    check_host_err(pfx, VFSD_XATTR_OP_SET, name, ERANGE);
    check_host_err(pfx, VFSD_XATTR_OP_GET, name, ERANGE);
    check_host_err(pfx, VFSD_XATTR_OP_REMOVE, name, ERANGE);

    /* An empty name is the kernel's to refuse, as without a map */
    check_host(ok, VFSD_XATTR_OP_GET, "", "");
    check_host(pfx, VFSD_XATTR_OP_GET, "", "user.vm.");
}

static void test_list(void)
{
    g_autoptr(VfsdXattrMap) map = NULL;
    g_autoptr(VfsdXattrMap) none = parse_ok(":bad:all:::");
    char buf[64];
    char small[8];
    ssize_t n;

    map = parse_ok("/prefix/all/trusted./user.vm./ /bad/server//trusted./ "
                   "/unsupported/server//system./ /ok/all///");
    check_list(map, "user.vm.trusted.a|trusted.b|user.c|system.d|",
               "trusted.a|user.c|");
    /* Empty names (doubled NULs) vanish; so does a bare prefix */
    check_list(map, "||user.c|||user.vm.|", "user.c|");
    /* A last name without its NUL still counts, and gets one */
    check_list(map, "user.c|user.vm.trusted.e", "user.c|trusted.e|");
    check_list(map, "user.vm.trusted.e", "trusted.e|");
    check_list(map, "", "");
    check_list(none, "user.a|trusted.b|", "");

    /* In place, as the daemon does it */
    memcpy(buf, "user.vm.trusted.a\0user.b\0", 25);
    n = vfsd_xattrmap_list(map, buf, 25, buf, sizeof(buf));
    g_assert_cmpint(n, ==, 17);
    g_assert_cmpmem(buf, n, "trusted.a\0user.b\0", 17);

    /* No room: ERANGE, never a write past the end */
    memset(small, 'z', sizeof(small));
    n = vfsd_xattrmap_list(map, "user.abcdef\0", 12, small, 7);
    g_assert_cmpint(n, ==, -ERANGE);
    g_assert_cmpint(small[7], ==, 'z');
    /* The unterminated last name needs one byte more than the input */
    n = vfsd_xattrmap_list(map, "user.c", 6, small, 6);
    g_assert_cmpint(n, ==, -ERANGE);
    n = vfsd_xattrmap_list(map, "user.c", 6, small, 7);
    g_assert_cmpint(n, ==, 7);
}

/* Names no rule matches: hidden or refused, counted, never a crash */
static void test_unmatched(void)
{
    g_autoptr(VfsdXattrMap) map = NULL;

    map = parse_ok(":ok:client:security.:: :prefix:server::user.vm.:");
    check_host(map, VFSD_XATTR_OP_SET, "security.capability",
               "security.capability");
    g_assert_null(vfsd_xattrmap_capability_name(map));
    g_assert_cmpuint(vfsd_xattrmap_unmatched(map), ==, 0);
    check_host_err(map, VFSD_XATTR_OP_SET, "user.a", EPERM);
    check_host_err(map, VFSD_XATTR_OP_GET, "user.a", ENODATA);
    g_assert_cmpuint(vfsd_xattrmap_unmatched(map), ==, 2);
    check_list(map, "user.vm.a|trusted.b|", "a|");
    g_assert_cmpuint(vfsd_xattrmap_unmatched(map), ==, 3);
}

static void test_capability(void)
{
    static const struct {
        const char *rules;
        const char *name;
    } cases[] = {
        { ":map::user.virtiofs.:", "user.virtiofs.security.capability" },
        { ":prefix:client:security.:trusted.g.: :ok:all:::",
          "trusted.g.security.capability" },
        /* Not moved: the host kernel keeps doing the work */
        { ":ok:all:::", NULL },
        { ":prefix:all:::", NULL },
        { ":bad:all:::", NULL },
        { ":unsupported:client:security.:: :ok:all:::", NULL },
        { "/map/trusted./user.virtiofs./", NULL },
        /* A server rule does not decide what the guest's name becomes */
        { ":prefix:server::user.x.: :ok:all:::", NULL },
    };
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(VfsdXattrMap) map = parse_ok(cases[i].rules);

        g_assert_cmpstr(vfsd_xattrmap_capability_name(map), ==,
                        cases[i].name);
    }
}

/* Mostly well-formed rules from a few words, sometimes junk */
static void random_rules(GRand *rnd, GString *s)
{
    static const char *const seps = ":/|x.\v";
    static const char *const types[] = {
        "prefix", "ok", "bad", "unsupported", "OK", "",
    };
    static const char *const scopes[] = { "all", "client", "server", "" };
    static const char *const words[] = {
        "", "", "user.", "trusted.", "security.", "user.vm.",
        "security.capability", "s", "\t\n", "user.vm.trusted.",
    };
    unsigned int rules = g_rand_int_range(rnd, 0, 5);
    unsigned int i, f;

#define PICK(a) (a[g_rand_int_range(rnd, 0, G_N_ELEMENTS(a))])
    for (i = 0; i < rules; i++) {
        char sep = seps[g_rand_int_range(rnd, 0, strlen(seps))];
        bool map = i + 1 == rules && !g_rand_int_range(rnd, 0, 4);

        g_string_append(s, g_rand_boolean(rnd) ? " " : "\n");
        if (!g_rand_int_range(rnd, 0, 8)) {
            /* Junk: a few fields, maybe unterminated */
            g_string_append_c(s, sep);
            for (f = g_rand_int_range(rnd, 0, 6); f > 0; f--) {
                g_string_append(s, PICK(words));
                if (g_rand_int_range(rnd, 0, 4)) {
                    g_string_append_c(s, sep);
                }
            }
            continue;
        }
        g_string_append_printf(s, "%c%s%c", sep, map ? "map" : PICK(types),
                               sep);
        if (!map) {
            g_string_append_printf(s, "%s%c", PICK(scopes), sep);
        }
        g_string_append_printf(s, "%s%c%s%c", PICK(words), sep, PICK(words),
                               sep);
    }
    if (g_rand_int_range(rnd, 0, 4)) {
        g_string_append(s, g_rand_boolean(rnd) ? " :ok:all:::" :
                           " /bad/all///");
    }
#undef PICK
}

static void random_list(GRand *rnd, GString *s)
{
    static const char *const names[] = {
        "user.a", "user.vm.", "user.vm.trusted.x", "trusted.b", "",
        "security.capability", "user.vm.security.capability", "s",
    };
    unsigned int n = g_rand_int_range(rnd, 0, 6), i;

    for (i = 0; i < n; i++) {
        g_string_append(s, names[g_rand_int_range(rnd, 0,
                                                  G_N_ELEMENTS(names))]);
        if (i + 1 < n || g_rand_boolean(rnd)) {
            g_string_append_c(s, '\0');
        }
    }
}

/*
 * Random rule strings, names and lists: parsing answers with a map or one
 * error line; a mapped name is bounded and an errno is one of the four;
 * a translated list is well-formed, no longer than it may be, and the
 * same in place as out of place.
 */
static void test_random(void)
{
    g_autoptr(GRand) rnd = g_rand_new_with_seed(20261126);
    unsigned int iter, parsed = 0, mapped = 0, listed = 0;

    for (iter = 0; iter < 20000; iter++) {
        g_autoptr(GString) rules = g_string_new(NULL);
        g_autoptr(GString) list = g_string_new(NULL);
        g_autoptr(VfsdXattrMap) map = NULL;
        g_autofree char *err = NULL;
        g_autofree char *out = NULL;
        g_autofree char *inplace = NULL;
        char host[VFSD_XATTR_NAME_MAX + 1];
        ssize_t n, m;
        size_t i;
        int ret;

        random_rules(rnd, rules);
        map = vfsd_xattrmap_parse(rules->str, &err);
        if (!map) {
            g_assert_nonnull(err);
            g_assert_true(g_str_has_prefix(err, "--xattrmap: "));
            g_assert_null(strchr(err, '\n'));
            continue;
        }
        g_assert_null(err);
        parsed++;

        random_list(rnd, list);
        for (i = 0; i <= list->len; i = i + strlen(list->str + i) + 1) {
            VfsdXattrOp op = g_rand_int_range(rnd, VFSD_XATTR_OP_GET,
                                              VFSD_XATTR_OP_REMOVE + 1);

            memset(host, 'z', sizeof(host));
            ret = vfsd_xattrmap_to_host(map, op, list->str + i, host);
            if (ret == 0) {
                g_assert_nonnull(memchr(host, '\0', sizeof(host)));
                mapped++;
            } else {
                g_assert_true(ret == -EPERM || ret == -ENODATA ||
                              ret == -ENOTSUP || ret == -ERANGE);
                g_assert_true(ret != -ENODATA || op == VFSD_XATTR_OP_GET);
                g_assert_true(ret != -EPERM || op != VFSD_XATTR_OP_GET);
            }
        }

        out = g_malloc(list->len + 1);
        n = vfsd_xattrmap_list(map, list->str, list->len, out, list->len + 1);
        g_assert_cmpint(n, >=, 0);
        g_assert_cmpint(n, <=, list->len + 1);
        g_assert_true(n == 0 || out[n - 1] == '\0');
        for (i = 0; i < (size_t)n; i += strlen(out + i) + 1) {
            g_assert_cmpuint(strlen(out + i), >, 0);
        }
        inplace = g_malloc(list->len + 1);
        memcpy(inplace, list->str, list->len);
        m = vfsd_xattrmap_list(map, inplace, list->len, inplace,
                               list->len + 1);
        g_assert_cmpmem(inplace, m, out, n);
        if (n) {
            listed++;
        }
    }
    /* The generator reaches every outcome often enough to mean something */
    g_test_message("%u maps parsed, %u names mapped, %u lists non-empty",
                   parsed, mapped, listed);
    g_assert_cmpuint(parsed, >, 500);
    g_assert_cmpuint(mapped, >, 500);
    g_assert_cmpuint(listed, >, 500);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/virtiofsd/xattrmap/prefix", test_prefix);
    g_test_add_func("/virtiofsd/xattrmap/ok", test_ok);
    g_test_add_func("/virtiofsd/xattrmap/bad", test_bad);
    g_test_add_func("/virtiofsd/xattrmap/unsupported", test_unsupported);
    g_test_add_func("/virtiofsd/xattrmap/order", test_order);
    g_test_add_func("/virtiofsd/xattrmap/map-shorthand", test_map_shorthand);
    g_test_add_func("/virtiofsd/xattrmap/syntax", test_syntax);
    g_test_add_func("/virtiofsd/xattrmap/bad-rules", test_bad_rules);
    g_test_add_func("/virtiofsd/xattrmap/lengths", test_lengths);
    g_test_add_func("/virtiofsd/xattrmap/list", test_list);
    g_test_add_func("/virtiofsd/xattrmap/unmatched", test_unmatched);
    g_test_add_func("/virtiofsd/xattrmap/capability", test_capability);
    g_test_add_func("/virtiofsd/xattrmap/random", test_random);
    return g_test_run();
}

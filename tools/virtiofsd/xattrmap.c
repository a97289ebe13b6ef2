/*
 * virtiofsd: translation of extended attribute names (--xattrmap)
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <string.h>

#include "xattrmap.h"

typedef enum RuleType {
    RULE_PREFIX,
    RULE_OK,
    RULE_BAD,
    RULE_UNSUPPORTED,
    RULE_MAP,           /* only while parsing: expanded into the others */
} RuleType;

enum {
    SCOPE_CLIENT = 1,   /* names the guest sends */
    SCOPE_SERVER = 2,   /* names listxattr() finds on the host */
};

typedef struct Rule {
    RuleType type;
    unsigned int scope;
    char *key;          /* matched against guest names */
    char *prepend;      /* matched against host names; added to guest's */
    size_t key_len;
    size_t prepend_len;
} Rule;

struct VfsdXattrMap {
    GArray *rules;                  /* of Rule, in the order they apply */
    char *capability_name;
    unsigned int unmatched;         /* atomic */
};

static const struct {
    const char *name;
    RuleType type;
} rule_types[] = {
    { "prefix", RULE_PREFIX },
    { "ok", RULE_OK },
    { "bad", RULE_BAD },
    { "unsupported", RULE_UNSUPPORTED },
    { "map", RULE_MAP },
};

static const struct {
    const char *name;
    unsigned int scope;
} rule_scopes[] = {
    { "all", SCOPE_CLIENT | SCOPE_SERVER },
    { "client", SCOPE_CLIENT },
    { "server", SCOPE_SERVER },
};

static void rule_clear(gpointer p)
{
    Rule *r = p;

    g_free(r->key);
    g_free(r->prepend);
}

static void add_rule(GArray *rules, RuleType type, unsigned int scope,
                     const char *key, const char *prepend)
{
    Rule r = {
        .type = type,
        .scope = scope,
        .key = g_strdup(key),
        .prepend = g_strdup(prepend),
        .key_len = strlen(key),
        .prepend_len = strlen(prepend),
    };

    g_array_append_val(rules, r);
}

/*
 * "map:KEY:PREPEND" stands for: KEY names go under PREPEND, and nothing
 * else gets through in either direction when KEY is empty; otherwise
 * host names that look like unmapped KEY names are hidden, the guest may
 * not reach the PREPEND space directly, and everything else passes.
 */
static void expand_map(GArray *rules, const char *key, const char *prepend)
{
    unsigned int all = SCOPE_CLIENT | SCOPE_SERVER;

    add_rule(rules, RULE_PREFIX, all, key, prepend);
    if (*key) {
        add_rule(rules, RULE_BAD, all, prepend, key);
        add_rule(rules, RULE_OK, all, "", "");
    } else {
        add_rule(rules, RULE_BAD, all, "", "");
    }
}

/*
 * The Rust daemon trims the whole string with Unicode's idea of white
 * space but skips only ASCII white space (not \v) between rules.  Rules
 * are ASCII here (see vfsd_xattrmap_parse), so the first set is ASCII's.
 */
static bool is_trim_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
           c == '\r';
}

static bool is_gap_space(char c)
{
    return c != '\v' && is_trim_space(c);
}

/* The next field of a rule: up to (not including) the delimiter */
static char *next_field(const char **p, const char *end, char delim)
{
    const char *d = memchr(*p, delim, end - *p);
    char *field;

    if (!d) {
        return NULL;
    }
    field = g_strndup(*p, d - *p);
    *p = d + 1;
    return field;
}

static bool parse_rule(GArray *rules, const char **p, const char *end,
                       bool *is_map, char **why)
{
    char delim = *(*p)++;
    g_autofree char *type_s = NULL;
    g_autofree char *scope_s = NULL;
    g_autofree char *key = NULL;
    g_autofree char *prepend = NULL;
    unsigned int scope = SCOPE_CLIENT | SCOPE_SERVER;
    RuleType type = RULE_OK;
    unsigned int i;
    bool found = false;

    type_s = next_field(p, end, delim);
    if (!type_s) {
        goto incomplete;
    }
    for (i = 0; i < G_N_ELEMENTS(rule_types); i++) {
        if (!strcmp(type_s, rule_types[i].name)) {
            type = rule_types[i].type;
            found = true;
            break;
        }
    }
    if (!found) {
        g_autofree char *text = g_strescape(type_s, NULL);

        *why = g_strdup_printf("type '%s' is not one of prefix, ok, bad, "
                               "unsupported, map", text);
        return false;
    }
    if (type != RULE_MAP) {
        scope_s = next_field(p, end, delim);
        if (!scope_s) {
            goto incomplete;
        }
        found = false;
        for (i = 0; i < G_N_ELEMENTS(rule_scopes); i++) {
            if (!strcmp(scope_s, rule_scopes[i].name)) {
                scope = rule_scopes[i].scope;
                found = true;
                break;
            }
        }
        if (!found) {
            g_autofree char *text = g_strescape(scope_s, NULL);

            *why = g_strdup_printf("scope '%s' is not one of all, client, "
                                   "server", text);
            return false;
        }
    }
    key = next_field(p, end, delim);
    prepend = key ? next_field(p, end, delim) : NULL;
    if (!prepend) {
        goto incomplete;
    }
    *is_map = type == RULE_MAP;
    if (*is_map) {
        expand_map(rules, key, prepend);
    } else {
        add_rule(rules, type, scope, key, prepend);
    }
    return true;

incomplete:
    {
        char d[2] = { delim, '\0' };
        g_autofree char *text = g_strescape(d, NULL);

        *why = g_strdup_printf("it ends before its last field (every "
                               "field, the last included, ends with '%s')",
                               text);
    }
    return false;
}

/* The text of the rule at @start, for an error message: up to its 4th field */
static size_t rule_extent(const char *start, const char *end)
{
    const char *p = start + 1;
    int fields = 0;

    while (p < end && fields < 4) {
        if (*p++ == *start) {
            fields++;
        }
    }
    return p - start;
}

/* Fields may hold new lines: the message stays on one line */
static char *rule_text(const char *start, size_t len)
{
    g_autofree char *raw = g_strndup(start, len);

    return g_strescape(raw, NULL);
}

static const Rule *find_rule(const VfsdXattrMap *map, unsigned int scope,
                             const char *name, size_t len)
{
    unsigned int i;

    for (i = 0; i < map->rules->len; i++) {
        const Rule *r = &g_array_index(map->rules, Rule, i);
        const char *pfx = scope == SCOPE_CLIENT ? r->key : r->prepend;
        size_t pfx_len = scope == SCOPE_CLIENT ? r->key_len : r->prepend_len;

        if ((r->scope & scope) && pfx_len <= len &&
            !memcmp(name, pfx, pfx_len)) {
            return r;
        }
    }
    return NULL;
}

/*
 * The host's name for the guest's security.capability where a prefix rule
 * renames it, which the kernel would not drop where it drops the real one
 * (vfsd_drop_mapped_capability() does).  The Rust daemon maps this name
 * when it starts and stops there if no rule takes it; a map it would not
 * run with is refused here too.
 */
static bool map_capability(VfsdXattrMap *map, char **err)
{
    const Rule *cap = find_rule(map, SCOPE_CLIENT, "security.capability",
                                strlen("security.capability"));

    if (!cap) {
        *err = g_strdup("--xattrmap: no rule matches the guest's "
                        "'security.capability' (end the rules with one "
                        "that matches every name, e.g. ':ok:all:::' or "
                        "':bad:all:::')");
        return false;
    }
    if (cap->type == RULE_PREFIX && cap->prepend_len) {
        map->capability_name = g_strconcat(cap->prepend,
                                           "security.capability", NULL);
    }
    return true;
}

VfsdXattrMap *vfsd_xattrmap_parse(const char *rules, char **err)
{
    g_autoptr(VfsdXattrMap) map = g_new0(VfsdXattrMap, 1);
    const char *p = rules;
    const char *end = rules + strlen(rules);
    const char *c;
    unsigned int n = 0;

    map->rules = g_array_new(false, false, sizeof(Rule));
    g_array_set_clear_func(map->rules, rule_clear);

    /*
     * The Rust daemon reads fields a character at a time but keeps one
     * byte of each, so anything beyond ASCII would mean something else
     * to it than it says.  Refusing it keeps the two daemons in step.
     */
    for (c = rules; *c; c++) {
        if ((unsigned char)*c >= 0x80) {
            *err = g_strdup_printf("--xattrmap: byte %zu is not ASCII; rules "
                                   "are ASCII only", (size_t)(c - rules));
            return NULL;
        }
    }

    while (p < end && is_trim_space(*p)) {
        p++;
    }
    while (end > p && is_trim_space(end[-1])) {
        end--;
    }
    while (p < end) {
        const char *start;
        g_autofree char *why = NULL;
        bool is_map = false;

        if (is_gap_space(*p)) {
            p++;
            continue;
        }
        start = p;
        n++;
        if (!parse_rule(map->rules, &p, end, &is_map, &why)) {
            g_autofree char *text = rule_text(start, rule_extent(start, end));

            *err = g_strdup_printf("--xattrmap: rule %u ('%s'): %s", n, text,
                                   why);
            return NULL;
        }
        if (is_map && p < end) {
            g_autofree char *text = rule_text(start, p - start);

            *err = g_strdup_printf("--xattrmap: rule %u ('%s'): a 'map' "
                                   "rule must be the last one", n, text);
            return NULL;
        }
    }
    if (!n) {
        *err = g_strdup("--xattrmap: no rules given");
        return NULL;
    }
    if (!map_capability(map, err)) {
        return NULL;
    }
    return g_steal_pointer(&map);
}

void vfsd_xattrmap_free(VfsdXattrMap *map)
{
    if (map) {
        if (map->rules) {
            g_array_free(map->rules, true);
        }
        g_free(map->capability_name);
        g_free(map);
    }
}

unsigned int vfsd_xattrmap_rule_count(const VfsdXattrMap *map)
{
    return map->rules->len;
}

int vfsd_xattrmap_to_host(VfsdXattrMap *map, VfsdXattrOp op,
                          const char *name, char *host)
{
    size_t len = strlen(name);
    const Rule *r = find_rule(map, SCOPE_CLIENT, name, len);
    size_t pfx_len = 0;

    if (!r) {
        /*
         * The Rust daemon panics here, which takes the share away from the
         * guest; refusing the name as a "bad" rule would is kinder.
         */
        g_atomic_int_inc(&map->unmatched);
        return op == VFSD_XATTR_OP_GET ? -ENODATA : -EPERM;
    }
    switch (r->type) {
    case RULE_BAD:
        /* A refused name reads as absent, as with the Rust daemon */
        return op == VFSD_XATTR_OP_GET ? -ENODATA : -EPERM;
    case RULE_UNSUPPORTED:
        return -ENOTSUP;
    case RULE_PREFIX:
        pfx_len = r->prepend_len;
        break;
    default:
        break;
    }
    /* The kernel answers a name longer than it takes with ERANGE */
    if (len > VFSD_XATTR_NAME_MAX || pfx_len > VFSD_XATTR_NAME_MAX - len) {
        return -ERANGE;
    }
    memcpy(host, r->prepend, pfx_len);
    memcpy(host + pfx_len, name, len + 1);
    return 0;
}

bool vfsd_xattrmap_to_guest(VfsdXattrMap *map, const char *name, size_t len,
                            size_t *skip)
{
    const Rule *r = find_rule(map, SCOPE_SERVER, name, len);

    if (!r) {
        /* The Rust daemon panics; hiding the name is what 'bad' does */
        g_atomic_int_inc(&map->unmatched);
        return false;
    }
    switch (r->type) {
    case RULE_PREFIX:
        *skip = r->prepend_len;
        /*
         * A host name that is exactly the prefix would reach the guest
         * as an empty name, which the Rust daemon drops from the list.
         */
        return r->prepend_len < len;
    case RULE_OK:
        *skip = 0;
        return true;
    default:
        return false;
    }
}

ssize_t vfsd_xattrmap_list(VfsdXattrMap *map, const char *in, size_t in_len,
                           char *out, size_t out_size)
{
    size_t pos = 0, off = 0;

    /*
     * The output never runs ahead of the input (names only lose bytes)
     * except for a terminator added to an unterminated last name, so the
     * translation can be done in place.
     */
    while (off < in_len) {
        const char *name = in + off;
        const char *nul = memchr(name, '\0', in_len - off);
        size_t len = nul ? (size_t)(nul - name) : in_len - off;
        size_t skip = 0;

        off += len + 1;
        if (!len || !vfsd_xattrmap_to_guest(map, name, len, &skip)) {
            continue;
        }
        len -= skip;
        if (len + 1 > out_size - pos) {
            return -ERANGE;
        }
        memmove(out + pos, name + skip, len);
        out[pos + len] = '\0';
        pos += len + 1;
    }
    return pos;
}

const char *vfsd_xattrmap_capability_name(const VfsdXattrMap *map)
{
    return map->capability_name;
}

unsigned int vfsd_xattrmap_unmatched(const VfsdXattrMap *map)
{
    return g_atomic_int_get(&map->unmatched);
}

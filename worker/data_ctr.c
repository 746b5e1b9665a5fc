/*
 * data_ctr.c — the click-through readers of data_ctr.h: one streaming pass
 * that indexes a file's lines, then batches read by seeking to the nearest
 * indexed line and parsing Criteo TSV or libsvm lines into labels, floats
 * and row ids; and each epoch's shuffled order, a window of blocks parsed
 * at a time. The formats, the id rule, the order and the split are the
 * header's.
 */
#include "worker/data_ctr.h"
#include "crc32c.h"
#include "err.h"
#include "rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK (1 << 20)                 /* bytes a read of the index pass */
#define N_FIELDS (1 + WK_CTR_NUM + WK_CTR_CAT)

struct wk_ctr {
    FILE *f;
    char path[512];
    struct wk_ctr_opts o;
    int width;                  /* libsvm: W; Criteo: 0 */
    long long n_lines;          /* N */
    long long *index;           /* (ceil(N / WK_CTR_INDEX_EVERY)) byte offset
                                   of line i · WK_CTR_INDEX_EVERY */
    long long at;               /* line the file position is at; -1 unknown */
    int cached;                 /* the index came from opts.index_path */
    char *line;                 /* getline's buffer */
    size_t cap;
    float log1p_small[WK_CTR_LOG1P_SMALL]; /* (float)log1p(x), x small */
    int8_t hex[256];            /* a byte's hex digit value, −1 none */
    /* the shuffled order (opts.shuffle), allocated at its first read */
    struct wk_ctr_order ord;    /* its arithmetic; bperm NULL until then */
    long long win;              /* window held; -1 none */
    long long win_start;        /* its first position */
    int win_n;                  /* its lines */
    int32_t *win_order;         /* (W · 1024) the window's row at each of
                                   its positions */
    float *w_label;             /* (W · 1024) its lines parsed, blocks */
    float *w_num;               /* (W · 1024, n_num)    in file order */
    int64_t *w_cat;             /* (W · 1024, n_cat) */
};

/* --- the index pass --------------------------------------------------- */

/* Index state carried across chunks. */
struct scan {
    long long lines, start, max_len, max_len_line;
    int in_line, in_token, tokens, max_tokens;
    long long max_tokens_line;
};

static int note_line_start(struct wk_ctr *c, struct scan *s, long long off,
                           long long *cap)
{
    if (s->lines % WK_CTR_INDEX_EVERY == 0) {
        long long i = s->lines / WK_CTR_INDEX_EVERY;

        if (i == *cap) {
            long long *p = realloc(c->index, (size_t)(*cap * 2) * sizeof *p);

            if (p == NULL)
                return hc_err_set(HC_ERR_NOMEM, "%s: no memory for the line "
                                  "index", c->path);
            c->index = p;
            *cap *= 2;
        }
        c->index[i] = off;
    }
    s->lines++;
    s->in_line = 1;
    s->start = off;
    s->tokens = 0;
    s->in_token = 0;
    return HC_OK;
}

static void note_line_end(struct scan *s, long long end)
{
    if (end - s->start > s->max_len) {
        s->max_len = end - s->start;
        s->max_len_line = s->lines;
    }
    if (s->tokens - 1 > s->max_tokens) {   /* the label is not a feature */
        s->max_tokens = s->tokens - 1;
        s->max_tokens_line = s->lines;
    }
    s->in_line = 0;
}

/* One chunk of bytes at file offset `base`. Criteo: newlines by memchr;
 * libsvm: every byte, counting tokens (runs of non-blanks). */
static int scan_chunk(struct wk_ctr *c, struct scan *s, const char *buf,
                      size_t n, long long base, long long *cap)
{
    const int tokens = c->o.format == WK_CTR_LIBSVM;
    size_t i = 0;
    int rv;

    while (i < n) {
        if (!s->in_line && (rv = note_line_start(c, s, base + (long long)i,
                                                 cap)) != HC_OK)
            return rv;
        if (!tokens) {
            const char *nl = memchr(buf + i, '\n', n - i);

            if (nl == NULL)
                return HC_OK;
            i = (size_t)(nl - buf);
            note_line_end(s, base + (long long)i);
            i++;
            continue;
        }
        for (; i < n; i++) {
            char ch = buf[i];
            int blank = ch == ' ' || ch == '\t' || ch == '\r';

            if (ch == '\n') {
                note_line_end(s, base + (long long)i);
                i++;
                break;
            }
            if (!blank && !s->in_token)
                s->tokens++;
            s->in_token = !blank;
        }
    }
    return HC_OK;
}

static int index_file(struct wk_ctr *c)
{
    struct scan s = { 0 };
    long long cap = 64, base = 0;
    char *buf = malloc(CHUNK);
    size_t n;
    int rv = HC_OK;

    c->index = malloc((size_t)cap * sizeof *c->index);
    if (buf == NULL || c->index == NULL) {
        rv = hc_err_set(HC_ERR_NOMEM, "%s: no memory to index", c->path);
        goto out;
    }
    while ((n = fread(buf, 1, CHUNK, c->f)) > 0) {
        if ((rv = scan_chunk(c, &s, buf, n, base, &cap)) != HC_OK)
            goto out;
        base += (long long)n;
    }
    if (ferror(c->f)) {
        rv = hc_err_set(HC_ERR_IO, "%s: read failed: %s", c->path,
                        strerror(errno));
        goto out;
    }
    if (s.in_line)
        note_line_end(&s, base);
    if (s.lines == 0) {
        rv = hc_err_set(HC_ERR_DATA, "%s: no lines (an empty file)", c->path);
        goto out;
    }
    if (s.max_len > WK_CTR_LINE_MAX) {
        rv = hc_err_set(HC_ERR_DATA, "%s:%lld: line of %lld bytes, longer "
                        "than the %d a line may have", c->path,
                        s.max_len_line, s.max_len, WK_CTR_LINE_MAX);
        goto out;
    }
    if (c->o.format == WK_CTR_LIBSVM) {
        if (c->o.width > 0 && s.max_tokens > c->o.width) {
            rv = hc_err_set(HC_ERR_DATA, "%s:%lld: %d features, more than "
                            "the width %d given", c->path, s.max_tokens_line,
                            s.max_tokens, c->o.width);
            goto out;
        }
        if (s.max_tokens > WK_CTR_WIDTH_MAX) {
            rv = hc_err_set(HC_ERR_DATA, "%s:%lld: %d features, more than "
                            "the %d a line may have", c->path,
                            s.max_tokens_line, s.max_tokens,
                            WK_CTR_WIDTH_MAX);
            goto out;
        }
        c->width = c->o.width > 0 ? c->o.width
                                  : (s.max_tokens > 0 ? s.max_tokens : 1);
    }
    c->n_lines = s.lines;
out:
    free(buf);
    return rv;
}

/* --- the index cache ---------------------------------------------------- */

#define IDX_MAGIC "HPCTRIDX"
#define IDX_VERSION 1u

/* The cache file's header; the offsets (n_index int64) follow. */
struct idx_head {
    char magic[8];
    uint32_t version;
    uint32_t format;
    int32_t width_opt;          /* opts.width as given */
    int32_t width;              /* the width found */
    uint64_t size, mtime_ns, ino;   /* the data file's */
    int64_t n_lines, n_index;
    uint32_t crc;               /* CRC-32C of the offsets */
    uint32_t zero;
};

static void head_of(const struct wk_ctr *c, const struct stat *st,
                    struct idx_head *h)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, IDX_MAGIC, 8);
    h->version = IDX_VERSION;
    h->format = (uint32_t)c->o.format;
    h->width_opt = c->o.width;
    h->size = (uint64_t)st->st_size;
    h->mtime_ns = (uint64_t)st->st_mtim.tv_sec * 1000000000ull +
                  (uint64_t)st->st_mtim.tv_nsec;
    h->ino = (uint64_t)st->st_ino;
}

static long long n_index(long long lines)
{
    return (lines + WK_CTR_INDEX_EVERY - 1) / WK_CTR_INDEX_EVERY;
}

/* The index from the cache into c when it is there and matches st: 1;
 * otherwise 0, c untouched. */
static int load_index(struct wk_ctr *c, const struct stat *st)
{
    struct idx_head want, h;
    FILE *f = fopen(c->o.index_path, "rb");
    long long *idx = NULL;
    int ok = 0;

    if (f == NULL)
        return 0;
    head_of(c, st, &want);
    if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, want.magic, 8) ||
        h.version != want.version || h.format != want.format ||
        h.width_opt != want.width_opt || h.size != want.size ||
        h.mtime_ns != want.mtime_ns || h.ino != want.ino || h.n_lines < 1 ||
        h.n_index != n_index(h.n_lines) || h.width < 0 ||
        h.width > WK_CTR_WIDTH_MAX)
        goto out;
    if ((idx = malloc((size_t)h.n_index * sizeof *idx)) == NULL ||
        fread(idx, sizeof *idx, (size_t)h.n_index, f) != (size_t)h.n_index ||
        fgetc(f) != EOF ||
        hc_crc32c(idx, (size_t)h.n_index * sizeof *idx) != h.crc)
        goto out;
    free(c->index);
    c->index = idx;
    idx = NULL;
    c->n_lines = h.n_lines;
    c->width = h.width;
    ok = 1;
out:
    free(idx);
    fclose(f);
    return ok;
}

/* Write c's index to the cache: a temporary file renamed over it. Quiet
 * on failure (a cache). */
static void save_index(const struct wk_ctr *c, const struct stat *st)
{
    struct idx_head h;
    char tmp[600];
    size_t n = (size_t)n_index(c->n_lines);
    FILE *f;
    int bad;

    head_of(c, st, &h);
    h.width = c->width;
    h.n_lines = c->n_lines;
    h.n_index = (int64_t)n;
    h.crc = hc_crc32c(c->index, n * sizeof *c->index);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", c->o.index_path, (long)getpid());
    if ((f = fopen(tmp, "wb")) == NULL)
        return;
    bad = fwrite(&h, sizeof h, 1, f) != 1 ||
          fwrite(c->index, sizeof *c->index, n, f) != n;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, c->o.index_path) != 0)
        unlink(tmp);
}

int wk_ctr_index_cached(const struct wk_ctr *c)
{
    return c->cached;
}

int wk_ctr_format_parse(const char *name, enum wk_ctr_format *f)
{
    if (name != NULL && strcmp(name, "criteo") == 0)
        *f = WK_CTR_CRITEO;
    else if (name != NULL && strcmp(name, "libsvm") == 0)
        *f = WK_CTR_LIBSVM;
    else
        return hc_err_set(HC_ERR_INVAL, "unknown click-through format '%s' "
                          "(supported: criteo, libsvm)", name ? name : "");
    return HC_OK;
}

/* The tables parse_criteo reads instead of calling log1p and branching
 * on each hex digit: the same values, computed once a reader. */
static void fill_tables(struct wk_ctr *c)
{
    for (int x = 0; x < WK_CTR_LOG1P_SMALL; x++)
        c->log1p_small[x] = x > 0 ? (float)log1p((double)x) : 0.0f;
    memset(c->hex, -1, sizeof c->hex);
    for (int d = 0; d < 10; d++)
        c->hex['0' + d] = (int8_t)d;
    for (int d = 0; d < 6; d++)
        c->hex['a' + d] = c->hex['A' + d] = (int8_t)(10 + d);
}

int wk_ctr_open(const char *path, const struct wk_ctr_opts *o,
                struct wk_ctr **out)
{
    struct wk_ctr *c;
    int rv;

    *out = NULL;
    if (o->format != WK_CTR_CRITEO && o->format != WK_CTR_LIBSVM)
        return hc_err_set(HC_ERR_INVAL, "%s: unknown click-through format "
                          "%d (supported: criteo, libsvm)", path,
                          (int)o->format);
    if (o->input_dim == 0)
        return hc_err_set(HC_ERR_INVAL, "%s: input_dim must be at least 1",
                          path);
    if (o->width < 0 || o->width > WK_CTR_WIDTH_MAX)
        return hc_err_set(HC_ERR_INVAL, "%s: libsvm width %d outside "
                          "[0, %d]", path, o->width, WK_CTR_WIDTH_MAX);
    if ((c = calloc(1, sizeof *c)) == NULL)
        return hc_err_set(HC_ERR_NOMEM, "%s: no memory", path);
    c->o = *o;
    c->at = -1;
    fill_tables(c);
    c->win = -1;
    snprintf(c->path, sizeof c->path, "%s", path);
    if ((c->f = fopen(path, "rb")) == NULL) {
        rv = hc_err_set(errno == ENOENT ? HC_ERR_NOTFOUND : HC_ERR_IO,
                        "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    if (o->index_path != NULL) {
        struct stat st;

        if (fstat(fileno(c->f), &st) != 0) {
            rv = hc_err_set(HC_ERR_IO, "%s: cannot stat: %s", path,
                            strerror(errno));
            goto fail;
        }
        if (load_index(c, &st)) {
            c->cached = 1;
        } else {
            if ((rv = index_file(c)) != HC_OK)
                goto fail;
            save_index(c, &st);
        }
    } else if ((rv = index_file(c)) != HC_OK) {
        goto fail;
    }
    *out = c;
    return HC_OK;
fail:
    wk_ctr_close(c);
    return rv;
}

void wk_ctr_close(struct wk_ctr *c)
{
    if (c == NULL)
        return;
    if (c->f)
        fclose(c->f);
    free(c->index);
    free(c->line);
    wk_ctr_order_free(&c->ord);
    free(c->win_order);
    free(c->w_label);
    free(c->w_num);
    free(c->w_cat);
    free(c);
}

long long wk_ctr_lines(const struct wk_ctr *c)
{
    return c->n_lines;
}

int wk_ctr_n_num(const struct wk_ctr *c)
{
    return c->o.format == WK_CTR_CRITEO ? WK_CTR_NUM : c->width;
}

int wk_ctr_n_cat(const struct wk_ctr *c)
{
    return c->o.format == WK_CTR_CRITEO ? WK_CTR_CAT : c->width;
}

/* --- the split -------------------------------------------------------- */

int wk_ctr_split(long long N, int n, int k, const char *what,
                 long long *first, long long *count)
{
    *first = *count = 0;
    if (N < 1 || N > WK_CTR_LINES_MAX || n < 1 || k < 0 || k >= n)
        return hc_err_set(HC_ERR_INVAL, "%s: worker %d of %d of %lld "
                          "line(s): no such part", what, k, n, N);
    if (n > N)
        return hc_err_set(HC_ERR_INVAL, "%s: %lld line(s) cannot be split "
                          "across %d workers (a part would be empty)",
                          what, N, n);
    /* floor(k · N / n) without overflow: N ≤ 2^62 and n < 2^31 */
    *first = (long long)((__int128)k * N / n);
    *count = (long long)((__int128)(k + 1) * N / n) - *first;
    return HC_OK;
}

long long wk_ctr_batches_of(long long count, int B)
{
    if (B < 1 || count < 0)
        return 0;
    return count / B + (count % B != 0);
}

int wk_ctr_part(const struct wk_ctr *c, int n, int k, long long *first,
                long long *count)
{
    return wk_ctr_split(c->n_lines, n, k, c->path, first, count);
}

long long wk_ctr_n_batches(const struct wk_ctr *c, int n, int k, int B)
{
    long long first, count;

    if (B < 1 || wk_ctr_part(c, n, k, &first, &count) != HC_OK)
        return 0;
    return wk_ctr_batches_of(count, B);
}

/* --- parsing ---------------------------------------------------------- */

static int bad_line(const struct wk_ctr *c, long long line, const char *what,
                    const char *field, size_t len)
{
    int shown = len > 40 ? 40 : (int)len;

    return hc_err_set(HC_ERR_DATA, "%s:%lld: %s: '%.*s'%s", c->path, line + 1,
                      what, shown, field, len > 40 ? "…" : "");
}

/* A decimal integer of 1 to 18 digits, optionally signed by '-' when
 * `sign`; into *v. 0 when s[0, len) is not one. */
static int parse_int(const char *s, size_t len, int sign, long long *v)
{
    size_t i = 0;
    int neg = 0;
    long long x = 0;

    if (sign && len > 0 && s[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (len == i || len - i > 18)
        return 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        x = x * 10 + (s[i] - '0');
    }
    *v = neg ? -x : x;
    return 1;
}

/* Where w (8 bytes of a line, in memory order) holds a tab: 0x80 in each
 * such byte, exactly (no borrow from one byte into the next). */
static uint64_t tab_bytes(uint64_t w)
{
    const uint64_t low7 = 0x7f7f7f7f7f7f7f7full;

    w ^= 0x0909090909090909ull;             /* a tab byte is now 0 */
    return ~(((w & low7) + low7) | w | low7);
}

/* The tab-separated fields of s[0, len): the first N_FIELDS into field
 * and flen; returns how many there are. Tabs are found 8 bytes at a
 * time. */
static int split_tabs(const char *s, size_t len, const char **field,
                      size_t *flen)
{
    size_t start = 0, i = 0, at;
    int nf = 0;

#define FIELD_ENDS_AT(end)                          \
    do {                                            \
        if (nf < N_FIELDS) {                        \
            field[nf] = s + start;                  \
            flen[nf] = (end) - start;               \
        }                                           \
        nf++;                                       \
        start = (end) + 1;                          \
    } while (0)
    for (; i + 8 <= len; i += 8) {
        uint64_t w, m;

        memcpy(&w, s + i, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);           /* byte k of the line: bits 8k */
#endif
        for (m = tab_bytes(w); m; m &= m - 1) {
            at = i + (size_t)(__builtin_ctzll(m) >> 3);
            FIELD_ENDS_AT(at);
        }
    }
    for (; i < len; i++)
        if (s[i] == '\t')
            FIELD_ENDS_AT(i);
    FIELD_ENDS_AT(len);
#undef FIELD_ENDS_AT
    return nf;
}

static int parse_criteo(const struct wk_ctr *c, long long line, char *s,
                        size_t len, float *label, float *num, int64_t *cat)
{
    const char *field[N_FIELDS];
    size_t flen[N_FIELDS];
    int nf = split_tabs(s, len, field, flen);

    if (nf != N_FIELDS)
        return hc_err_set(HC_ERR_DATA, "%s:%lld: %d tab-separated field(s); "
                          "a Criteo line has %d (label, I1…I13, C1…C26)",
                          c->path, line + 1, nf, N_FIELDS);
    if (flen[0] != 1 || (field[0][0] != '0' && field[0][0] != '1'))
        return bad_line(c, line, "label is not 0 or 1", field[0], flen[0]);
    *label = (float)(field[0][0] - '0');
    for (int j = 0; j < WK_CTR_NUM; j++) {
        const char *f = field[1 + j];
        long long x = 0;
        char what[64];

        if (flen[1 + j] > 0 && !parse_int(f, flen[1 + j], 1, &x)) {
            snprintf(what, sizeof what, "I%d is not an integer", j + 1);
            return bad_line(c, line, what, f, flen[1 + j]);
        }
        num[j] = x < 0 ? 0.0f
               : x < WK_CTR_LOG1P_SMALL ? c->log1p_small[x]
                                        : (float)log1p((double)x);
    }
    for (int j = 0; j < WK_CTR_CAT; j++) {
        const unsigned char *f =
            (const unsigned char *)field[1 + WK_CTR_NUM + j];
        size_t fl = flen[1 + WK_CTR_NUM + j];
        uint32_t v = 0;
        int bad = fl != 0 && fl != 8;

        for (size_t q = 0; q < fl && !bad; q++) {
            int h = c->hex[f[q]];

            bad = h < 0;
            v = v << 4 | (uint32_t)h;
        }
        if (bad) {
            char what[64];

            snprintf(what, sizeof what, "C%d is not 8 hex digits", j + 1);
            return bad_line(c, line, what, (const char *)f, fl);
        }
        cat[j] = wk_ctr_cat_id(j, v, fl == 0, c->o.input_dim);
    }
    return HC_OK;
}

static int is_blank(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* One libsvm feature `id[:value]` (s[0, len)) into *id and *val. */
static int parse_feature(const struct wk_ctr *c, long long line,
                         const char *s, size_t len, int64_t *id, float *val)
{
    const char *colon = memchr(s, ':', len);
    size_t il = colon ? (size_t)(colon - s) : len;
    long long x;
    char what[96];

    if (!parse_int(s, il, 1, &x))
        return bad_line(c, line, "feature id is not an integer", s, len);
    if (x < 0 || (unsigned long long)x >= c->o.input_dim) {
        snprintf(what, sizeof what, "feature id %lld outside [0, input_dim "
                 "%llu)", x, (unsigned long long)c->o.input_dim);
        return bad_line(c, line, what, s, len);
    }
    *id = x;
    *val = 1.0f;
    if (colon) {
        char tmp[64], *end;
        size_t vl = len - il - 1;
        double v;

        if (vl == 0 || vl >= sizeof tmp)
            return bad_line(c, line, "feature value is not a number", s, len);
        memcpy(tmp, colon + 1, vl);
        tmp[vl] = '\0';
        errno = 0;
        v = strtod(tmp, &end);
        if (*end != '\0' || errno != 0 || !isfinite(v) ||
            !isfinite((float)v))
            return bad_line(c, line, "feature value is not a finite number",
                            s, len);
        *val = (float)v;
    }
    return HC_OK;
}

static int parse_libsvm(const struct wk_ctr *c, long long line, char *s,
                        size_t len, float *label, float *num, int64_t *cat)
{
    size_t i = 0, start;
    int nf = -1, rv;

    for (int j = 0; j < c->width; j++) {
        num[j] = 0.0f;
        cat[j] = 0;
    }
    for (;;) {
        while (i < len && is_blank(s[i]))
            i++;
        if (i == len)
            break;
        start = i;
        while (i < len && !is_blank(s[i]))
            i++;
        if (nf < 0) {
            size_t l = i - start;
            const char *t = s + start;

            if (l == 1 && (t[0] == '0' || t[0] == '1'))
                *label = (float)(t[0] - '0');
            else if (l == 2 && (t[0] == '-' || t[0] == '+') && t[1] == '1')
                *label = t[0] == '+' ? 1.0f : 0.0f;
            else
                return bad_line(c, line, "label is not 0, 1, -1 or +1", t, l);
        } else {
            if (nf >= c->width)
                return hc_err_set(HC_ERR_DATA, "%s:%lld: more than the width "
                                  "%d features", c->path, line + 1, c->width);
            if ((rv = parse_feature(c, line, s + start, i - start, &cat[nf],
                                    &num[nf])) != HC_OK)
                return rv;
        }
        nf++;
    }
    if (nf < 0)
        return hc_err_set(HC_ERR_DATA, "%s:%lld: empty line (a libsvm line "
                          "is 'label id[:value] …')", c->path, line + 1);
    return HC_OK;
}

int64_t wk_ctr_cat_id(int field, uint32_t value, int empty,
                      uint64_t input_dim)
{
    uint64_t key = (uint64_t)field << 33 | (empty ? 1ull << 32 : value);

    if (input_dim >= WK_CTR_EXACT_DIM)
        return (int64_t)key;
    if ((input_dim & (input_dim - 1)) == 0)    /* the same, without a divide */
        return (int64_t)(hc_mix64(key) & (input_dim - 1));
    return (int64_t)(hc_mix64(key) % input_dim);
}

/* --- reading ---------------------------------------------------------- */

/* One line into c->line (newline and a '\r' before it dropped); its length
 * into *len. HC_ERR_IO when the file ended early (it changed) or failed. */
static int next_line(struct wk_ctr *c, size_t *len)
{
    ssize_t n = getline(&c->line, &c->cap, c->f);

    if (n < 0) {
        long long want = c->at + 1;

        c->at = -1;
        if (ferror(c->f))
            return hc_err_set(HC_ERR_IO, "%s: read failed: %s", c->path,
                              strerror(errno));
        return hc_err_set(HC_ERR_IO, "%s: ended before line %lld: the file "
                          "changed since it was opened", c->path, want);
    }
    c->at++;
    if (n > 0 && c->line[n - 1] == '\n')
        n--;
    if (n > 0 && c->line[n - 1] == '\r')
        n--;
    c->line[n] = '\0';
    *len = (size_t)n;
    return HC_OK;
}

/* Place the file at line a: on from where it is, or from the indexed line
 * at or before a. */
static int seek_line(struct wk_ctr *c, long long a)
{
    size_t len;
    int rv;

    if (c->at < 0 || a < c->at || a - c->at >= WK_CTR_INDEX_EVERY) {
        long long i = a / WK_CTR_INDEX_EVERY;

        if (fseeko(c->f, (off_t)c->index[i], SEEK_SET) != 0) {
            c->at = -1;
            return hc_err_set(HC_ERR_IO, "%s: seek failed: %s", c->path,
                              strerror(errno));
        }
        c->at = i * WK_CTR_INDEX_EVERY;
    }
    while (c->at < a)
        if ((rv = next_line(c, &len)) != HC_OK)
            return rv;
    return HC_OK;
}

int wk_ctr_read(struct wk_ctr *c, long long start, int count, float *label,
                float *num, int64_t *cat, int *n_out)
{
    const int nn = wk_ctr_n_num(c), nc = wk_ctr_n_cat(c);
    long long end;
    int rv;

    *n_out = 0;
    if (start < 0 || count < 1)
        return hc_err_set(HC_ERR_INVAL, "%s: bad read of %d line(s) from "
                          "line %lld", c->path, count, start);
    if (start >= c->n_lines)
        return HC_OK;
    end = start + count < c->n_lines ? start + count : c->n_lines;
    if ((rv = seek_line(c, start)) != HC_OK)
        return rv;
    for (long long l = start; l < end; l++) {
        size_t i = (size_t)(l - start), len;

        if ((rv = next_line(c, &len)) != HC_OK)
            return rv;
        rv = c->o.format == WK_CTR_CRITEO
                 ? parse_criteo(c, l, c->line, len, &label[i], &num[i * nn],
                                &cat[i * nc])
                 : parse_libsvm(c, l, c->line, len, &label[i], &num[i * nn],
                                &cat[i * nc]);
        if (rv != HC_OK)
            return rv;
        (*n_out)++;
    }
    return HC_OK;
}

/* --- the epoch's order ------------------------------------------------ */

static long long blocks_of(long long n_lines)
{
    return (n_lines + WK_CTR_INDEX_EVERY - 1) / WK_CTR_INDEX_EVERY;
}

int wk_ctr_order_init(struct wk_ctr_order *o, long long n_lines,
                      uint64_t seed, int win_blocks)
{
    long long nb = blocks_of(n_lines);

    memset(o, 0, sizeof *o);
    o->epoch = -1;
    if (n_lines < 1 || n_lines > WK_CTR_LINES_MAX || win_blocks < 1 ||
        win_blocks > WK_CTR_WINDOW)
        return hc_err_set(HC_ERR_INVAL, "shuffle order: %lld lines in "
                          "windows of %d blocks (need 1 to 2^62 lines, 1 to "
                          "%d blocks)", n_lines, win_blocks, WK_CTR_WINDOW);
    o->n_lines = n_lines;
    o->seed = seed;
    o->win_blocks = win_blocks > nb ? (int)nb : win_blocks;
    if ((size_t)nb > SIZE_MAX / sizeof *o->bperm ||
        !(o->bperm = malloc((size_t)nb * sizeof *o->bperm)))
        return hc_err_set(HC_ERR_NOMEM, "shuffle order: no memory for the "
                          "order of %lld blocks", nb);
    return HC_OK;
}

void wk_ctr_order_free(struct wk_ctr_order *o)
{
    free(o->bperm);
    memset(o, 0, sizeof *o);
    o->epoch = -1;
}

/* The splitmix64 state of (seed, epoch, stream): data.h's shuffle. */
static uint64_t order_state(const struct wk_ctr_order *o, int epoch,
                            uint64_t stream)
{
    return hc_mix64(o->seed ^ hc_mix64((uint64_t)epoch * HC_GOLDEN_GAMMA ^
                                       stream));
}

void wk_ctr_order_epoch(struct wk_ctr_order *o, int epoch)
{
    const long long nb = blocks_of(o->n_lines);
    uint64_t state = order_state(o, epoch, ~0ull);

    if (o->epoch == epoch)
        return;
    for (long long i = 0; i < nb; i++)
        o->bperm[i] = i;
    for (long long i = nb - 1; i > 0; i--) {
        long long j = (long long)hc_rng_below(&state, (uint64_t)i + 1);
        int64_t t = o->bperm[i];

        o->bperm[i] = o->bperm[j];
        o->bperm[j] = t;
    }
    o->part_at = -1;
    if (o->n_lines % WK_CTR_INDEX_EVERY != 0)
        for (long long i = 0; i < nb; i++)
            if (o->bperm[i] == nb - 1)
                o->part_at = i;
    o->epoch = epoch;
}

long long wk_ctr_window_start(const struct wk_ctr_order *o, long long w)
{
    long long nb = blocks_of(o->n_lines), b;
    long long short_by = nb * WK_CTR_INDEX_EVERY - o->n_lines;

    b = w >= (nb + o->win_blocks - 1) / o->win_blocks ? nb
                                                       : w * o->win_blocks;
    return b * WK_CTR_INDEX_EVERY -
           (o->part_at >= 0 && o->part_at < b ? short_by : 0);
}

long long wk_ctr_window_of(const struct wk_ctr_order *o, long long p)
{
    long long w = p / ((long long)o->win_blocks * WK_CTR_INDEX_EVERY);

    while (wk_ctr_window_start(o, w + 1) <= p) /* once at most: short_by
                                                  < 1024 */
        w++;
    return w;
}

int wk_ctr_window(const struct wk_ctr_order *o, long long w,
                  int64_t *blocks, int32_t *perm, int *rows)
{
    long long lo = w * o->win_blocks, hi = lo + o->win_blocks;
    const long long nb = blocks_of(o->n_lines);
    uint64_t state = order_state(o, o->epoch, hc_mix64((uint64_t)w + 1));
    int nw = 0, n = 0;

    if (hi > nb)
        hi = nb;
    for (long long i = lo; i < hi; i++) {     /* insertion sort: ≤ 16 */
        int j = nw++;

        for (; j > 0 && blocks[j - 1] > o->bperm[i]; j--)
            blocks[j] = blocks[j - 1];
        blocks[j] = o->bperm[i];
    }
    for (int i = 0; i < nw; i++)
        n += blocks[i] == nb - 1 ? (int)(o->n_lines - blocks[i] *
                                         WK_CTR_INDEX_EVERY)
                                 : WK_CTR_INDEX_EVERY;
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)hc_rng_below(&state, (uint64_t)i + 1);
        int32_t t = perm[i];

        perm[i] = perm[j];
        perm[j] = t;
    }
    *rows = n;
    return nw;
}

/* The window, its parsed lines and the order's blocks: W from the row's
 * bytes, allocated once. */
static int alloc_order(struct wk_ctr *c)
{
    const int nn = wk_ctr_n_num(c), nc = wk_ctr_n_cat(c);
    size_t row = sizeof(float) * (size_t)(1 + nn) + sizeof(int64_t) * nc;
    size_t per_block = row * WK_CTR_INDEX_EVERY, lines;
    long long W = WK_CTR_WINDOW;
    int rv;

    if (c->ord.bperm)
        return HC_OK;
    if ((size_t)W * per_block > WK_CTR_WINDOW_BYTES)
        W = (long long)(WK_CTR_WINDOW_BYTES / per_block);
    if (W < 1)
        W = 1;
    if ((rv = wk_ctr_order_init(&c->ord, c->n_lines, c->o.seed, (int)W)))
        return hc_err_set(rv, "%s: %s", c->path, hc_err_msg());
    lines = (size_t)c->ord.win_blocks * WK_CTR_INDEX_EVERY;
    c->win_order = malloc(lines * sizeof *c->win_order);
    c->w_label = malloc(lines * sizeof *c->w_label);
    c->w_num = malloc(lines * (size_t)nn * sizeof *c->w_num);
    c->w_cat = malloc(lines * (size_t)nc * sizeof *c->w_cat);
    if (!c->win_order || !c->w_label || !c->w_num || !c->w_cat) {
        wk_ctr_order_free(&c->ord);
        free(c->win_order);
        free(c->w_label);
        free(c->w_num);
        free(c->w_cat);
        c->win_order = NULL;
        c->w_label = c->w_num = NULL;
        c->w_cat = NULL;
        return hc_err_set(HC_ERR_NOMEM, "%s: no memory for a shuffle window "
                          "of %zu lines", c->path, lines);
    }
    return HC_OK;
}

/* Parse window w's blocks (in file order) and shuffle its lines. */
static int load_window(struct wk_ctr *c, long long w)
{
    const int nn = wk_ctr_n_num(c), nc = wk_ctr_n_cat(c);
    int64_t blocks[WK_CTR_WINDOW];
    int nw, rows = 0, n, got, rv;

    c->win = -1;
    nw = wk_ctr_window(&c->ord, w, blocks, c->win_order, &n);
    for (int i = 0; i < nw; i++) {
        long long a = blocks[i] * WK_CTR_INDEX_EVERY;

        if ((rv = wk_ctr_read(c, a, WK_CTR_INDEX_EVERY, &c->w_label[rows],
                              &c->w_num[(size_t)rows * nn],
                              &c->w_cat[(size_t)rows * nc], &got)) != HC_OK)
            return rv;
        rows += got;
    }
    if (rows != n)
        return hc_err_set(HC_ERR_IO, "%s: window %lld read %d lines, %d "
                          "expected (the file changed?)", c->path, w, rows,
                          n);
    c->win = w;
    c->win_start = wk_ctr_window_start(&c->ord, w);
    c->win_n = rows;
    return HC_OK;
}

int wk_ctr_read_epoch(struct wk_ctr *c, int epoch, long long start, int count,
                      float *label, float *num, int64_t *cat, int *n_out)
{
    const int nn = wk_ctr_n_num(c), nc = wk_ctr_n_cat(c);
    long long end;
    int rv;

    *n_out = 0;
    if (epoch < 0)
        return hc_err_set(HC_ERR_INVAL, "%s: bad epoch %d", c->path, epoch);
    if (!c->o.shuffle)
        return wk_ctr_read(c, start, count, label, num, cat, n_out);
    if (start < 0 || count < 1)
        return hc_err_set(HC_ERR_INVAL, "%s: bad read of %d position(s) from "
                          "%lld", c->path, count, start);
    if (start >= c->n_lines)
        return HC_OK;
    if ((rv = alloc_order(c)) != HC_OK)
        return rv;
    if (c->ord.epoch != epoch) {
        wk_ctr_order_epoch(&c->ord, epoch);
        c->win = -1;
    }
    end = start + count < c->n_lines ? start + count : c->n_lines;
    for (long long p = start; p < end; p++) {
        size_t i = (size_t)(p - start), r;

        if (c->win < 0 || p < c->win_start || p >= c->win_start + c->win_n) {
            if ((rv = load_window(c, wk_ctr_window_of(&c->ord, p))) !=
                HC_OK)
                return rv;
        }
        r = (size_t)c->win_order[p - c->win_start];
        label[i] = c->w_label[r];
        memcpy(&num[i * nn], &c->w_num[r * nn], (size_t)nn * sizeof *num);
        memcpy(&cat[i * nc], &c->w_cat[r * nc], (size_t)nc * sizeof *cat);
        (*n_out)++;
    }
    return HC_OK;
}

int wk_ctr_batch(struct wk_ctr *c, int n, int k, int epoch, long long batch,
                 int B,
                 float *label, float *num, int64_t *cat, int *n_out)
{
    long long first, count, at;
    int rv;

    *n_out = 0;
    if (epoch < 0 || batch < 0 || B < 1)
        return hc_err_set(HC_ERR_INVAL, "%s: bad batch request (epoch %d, "
                          "batch %lld, size %d)", c->path, epoch, batch, B);
    if ((rv = wk_ctr_part(c, n, k, &first, &count)) != HC_OK)
        return rv;
    if (batch >= wk_ctr_batches_of(count, B))
        return HC_OK;
    at = batch * B;
    if (at >= count)
        return HC_OK;
    return wk_ctr_read_epoch(c, epoch, first + at,
                             (int)(count - at < B ? count - at : B), label,
                             num, cat, n_out);
}

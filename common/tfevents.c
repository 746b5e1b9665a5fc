/*
 * tfevents.c — TensorBoard event files (see tfevents.h): the record
 * framing with masked CRC32Cs around protobuf-c encoded Events.
 */
#include "tfevents.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "crc32c.h"
#include "err.h"
#include "tfevent.pb-c.h"

#define MAX_SCALARS 64

struct hc_tfevents {
    FILE *f;
    char path[PATH_MAX];
};

uint32_t hc_tfevents_masked_crc(const void *buf, size_t len)
{
    uint32_t c = hc_crc32c(buf, len);

    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

int hc_mkdirs(const char *dir)
{
    char p[PATH_MAX];
    size_t i, n = strlen(dir);

    if (n == 0 || n >= sizeof p)
        return hc_err_set(HC_ERR_INVAL, "directory name '%s' is empty or "
                          "too long", dir);
    memcpy(p, dir, n + 1);
    for (i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        p[i] = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return hc_err_set(HC_ERR_IO, "cannot create directory %s: %s", p,
                              strerror(errno));
        p[i] = i < n ? '/' : '\0';
    }
    return HC_OK;
}

static double wall_now(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

static void le64(unsigned char *b, uint64_t v)
{
    int i;

    for (i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static void le32(unsigned char *b, uint32_t v)
{
    int i;

    for (i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

/* One record holding ev. */
static int write_event(struct hc_tfevents *t, const Tfevent__Event *ev)
{
    unsigned char head[12], tail[4], small[1024], *data = small;
    size_t n = tfevent__event__get_packed_size(ev);
    int ok;

    if (n > sizeof small && !(data = malloc(n)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory for an event");
    tfevent__event__pack(ev, data);
    le64(head, n);
    le32(head + 8, hc_tfevents_masked_crc(head, 8));
    le32(tail, hc_tfevents_masked_crc(data, n));
    ok = fwrite(head, 1, sizeof head, t->f) == sizeof head &&
         fwrite(data, 1, n, t->f) == n &&
         fwrite(tail, 1, sizeof tail, t->f) == sizeof tail;
    if (data != small)
        free(data);
    if (!ok)
        return hc_err_set(HC_ERR_IO, "cannot write %s: %s", t->path,
                          strerror(errno));
    return HC_OK;
}

int hc_tfevents_open(struct hc_tfevents **out, const char *dir)
{
    Tfevent__Event ev = TFEVENT__EVENT__INIT;
    struct hc_tfevents *t;
    char host[256] = "localhost";
    int rv;

    *out = NULL;
    if ((rv = hc_mkdirs(dir)) != HC_OK)
        return rv;
    if (!(t = calloc(1, sizeof *t)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    gethostname(host, sizeof host - 1);
    snprintf(t->path, sizeof t->path, "%s/events.out.tfevents.%lld.%s.%d",
             dir, (long long)wall_now(), host, (int)getpid());
    if (!(t->f = fopen(t->path, "wb"))) {
        rv = hc_err_set(HC_ERR_IO, "cannot create %s: %s", t->path,
                        strerror(errno));
        free(t);
        return rv;
    }
    ev.has_wall_time = 1;
    ev.wall_time = wall_now();
    ev.what_case = TFEVENT__EVENT__WHAT_FILE_VERSION;
    ev.file_version = "brain.Event:2";
    if ((rv = write_event(t, &ev)) != HC_OK ||
        (rv = hc_tfevents_flush(t)) != HC_OK) {
        fclose(t->f);
        free(t);
        return rv;
    }
    *out = t;
    return HC_OK;
}

int hc_tfevents_scalars(struct hc_tfevents *t, int64_t step, int n,
                        const char *const *tags, const float *values)
{
    Tfevent__Event ev = TFEVENT__EVENT__INIT;
    Tfevent__Summary sum = TFEVENT__SUMMARY__INIT;
    Tfevent__Summary__Value v[MAX_SCALARS], *pv[MAX_SCALARS];
    int i;

    if (n > MAX_SCALARS)
        n = MAX_SCALARS;
    for (i = 0; i < n; i++) {
        tfevent__summary__value__init(&v[i]);
        v[i].tag = (char *)tags[i];
        v[i].value_case = TFEVENT__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
        v[i].simple_value = values[i];
        pv[i] = &v[i];
    }
    sum.n_value = (size_t)n;
    sum.value = pv;
    ev.has_wall_time = ev.has_step = 1;
    ev.wall_time = wall_now();
    ev.step = step;
    ev.what_case = TFEVENT__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    return write_event(t, &ev);
}

int hc_tfevents_flush(struct hc_tfevents *t)
{
    if (fflush(t->f) != 0)
        return hc_err_set(HC_ERR_IO, "cannot write %s: %s", t->path,
                          strerror(errno));
    return HC_OK;
}

const char *hc_tfevents_path(const struct hc_tfevents *t)
{
    return t->path;
}

int hc_tfevents_close(struct hc_tfevents *t)
{
    int rv = HC_OK;

    if (!t)
        return HC_OK;
    if (fclose(t->f) != 0)
        rv = hc_err_set(HC_ERR_IO, "cannot write %s: %s", t->path,
                        strerror(errno));
    free(t);
    return rv;
}

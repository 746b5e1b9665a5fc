/*
 * tls.c — a cluster's certificates (see tls.h): finding a process's files,
 * and making a CA and one certificate per task with mbedTLS (key
 * generation, X.509 writing and PEM encoding are all mbedTLS's; this file
 * only says what goes into each certificate).
 */
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mbedtls/asn1write.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>

#include "err.h"
#include "log.h"

#define PEM_MAX 8192
#define VALID_YEARS 10

void hc_tls_file_name(char *buf, size_t n, const char *name)
{
    const char *colon = strchr(name, ':');

    if (colon)
        snprintf(buf, n, "%.*s-%s.pem", (int)(colon - name), name, colon + 1);
    else
        snprintf(buf, n, "%s.pem", name);
}

static int readable(const char *path)
{
    return access(path, R_OK) == 0;
}

int hc_tls_resolve(const struct hc_cluster *cl, const char *name,
                   struct hc_tls *out)
{
    static atomic_int warned;
    const char *env = getenv("HETPS_CERTS"), *from;
    char file[64];

    memset(out, 0, sizeof *out);
    if (cl->insecure) {
        if (!atomic_exchange(&warned, 1))
            hc_warn("INSECURE: %s says \"insecure\": true — plain TCP, no "
                    "encryption, no authentication: anyone who reaches the "
                    "servers' ports can read, change or stop the training",
                    cl->source);
        return HC_OK;
    }
    if (env && env[0]) {
        snprintf(out->dir, sizeof out->dir, "%s", env);
        from = "HETPS_CERTS";
    } else if (cl->certs[0]) {
        snprintf(out->dir, sizeof out->dir, "%s", cl->certs);
        from = "the cluster file's hetps.certs";
    } else {
        snprintf(out->dir, sizeof out->dir, "%s", HC_TLS_DEFAULT_DIR);
        from = "the default";
    }
    hc_tls_file_name(file, sizeof file, name);
    snprintf(out->ca, sizeof out->ca, "%s/ca.crt", out->dir);
    snprintf(out->cert_key, sizeof out->cert_key, "%s/%s", out->dir, file);
    if (!readable(out->ca) || !readable(out->cert_key))
        return hc_err_set(HC_ERR_CONFIG,
                          "%s: cannot read %s (certificate directory %s, from "
                          "%s): make the cluster's certificates with `hetps "
                          "certs CLUSTER_FILE %s` (hetps launch makes them "
                          "itself), point HETPS_CERTS or \"hetps\": "
                          "{\"certs\": DIR} at them, or set \"insecure\": "
                          "true in the cluster file for plain TCP",
                          name, readable(out->ca) ? out->cert_key : out->ca,
                          out->dir, from, out->dir);
    out->files.ca_file = out->ca;
    out->files.cert_key_file = out->cert_key;
    out->rpc = &out->files;
    return HC_OK;
}

/* ---- making certificates ----------------------------------------------- */

struct maker {
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_pk_context ca_key;
    char ca_subject[256];       /* "CN=…,O=…" as written in ca.crt */
    const char *dir;
    char org[64];               /* "O=hetps cluster 0123456789abcdef" */
};

static int mbed_err(int rv, const char *what, const char *path)
{
    char buf[160];

    mbedtls_strerror(rv, buf, sizeof buf);
    return hc_err_set(HC_ERR_IO, "hetps certs: %s %s: %s", what, path, buf);
}

/* Write `len` bytes to dir/name, created with `mode`; never overwrites. */
static int write_new(const char *path, const unsigned char *data, size_t len,
                     mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    size_t at = 0;

    if (fd < 0)
        return hc_err_set(HC_ERR_IO, "hetps certs: cannot create %s: %s",
                          path, strerror(errno));
    while (at < len) {
        ssize_t n = write(fd, data + at, len - at);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = errno;

            close(fd);
            unlink(path);
            return hc_err_set(HC_ERR_IO, "hetps certs: writing %s: %s", path,
                              strerror(e));
        }
        at += (size_t)n;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        unlink(path);
        return hc_err_set(HC_ERR_IO, "hetps certs: writing %s: %s", path,
                          strerror(errno));
    }
    return HC_OK;
}

static int new_key(struct maker *m, mbedtls_pk_context *k)
{
    int rv;

    mbedtls_pk_init(k);
    if ((rv = mbedtls_pk_setup(k, mbedtls_pk_info_from_type(
                                      MBEDTLS_PK_ECKEY))) != 0 ||
        (rv = mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(*k),
                                  mbedtls_ctr_drbg_random, &m->drbg)) != 0)
        return mbed_err(rv, "generating a key for", m->dir);
    return HC_OK;
}

/* "YYYYMMDDhhmmss" of now + secs (UTC). */
static void stamp(char out[16], time_t secs)
{
    time_t t = time(NULL) + secs;
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(out, 16, "%Y%m%d%H%M%S", &tm);
}

/* A subjectAltName extension holding one dNSName (a host name or an IP
 * address as text: what mbedTLS compares with the name a client dials). */
static int san_ext(unsigned char *buf, size_t cap, const char *host,
                   unsigned char **start, size_t *len)
{
    unsigned char *p = buf + cap;
    size_t hl = strlen(host);
    int n = 0, r;

#define W(call) do { if ((r = (call)) < 0) return r; n += r; } while (0)
    W(mbedtls_asn1_write_raw_buffer(&p, buf, (const unsigned char *)host, hl));
    W(mbedtls_asn1_write_len(&p, buf, hl));
    W(mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 2));
    W(mbedtls_asn1_write_len(&p, buf, (size_t)n));
    W(mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONSTRUCTED |
                                          MBEDTLS_ASN1_SEQUENCE));
#undef W
    *start = p;
    *len = (size_t)n;
    return 0;
}

/*
 * A certificate for `subject` with key `key`, signed by the CA (or by
 * itself when is_ca), in PEM into out.
 */
static int make_crt(struct maker *m, const char *subject,
                    mbedtls_pk_context *key, int is_ca, const char *host,
                    unsigned char *out, size_t cap, const char *path)
{
    mbedtls_x509write_cert c;
    mbedtls_mpi serial;
    unsigned char sn[16], ext[600], *e;
    char from[16], until[16];
    size_t elen;
    int rv;

    mbedtls_x509write_crt_init(&c);
    mbedtls_mpi_init(&serial);
    stamp(from, -3600);
    stamp(until, (time_t)VALID_YEARS * 365 * 24 * 3600);
    if ((rv = mbedtls_ctr_drbg_random(&m->drbg, sn, sizeof sn)) != 0)
        goto out;
    sn[0] &= 0x7f;
    sn[0] |= 0x01;
    mbedtls_x509write_crt_set_version(&c, MBEDTLS_X509_CRT_VERSION_3);
    mbedtls_x509write_crt_set_md_alg(&c, MBEDTLS_MD_SHA256);
    mbedtls_x509write_crt_set_subject_key(&c, key);
    mbedtls_x509write_crt_set_issuer_key(&c, is_ca ? key : &m->ca_key);
    if ((rv = mbedtls_mpi_read_binary(&serial, sn, sizeof sn)) != 0 ||
        (rv = mbedtls_x509write_crt_set_serial(&c, &serial)) != 0 ||
        (rv = mbedtls_x509write_crt_set_subject_name(&c, subject)) != 0 ||
        (rv = mbedtls_x509write_crt_set_issuer_name(
             &c, is_ca ? subject : m->ca_subject)) != 0 ||
        (rv = mbedtls_x509write_crt_set_validity(&c, from, until)) != 0 ||
        (rv = mbedtls_x509write_crt_set_basic_constraints(&c, is_ca,
                                                          is_ca ? 0 : -1)) != 0 ||
        (rv = mbedtls_x509write_crt_set_key_usage(
             &c, is_ca ? MBEDTLS_X509_KU_KEY_CERT_SIGN | MBEDTLS_X509_KU_CRL_SIGN
                       : MBEDTLS_X509_KU_DIGITAL_SIGNATURE)) != 0)
        goto out;
    if (host && host[0]) {
        if ((rv = san_ext(ext, sizeof ext, host, &e, &elen)) < 0 ||
            (rv = mbedtls_x509write_crt_set_extension(
                 &c, MBEDTLS_OID_SUBJECT_ALT_NAME,
                 MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME), 0, e,
                 elen)) != 0)
            goto out;
    }
    rv = mbedtls_x509write_crt_pem(&c, out, cap, mbedtls_ctr_drbg_random,
                                   &m->drbg);
out:
    mbedtls_x509write_crt_free(&c);
    mbedtls_mpi_free(&serial);
    return rv ? mbed_err(rv, "making the certificate", path) : HC_OK;
}

/* The CA: loaded when ca.crt and ca.key exist, else made. */
static int load_or_make_ca(struct maker *m, int *made)
{
    char crt_path[PATH_MAX + 16], key_path[PATH_MAX + 16];
    unsigned char crt[PEM_MAX], key[PEM_MAX];
    mbedtls_x509_crt ca;
    char *s, *d;
    int rv, have_crt, have_key;

    snprintf(crt_path, sizeof crt_path, "%s/ca.crt", m->dir);
    snprintf(key_path, sizeof key_path, "%s/ca.key", m->dir);
    have_crt = access(crt_path, F_OK) == 0;
    have_key = access(key_path, F_OK) == 0;
    if (have_crt != have_key)
        return hc_err_set(HC_ERR_CONFIG,
                          "hetps certs: %s has %s but not %s: new certificates "
                          "need both the CA's certificate and its key (restore "
                          "it, or use an empty directory for a new CA)",
                          m->dir, have_crt ? "ca.crt" : "ca.key",
                          have_crt ? "ca.key" : "ca.crt");
    if (have_crt) {
        if ((rv = mbedtls_pk_parse_keyfile(&m->ca_key, key_path, NULL)) != 0)
            return mbed_err(rv, "reading the CA key", key_path);
        mbedtls_x509_crt_init(&ca);
        rv = mbedtls_x509_crt_parse_file(&ca, crt_path);
        if (rv == 0 && mbedtls_x509_dn_gets(m->ca_subject, sizeof m->ca_subject,
                                            &ca.subject) < 0)
            rv = MBEDTLS_ERR_X509_BUFFER_TOO_SMALL;
        mbedtls_x509_crt_free(&ca);
        if (rv != 0)
            return mbed_err(rv, "reading the CA certificate", crt_path);
        /* dn_gets writes "CN=x, O=y"; the writer wants "CN=x,O=y". */
        for (s = d = m->ca_subject; *s; s++)
            if (!(s[0] == ' ' && s > m->ca_subject && s[-1] == ','))
                *d++ = *s;
        *d = '\0';
        return HC_OK;
    }
    mbedtls_pk_free(&m->ca_key);
    if ((rv = new_key(m, &m->ca_key)) != HC_OK)
        return rv;
    snprintf(m->ca_subject, sizeof m->ca_subject, "CN=hetps CA,%s", m->org);
    if ((rv = make_crt(m, m->ca_subject, &m->ca_key, 1, NULL, crt,
                       sizeof crt, crt_path)) != HC_OK)
        return rv;
    if ((rv = mbedtls_pk_write_key_pem(&m->ca_key, key, sizeof key)) != 0)
        return mbed_err(rv, "encoding the CA key for", key_path);
    if ((rv = write_new(key_path, key, strlen((char *)key), 0600)) != HC_OK ||
        (rv = write_new(crt_path, crt, strlen((char *)crt), 0644)) != HC_OK)
        return rv;
    *made += 2;
    return HC_OK;
}

/* Task `name`'s certificate and key in one file, unless it exists. */
static int make_task(struct maker *m, const char *name, const char *host,
                     int *made)
{
    char file[64], path[PATH_MAX + 64], subject[160];
    unsigned char pem[2 * PEM_MAX];
    mbedtls_pk_context key;
    size_t at;
    int rv;

    hc_tls_file_name(file, sizeof file, name);
    snprintf(path, sizeof path, "%s/%s", m->dir, file);
    if (access(path, F_OK) == 0)
        return HC_OK;
    snprintf(subject, sizeof subject, "CN=%s,%s", name, m->org);
    if ((rv = new_key(m, &key)) != HC_OK)
        goto out;
    if ((rv = make_crt(m, subject, &key, 0, host, pem, PEM_MAX, path)) != HC_OK)
        goto out;
    at = strlen((char *)pem);
    if ((rv = mbedtls_pk_write_key_pem(&key, pem + at, sizeof pem - at)) != 0) {
        rv = mbed_err(rv, "encoding the key for", path);
        goto out;
    }
    if ((rv = write_new(path, pem, strlen((char *)pem), 0600)) == HC_OK)
        (*made)++;
out:
    mbedtls_pk_free(&key);
    return rv;
}

/* 1 when dir holds ca.crt and every task's file (ca.key is not needed:
 * a mounted set without it is complete). */
static int all_there(const struct hc_cluster *cl, const char *dir)
{
    char name[32], file[64], path[PATH_MAX + 64];
    int i, n = cl->n_ps + cl->n_worker;

    snprintf(path, sizeof path, "%s/ca.crt", dir);
    if (access(path, F_OK) != 0)
        return 0;
    for (i = 0; i <= n; i++) {
        if (i == n)
            snprintf(name, sizeof name, "admin");
        else if (i < cl->n_ps)
            snprintf(name, sizeof name, "ps:%d", i);
        else
            snprintf(name, sizeof name, "worker:%d", i - cl->n_ps);
        hc_tls_file_name(file, sizeof file, name);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        if (access(path, F_OK) != 0)
            return 0;
    }
    return 1;
}

int hc_tls_make(const struct hc_cluster *cl, const char *dir, int *made)
{
    static const char pers[] = "hetps certs";
    struct maker m;
    char name[32];
    int n = 0, rv = HC_OK, i;

    if (made)
        *made = 0;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return hc_err_set(HC_ERR_IO, "hetps certs: cannot create %s: %s", dir,
                          strerror(errno));
    memset(&m, 0, sizeof m);
    m.dir = dir;
    snprintf(m.org, sizeof m.org, "O=hetps cluster %016llx",
             (unsigned long long)cl->id);
    mbedtls_entropy_init(&m.entropy);
    mbedtls_ctr_drbg_init(&m.drbg);
    mbedtls_pk_init(&m.ca_key);
    if (all_there(cl, dir))
        goto out;
    if ((rv = mbedtls_ctr_drbg_seed(&m.drbg, mbedtls_entropy_func, &m.entropy,
                                    (const unsigned char *)pers,
                                    sizeof pers - 1)) != 0) {
        rv = mbed_err(rv, "seeding the random generator for", dir);
        goto out;
    }
    if ((rv = load_or_make_ca(&m, &n)) != HC_OK)
        goto out;
    for (i = 0; i < cl->n_ps && rv == HC_OK; i++) {
        snprintf(name, sizeof name, "ps:%d", i);
        rv = make_task(&m, name, cl->ps[i].host, &n);
    }
    for (i = 0; i < cl->n_worker && rv == HC_OK; i++) {
        snprintf(name, sizeof name, "worker:%d", i);
        rv = make_task(&m, name, cl->worker[i].host, &n);
    }
    if (rv == HC_OK)
        rv = make_task(&m, "admin", NULL, &n);
out:
    mbedtls_pk_free(&m.ca_key);
    mbedtls_ctr_drbg_free(&m.drbg);
    mbedtls_entropy_free(&m.entropy);
    if (made)
        *made = n;
    return rv;
}

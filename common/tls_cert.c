/*
 * tls_cert.c — a cluster's certificates (see tls_cert.h): finding a
 * process's files, and making a CA and one certificate per task with
 * OpenSSL (key generation, X.509 signing and PEM encoding are OpenSSL's;
 * this file only says what goes into each certificate).
 */
#include "tls_cert.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "err.h"
#include "log.h"

#define VALID_YEARS 10

void hc_tls_file_name(char *buf, size_t n, const char *name)
{
    const char *colon = strchr(name, ':');

    if (colon)
        snprintf(buf, n, "%.*s-%s.pem", (int)(colon - name), name, colon + 1);
    else
        snprintf(buf, n, "%s.pem", name);
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
    if (access(out->ca, R_OK) != 0 || access(out->cert_key, R_OK) != 0)
        return hc_err_set(HC_ERR_CONFIG,
                          "%s: cannot read %s (certificate directory %s, from "
                          "%s): make the cluster's certificates with `hetps "
                          "certs CLUSTER_FILE %s` (hetps launch makes them "
                          "itself), point HETPS_CERTS or \"hetps\": "
                          "{\"certs\": DIR} at them, or set \"insecure\": "
                          "true in the cluster file for plain TCP",
                          name,
                          access(out->ca, R_OK) == 0 ? out->cert_key : out->ca,
                          out->dir, from, out->dir);
    out->files.ca_file = out->ca;
    out->files.cert_key_file = out->cert_key;
    out->rpc = &out->files;
    return HC_OK;
}

/* ---- making certificates ----------------------------------------------- */

struct maker {
    EVP_PKEY *ca_key;
    X509 *ca;                   /* ca.crt, the issuer of every task's */
    const char *dir;
    char org[64];               /* "hetps cluster 0123456789abcdef" */
};

/* An OpenSSL failure as our error, naming what and where. */
static int ssl_err(const char *what, const char *path)
{
    char why[160] = "unknown error";
    unsigned long e = ERR_peek_last_error();

    if (e)
        ERR_error_string_n(e, why, sizeof why);
    ERR_clear_error();
    return hc_err_set(HC_ERR_IO, "hetps certs: %s %s: %s", what, path, why);
}

/* A certificate and its key (either may be NULL) as PEM into a new file
 * path, created with `mode`; never overwrites. */
static int write_pem(const char *path, X509 *x, EVP_PKEY *key, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode), rv;
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

    if (!f) {
        rv = hc_err_set(HC_ERR_IO, "hetps certs: cannot create %s: %s", path,
                        strerror(errno));
        if (fd >= 0)
            close(fd);
        return rv;
    }
    if ((x && !PEM_write_X509(f, x)) ||
        (key && !PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL)))
        rv = ssl_err("encoding", path);
    else if (fflush(f) != 0 || fsync(fd) != 0)
        rv = hc_err_set(HC_ERR_IO, "hetps certs: writing %s: %s", path,
                        strerror(errno));
    else
        rv = HC_OK;
    if (fclose(f) != 0 && rv == HC_OK)
        rv = hc_err_set(HC_ERR_IO, "hetps certs: writing %s: %s", path,
                        strerror(errno));
    if (rv != HC_OK)
        unlink(path);
    return rv;
}

/* One extension of the X.509v3 configuration syntax ("critical,CA:TRUE"). */
static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509_EXTENSION *e;
    int ok;

    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    if (!(e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value)))
        return 0;
    ok = X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
    return ok;
}

/*
 * A certificate for CN `cn` with key `key`, signed by the CA (or by
 * itself when m->ca is NULL: the CA's own), naming `host` when not NULL.
 * NULL with the error set.
 */
static X509 *make_crt(struct maker *m, const char *cn, EVP_PKEY *key,
                      const char *host, const char *path)
{
    X509 *x = X509_new();
    X509_NAME *name = X509_NAME_new();
    BIGNUM *bn = NULL;
    unsigned char sn[16], a[16];
    char san[600];
    int is_ca = m->ca == NULL, ok;

    ok = x && name && RAND_bytes(sn, sizeof sn) == 1;
    sn[0] = (unsigned char)((sn[0] & 0x7f) | 0x01); /* positive, 16 bytes */
    ok = ok && (bn = BN_bin2bn(sn, sizeof sn, NULL)) != NULL &&
         BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) &&
         X509_set_version(x, 2) &&
         X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                    (const unsigned char *)cn, -1, -1, 0) &&
         X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                                    (const unsigned char *)m->org, -1, -1, 0) &&
         X509_set_subject_name(x, name) &&
         X509_set_issuer_name(x, is_ca ? name : X509_get_subject_name(m->ca)) &&
         X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
         X509_time_adj_ex(X509_getm_notAfter(x), VALID_YEARS * 365, 0, NULL) &&
         X509_set_pubkey(x, key) &&
         add_ext(x, is_ca ? x : m->ca, NID_basic_constraints,
                 is_ca ? "critical,CA:TRUE,pathlen:0" : "CA:FALSE") &&
         add_ext(x, is_ca ? x : m->ca, NID_key_usage,
                 is_ca ? "critical,keyCertSign,cRLSign"
                       : "critical,digitalSignature");
    if (ok && host && host[0]) {
        /* A dNSName always (what certificates made before 2026-12 held,
         * and what their readers compare), an iPAddress too for an
         * address. */
        snprintf(san, sizeof san, inet_pton(AF_INET, host, a) == 1 ||
                 inet_pton(AF_INET6, host, a) == 1 ? "DNS:%s,IP:%s"
                                                   : "DNS:%s", host, host);
        ok = add_ext(x, m->ca, NID_subject_alt_name, san);
    }
    ok = ok && X509_sign(x, is_ca ? key : m->ca_key, EVP_sha256()) > 0;
    BN_free(bn);
    X509_NAME_free(name);
    if (ok)
        return x;
    ssl_err("making the certificate", path);
    X509_free(x);
    return NULL;
}

/* The CA's key and certificate from their files. */
static int load_ca(struct maker *m, const char *crt_path, const char *key_path)
{
    FILE *f;

    if (!(f = fopen(key_path, "r")))
        return hc_err_set(HC_ERR_IO, "hetps certs: reading the CA key %s: %s",
                          key_path, strerror(errno));
    m->ca_key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    if (!m->ca_key)
        return ssl_err("reading the CA key", key_path);
    if (!(f = fopen(crt_path, "r")))
        return hc_err_set(HC_ERR_IO, "hetps certs: reading the CA "
                          "certificate %s: %s", crt_path, strerror(errno));
    m->ca = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (!m->ca)
        return ssl_err("reading the CA certificate", crt_path);
    if (X509_check_private_key(m->ca, m->ca_key) != 1)
        return hc_err_set(HC_ERR_CONFIG, "hetps certs: %s is not the key of "
                          "%s (restore the pair, or use an empty directory "
                          "for a new CA)", key_path, crt_path);
    return HC_OK;
}

/* The CA: loaded when ca.crt and ca.key exist, else made. */
static int load_or_make_ca(struct maker *m, int *made)
{
    char crt_path[PATH_MAX + 16], key_path[PATH_MAX + 16];
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
    if (have_crt)
        return load_ca(m, crt_path, key_path);
    if (!(m->ca_key = EVP_EC_gen("P-256")))
        return ssl_err("generating a key for", m->dir);
    if (!(m->ca = make_crt(m, "hetps CA", m->ca_key, NULL, crt_path)))
        return HC_ERR_IO;
    if ((rv = write_pem(key_path, NULL, m->ca_key, 0600)) == HC_OK &&
        (rv = write_pem(crt_path, m->ca, NULL, 0644)) == HC_OK)
        *made += 2;
    return rv;
}

/* Task `name`'s certificate and key in one file, unless it exists (the CA
 * loaded first if need be). */
static int make_task(struct maker *m, const char *name, const char *host,
                     int *made)
{
    char file[64], path[PATH_MAX + 64];
    EVP_PKEY *key = NULL;
    X509 *x = NULL;
    int rv = HC_ERR_IO;

    hc_tls_file_name(file, sizeof file, name);
    snprintf(path, sizeof path, "%s/%s", m->dir, file);
    if (access(path, F_OK) == 0)
        return HC_OK;
    if (!m->ca && (rv = load_or_make_ca(m, made)) != HC_OK)
        return rv;
    if (!(key = EVP_EC_gen("P-256")))
        rv = ssl_err("generating a key for", path);
    else if ((x = make_crt(m, name, key, host, path)) &&
             (rv = write_pem(path, x, key, 0600)) == HC_OK)
        (*made)++;
    X509_free(x);
    EVP_PKEY_free(key);
    return rv;
}

int hc_tls_make(const struct hc_cluster *cl, const char *dir, int *made)
{
    struct maker m = {.dir = dir};
    char name[32], ca[PATH_MAX + 16];
    int n = 0, rv = HC_OK, i;

    if (made)
        *made = 0;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return hc_err_set(HC_ERR_IO, "hetps certs: cannot create %s: %s", dir,
                          strerror(errno));
    snprintf(m.org, sizeof m.org, "hetps cluster %016llx",
             (unsigned long long)cl->id);
    /* The CA is read only when a file is missing: a mounted set without
     * ca.key is complete. */
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    if (access(ca, F_OK) != 0)
        rv = load_or_make_ca(&m, &n);
    /* Its ps, its workers, then the front door's (no host). */
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
    X509_free(m.ca);
    EVP_PKEY_free(m.ca_key);
    if (made)
        *made = n;
    return rv;
}

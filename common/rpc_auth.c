/*
 * rpc_auth.c — the per-connection proof of a client's certificate (see
 * rpc_auth.h): control messages, signing with the client's key and
 * checking against the cluster CA, all with mbedTLS.
 */
#include "rpc_auth.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/sha256.h>
#include <mbedtls/x509_crt.h>

#include "err.h"

static const unsigned char magic[8] = { 0xff, 'H', 'E', 'T', 'P', 'S', 'A', 0xff };
static const char context[] = "hetps proof v1";

int hc_auth_kind_of(nng_msg *m)
{
    const unsigned char *b = nng_msg_body(m);

    if (nng_msg_len(m) < sizeof magic + 1 || memcmp(b, magic, sizeof magic))
        return 0;
    return b[sizeof magic];
}

int hc_auth_msg(nng_msg **out, int kind, const void *data, size_t n)
{
    unsigned char k = (unsigned char)kind;
    nng_msg *m;

    *out = NULL;
    if (nng_msg_alloc(&m, 0) != 0 || nng_msg_append(m, magic, sizeof magic) ||
        nng_msg_append(m, &k, 1) || (n && nng_msg_append(m, data, n)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory for a proof message");
    *out = m;
    return HC_OK;
}

const unsigned char *hc_auth_data(nng_msg *m, size_t *n)
{
    *n = nng_msg_len(m) - sizeof magic - 1;
    return (const unsigned char *)nng_msg_body(m) + sizeof magic + 1;
}

static void digest(const unsigned char *nonce, unsigned char out[32])
{
    unsigned char buf[sizeof context + HC_AUTH_NONCE];

    memcpy(buf, context, sizeof context);
    memcpy(buf + sizeof context, nonce, HC_AUTH_NONCE);
    mbedtls_sha256_ret(buf, sizeof buf, out, 0);
}

/* ---- client ------------------------------------------------------------ */

struct hc_auth_signer {
    mbedtls_x509_crt crt;
    mbedtls_pk_context key;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
};

int hc_auth_signer_open(hc_auth_signer **out, const char *path)
{
    hc_auth_signer *s = calloc(1, sizeof *s);
    char why[120];
    int rv;

    *out = NULL;
    if (!s)
        return hc_err_set(HC_ERR_NOMEM, "out of memory for a signer");
    mbedtls_x509_crt_init(&s->crt);
    mbedtls_pk_init(&s->key);
    mbedtls_entropy_init(&s->entropy);
    mbedtls_ctr_drbg_init(&s->drbg);
    if ((rv = mbedtls_x509_crt_parse_file(&s->crt, path)) != 0 ||
        (rv = mbedtls_pk_parse_keyfile(&s->key, path, NULL)) != 0 ||
        (rv = mbedtls_ctr_drbg_seed(&s->drbg, mbedtls_entropy_func,
                                    &s->entropy, (const unsigned char *)context,
                                    sizeof context - 1)) != 0) {
        mbedtls_strerror(rv, why, sizeof why);
        hc_auth_signer_close(s);
        return hc_err_set(HC_ERR_CONFIG, "%s: %s (a certificate and key made "
                          "by `hetps certs`?)", path, why);
    }
    *out = s;
    return HC_OK;
}

void hc_auth_signer_close(hc_auth_signer *s)
{
    if (!s)
        return;
    mbedtls_x509_crt_free(&s->crt);
    mbedtls_pk_free(&s->key);
    mbedtls_ctr_drbg_free(&s->drbg);
    mbedtls_entropy_free(&s->entropy);
    free(s);
}

int hc_auth_prove(hc_auth_signer *s, nng_msg *nonce_reply, nng_msg **proof)
{
    unsigned char hash[32], sig[MBEDTLS_PK_SIGNATURE_MAX_SIZE];
    unsigned char *buf;
    size_t n, sig_len = 0, clen = s->crt.raw.len;
    const unsigned char *nonce = hc_auth_data(nonce_reply, &n);
    int rv;

    *proof = NULL;
    if (n != HC_AUTH_NONCE || clen > 65535)
        return hc_err_set(HC_ERR_PROTO, "the server's nonce has %zu bytes, "
                          "not %d", n, HC_AUTH_NONCE);
    digest(nonce, hash);
    if ((rv = mbedtls_pk_sign(&s->key, MBEDTLS_MD_SHA256, hash, sizeof hash,
                              sig, &sig_len, mbedtls_ctr_drbg_random,
                              &s->drbg)) != 0)
        return hc_err_set(HC_ERR_INVAL, "signing the proof failed (-0x%04x)",
                          (unsigned)-rv);
    if (!(buf = malloc(2 + clen + sig_len)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory for a proof");
    buf[0] = (unsigned char)(clen & 0xff);
    buf[1] = (unsigned char)(clen >> 8);
    memcpy(buf + 2, s->crt.raw.p, clen);
    memcpy(buf + 2 + clen, sig, sig_len);
    rv = hc_auth_msg(proof, HC_AUTH_PROOF, buf, 2 + clen + sig_len);
    free(buf);
    return rv;
}

/* ---- server ------------------------------------------------------------ */

struct hc_auth_verifier {
    mbedtls_x509_crt ca;
    pthread_mutex_t mu;     /* mbedTLS caches in the CA's key: one at a time */
};

int hc_auth_verifier_open(hc_auth_verifier **out, const char *ca_file)
{
    hc_auth_verifier *v = calloc(1, sizeof *v);
    char why[120];
    int rv;

    *out = NULL;
    if (!v)
        return hc_err_set(HC_ERR_NOMEM, "out of memory for a verifier");
    mbedtls_x509_crt_init(&v->ca);
    pthread_mutex_init(&v->mu, NULL);
    if ((rv = mbedtls_x509_crt_parse_file(&v->ca, ca_file)) != 0) {
        mbedtls_strerror(rv, why, sizeof why);
        hc_auth_verifier_close(v);
        return hc_err_set(HC_ERR_CONFIG, "%s: %s", ca_file, why);
    }
    *out = v;
    return HC_OK;
}

void hc_auth_verifier_close(hc_auth_verifier *v)
{
    if (!v)
        return;
    mbedtls_x509_crt_free(&v->ca);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

int hc_auth_check(hc_auth_verifier *v, const unsigned char *nonce,
                  nng_msg *proof, char *who, size_t wn, char *why, size_t yn)
{
    mbedtls_x509_crt crt;
    const mbedtls_x509_name *nm;
    unsigned char hash[32];
    const unsigned char *d;
    size_t n, clen;
    uint32_t flags = 0;
    int rv = -1;

    who[0] = '\0';
    d = hc_auth_data(proof, &n);
    if (n < 2 || (clen = (size_t)d[0] | (size_t)d[1] << 8) + 2 >= n) {
        snprintf(why, yn, "malformed proof (%zu bytes)", n);
        return -1;
    }
    mbedtls_x509_crt_init(&crt);
    pthread_mutex_lock(&v->mu);
    if (mbedtls_x509_crt_parse_der(&crt, d + 2, clen) != 0) {
        snprintf(why, yn, "its certificate does not parse");
        goto out;
    }
    if (mbedtls_x509_crt_verify(&crt, &v->ca, NULL, NULL, &flags, NULL,
                                NULL) != 0) {
        char info[200];

        mbedtls_x509_crt_verify_info(info, sizeof info, "", flags);
        info[strcspn(info, "\n")] = '\0';
        snprintf(why, yn, "its certificate is not this cluster's (%s)", info);
        goto out;
    }
    for (nm = &crt.subject; nm; nm = nm->next)
        if (MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &nm->oid) == 0 &&
            nm->val.len < wn) {
            memcpy(who, nm->val.p, nm->val.len);
            who[nm->val.len] = '\0';
        }
    if (!who[0]) {
        snprintf(why, yn, "its certificate names no task (no CN)");
        goto out;
    }
    digest(nonce, hash);
    if (mbedtls_pk_verify(&crt.pk, MBEDTLS_MD_SHA256, hash, sizeof hash,
                          d + 2 + clen, n - 2 - clen) != 0) {
        snprintf(why, yn, "the signature for %s's certificate does not "
                 "verify (not its key)", who);
        who[0] = '\0';
        goto out;
    }
    rv = 0;
out:
    pthread_mutex_unlock(&v->mu);
    mbedtls_x509_crt_free(&crt);
    return rv;
}

/*
 * tls_cert.h — a cluster's certificates: where a process finds its own,
 * and making a set for a cluster (`hetps certs`, `hetps launch`).
 *
 * A certificate directory holds, all PEM:
 *   ca.crt          the cluster CA (every process needs it)
 *   ca.key          the CA's key (only to make more certificates: keep it
 *                   off the machines that run tasks)
 *   ps-J.pem        certificate + key of task ps:J: CN "ps:J", O the
 *                   cluster id, subjectAltName its host (clients check it)
 *   worker-I.pem    certificate + key of task worker:I (CN "worker:I")
 *   admin.pem       certificate + key of the `hetps` front door (CN "admin")
 * ECDSA P-256 keys, SHA-256 signatures (OpenSSL), valid ten years. The
 * subjectAltName names the host as a dNSName (an IP address as text too)
 * and an address as an iPAddress. Sets made before 2026-12 by mbedTLS are
 * read as they are (a grown cluster's new files signed by their CA).
 *
 * The directory, highest first: HETPS_CERTS, the cluster file's "hetps":
 * {"certs": DIR}, else "hetps-data/certs" (`hetps launch`'s default).
 */
#ifndef HC_TLS_CERT_H
#define HC_TLS_CERT_H

#include <limits.h>

#include "cluster.h"
#include "rpc.h"

#define HC_TLS_DEFAULT_DIR "hetps-data/certs"

/* One process's TLS files; `rpc` points into the paths (NULL when the
 * cluster is insecure: plain TCP). */
struct hc_tls {
    char dir[PATH_MAX];
    char ca[PATH_MAX + 16];
    char cert_key[PATH_MAX + 80];
    struct hc_rpc_tls files;
    const struct hc_rpc_tls *rpc;
};

/* The files of task `name` ("ps:0", "worker:1", "admin") of cl. An
 * insecure cluster gives out->rpc NULL and a warning (once per process).
 * HC_ERR_CONFIG, naming the file, the directory and how to make it, when
 * a file is not readable. */
int hc_tls_resolve(const struct hc_cluster *cl, const char *name,
                   struct hc_tls *out);

/* Make cl's certificate set in dir (created 0700 if absent): the missing
 * files only, so a second call does nothing and a grown cluster's new
 * tasks are signed by the same CA (which needs ca.key). *made (may be
 * NULL): the files written. HC_OK, or HC_ERR_IO / HC_ERR_CONFIG naming the
 * file. */
int hc_tls_make(const struct hc_cluster *cl, const char *dir, int *made);

/* The file name (not the path) of task `name`'s certificate: "ps-0.pem". */
void hc_tls_file_name(char *buf, size_t n, const char *name);

#endif

/*
 * tls_cert.h — a cluster's certificates: where a process finds its own, and how
 * a set is made for a cluster (`hetps certs`, `hetps launch`).
 *
 * A certificate directory holds, all PEM:
 *   ca.crt          the cluster CA (every process needs it)
 *   ca.key          the CA's private key (only to make more certificates:
 *                   keep it off the machines that run tasks)
 *   ps-J.pem        certificate + key of task ps:J; its subject CN is
 *                   "ps:J" and its subjectAltName the host of ps:J's address
 *                   (clients check it), O names the cluster id
 *   worker-I.pem    certificate + key of task worker:I (CN "worker:I")
 *   admin.pem       certificate + key of the `hetps` front door (CN "admin")
 * Keys are ECDSA P-256, signed with SHA-256, made with OpenSSL; a task's
 * certificate is valid for ten years from its making. Its subjectAltName
 * names its host as a dNSName (an IP address as text too) and, for an IP
 * address, as an iPAddress. Sets made before 2026-12 by mbedTLS are read
 * as they are (a grown cluster's new files are signed by their CA).
 *
 * Which directory a process reads, highest first: the HETPS_CERTS
 * environment variable, the cluster file's "hetps": {"certs": DIR}, else
 * "hetps-data/certs" (where `hetps launch` makes them by default).
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

/*
 * Find the files of task `name` ("ps:0", "worker:1", "admin") for cluster
 * cl. An insecure cluster gives out->rpc NULL and a warning in the log
 * (once per process). Returns HC_ERR_CONFIG, naming the missing file, the
 * directory searched and how to make it, when a file is not readable.
 */
int hc_tls_resolve(const struct hc_cluster *cl, const char *name,
                   struct hc_tls *out);

/*
 * Make the certificate set of cl in dir (created, mode 0700, if absent):
 * every file that is missing is made; existing files are kept, so a second
 * call is a no-op and a cluster that grew gets the new tasks' files signed
 * by the same CA (which needs ca.key). *made (may be NULL) receives how
 * many files were written. Returns HC_OK, or HC_ERR_IO / HC_ERR_CONFIG
 * naming the file.
 */
int hc_tls_make(const struct hc_cluster *cl, const char *dir, int *made);

/* The file name (not the path) of task `name`'s certificate: "ps-0.pem". */
void hc_tls_file_name(char *buf, size_t n, const char *name);

#endif

/*
 * err.h — the one error type of hetps.
 *
 * Every fallible function returns an int: 0 (HC_OK) on success or one of the
 * HC_ERR_* codes below. Foreign errors (nng, LMDB, protobuf-c, errno, CUDA)
 * are translated at the boundary where they occur. Because a bare code rarely
 * tells the user what to do, the function that detects an error may also
 * record a human sentence with hc_err_set(); the caller that finally reports
 * the error prints hc_err_msg(). The detail is thread-local, so threads do
 * not overwrite each other's messages.
 */
#ifndef HC_ERR_H
#define HC_ERR_H

enum hc_err {
    HC_OK = 0,
    HC_ERR_NOMEM,       /* out of memory */
    HC_ERR_INVAL,       /* bad argument or flag */
    HC_ERR_CONFIG,      /* bad cluster file / TF_CONFIG / model file */
    HC_ERR_IO,          /* file or system call failed */
    HC_ERR_PROTO,       /* malformed message */
    HC_ERR_VERSION,     /* protocol or store version mismatch */
    HC_ERR_CLUSTER,     /* message from another cluster (cluster id differs) */
    HC_ERR_LIMIT,       /* a size, count or length exceeds its limit */
    HC_ERR_CRC,         /* tensor checksum mismatch */
    HC_ERR_TIMEOUT,     /* no answer in time */
    HC_ERR_UNREACHABLE, /* peer could not be reached after retries */
    HC_ERR_CLOSED,      /* object closed or shutting down */
    HC_ERR_TRANSPORT,   /* other transport (nng) failure */
    HC_ERR_STORE,       /* LMDB failure */
    HC_ERR_MAPFULL,     /* LMDB map full */
    HC_ERR_NOTFOUND,    /* no such variable, key or file */
    HC_ERR_EXISTS,      /* already exists with different content */
    HC_ERR_MISMATCH,    /* shapes, layouts or signatures disagree */
    HC_ERR_DATA,        /* bad data set */
    HC_ERR_REMOTE,      /* the peer answered with an error */
    HC_ERR_STALE,       /* request older than allowed */
    HC_ERR_DEVICE,      /* compute device failure */
    HC_ERR_UNSUPPORTED, /* feature not available in this build */
    HC_ERR__COUNT
};

/* Short, fixed description of a code ("malformed message"). Never NULL. */
const char *hc_strerror(int code);

/*
 * Record a detailed message for the current thread and return `code`, so a
 * caller can write `return hc_err_set(HC_ERR_CONFIG, "…%s…", key);`.
 * The message is truncated to 1 KiB. An argument may be hc_err_msg(), to
 * wrap the detail recorded before: hc_err_set(rv, "%s; do X", hc_err_msg()).
 */
int hc_err_set(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The detail recorded last on this thread, or hc_strerror(code) of the last
 * code when none was recorded. Valid until the next hc_err_set on this
 * thread. */
const char *hc_err_msg(void);

/* Forget the current thread's detail. */
void hc_err_clear(void);

#endif

/*
 * optim_conf.h — the optimizer's settings, typed once: Keras's defaults,
 * the one validation (one set of limits, used by the model reader on the
 * worker and by the shards), and their two encodings — the wire's
 * OptimizerSettings message (CreateVariables.optimizer) and the fixed
 * little-endian record a store keeps in its meta. The settings are the one
 * thing about a model the servers need, so ps/ does not depend on the
 * model file's layers.
 *
 * Thread safety: every function is reentrant.
 */
#ifndef HC_OPTIM_CONF_H
#define HC_OPTIM_CONF_H

#include <stddef.h>

enum hc_optim { HC_OPT_SGD, HC_OPT_MOMENTUM, HC_OPT_ADAM };

/* Optimizer settings, as Keras names them; applied by the parameter
 * server. Fields the type does not use are 0. */
struct hc_optim_conf {
    enum hc_optim type;
    float lr;               /* learning_rate */
    float momentum;         /* SGD momentum (HC_OPT_MOMENTUM) */
    int nesterov;           /* HC_OPT_MOMENTUM */
    float beta1, beta2, eps; /* Adam */
};

/*
 * The limits, the same everywhere (hc_optim_validate):
 *   learning_rate  (0, 10]
 *   momentum       (0, 1) for HC_OPT_MOMENTUM (0 is plain SGD)
 *   beta_1, beta_2 [0, 1)
 *   epsilon        (0, 1]
 */
#define HC_OPTIM_LR_MAX 10.0f

/* Keras's defaults for `type`: SGD learning_rate 0.01; Adam 0.001, beta_1
 * 0.9, beta_2 0.999, epsilon 1e-7; momentum 0 (a momentum type needs a
 * value). Every other field 0. */
void hc_optim_defaults(enum hc_optim type, struct hc_optim_conf *c);

/* "sgd", "momentum" or "adam"; "?" for a value out of range. */
const char *hc_optim_name(enum hc_optim type);

/*
 * Check the settings against the limits above, and that nesterov is 0 or
 * 1. `source` names the settings in the message ("model m.json:
 * optimizer", "create from worker:0"). Returns HC_OK or HC_ERR_CONFIG
 * with a message naming the source, the setting, its value and its range.
 */
int hc_optim_validate(const struct hc_optim_conf *c, const char *source);

/* 1 when a and b describe the same optimizer (fields that the type does
 * not use are ignored), else 0. */
int hc_optim_equal(const struct hc_optim_conf *a,
                   const struct hc_optim_conf *b);

/* The settings for a message, Keras's names, e.g. "adam (learning_rate
 * 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-07)", into buf (cap bytes;
 * 160 always suffice). Returns buf. */
const char *hc_optim_describe(const struct hc_optim_conf *c, char *buf,
                              size_t cap);

/* ---- the wire: hetps.proto's OptimizerSettings -------------------------- */

struct Hetps__OptimizerSettings;

/* Fill *m (initialised by the caller) from c: the type's own settings. */
void hc_optim_to_wire(const struct hc_optim_conf *c,
                      struct Hetps__OptimizerSettings *m);

/* Read *m into *out: a known type, the type's own settings present (others
 * ignored), then hc_optim_validate. Returns HC_OK, or HC_ERR_CONFIG naming
 * `source` and the setting; *out is unchanged on error. */
int hc_optim_from_wire(const struct Hetps__OptimizerSettings *m,
                       const char *source, struct hc_optim_conf *out);

/* ---- the store: a fixed record in meta ---------------------------------- */

/*
 * HC_OPTIM_RECORD_SIZE bytes, little-endian:
 *   0  "HOPT"         magic
 *   4  u16 version    HC_OPTIM_RECORD_VERSION
 *   6  u8  type       enum hc_optim
 *   7  u8  flags      bit 0: nesterov
 *   8  f32 learning_rate, 12 f32 momentum, 16 f32 beta_1, 20 f32 beta_2,
 *   24 f32 epsilon
 *   28 u32 CRC32C of bytes 0..27
 */
#define HC_OPTIM_RECORD_SIZE 32
#define HC_OPTIM_RECORD_VERSION 1

/* Encode c (which must pass hc_optim_validate) into rec. */
void hc_optim_to_record(const struct hc_optim_conf *c,
                        unsigned char rec[HC_OPTIM_RECORD_SIZE]);

/* Decode `len` bytes into *out: size, magic, version, CRC, then
 * hc_optim_validate. Returns HC_OK, HC_ERR_VERSION (another record
 * version: the message says so), or HC_ERR_STORE (damaged: wrong size,
 * magic, CRC or a value out of range), each naming `source`. */
int hc_optim_from_record(const void *rec, size_t len, const char *source,
                         struct hc_optim_conf *out);

#endif

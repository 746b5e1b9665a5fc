/*
 * optim_conf.h — the optimizer's settings, typed once: Keras's names and
 * defaults, the one validation (one set of limits, used by the model reader
 * on the worker and by the shards), and their two encodings — the wire's
 * OptimizerSettings message (CreateVariables.optimizer) and the fixed
 * little-endian record a store keeps in its meta. The settings are the one
 * thing about a model the servers need, so ps/ does not depend on the
 * model file's layers.
 *
 * Each type reads only its own settings (Keras's constructor arguments of
 * that class); hc_optim_defaults sets the others to 0 and every function
 * here ignores them. weight_decay and exclude_from_weight_decay belong to
 * every type, as in Keras's base optimizer (AdamW only changes the
 * default).
 *
 * Thread safety: every function is reentrant.
 */
#ifndef HC_OPTIM_CONF_H
#define HC_OPTIM_CONF_H

#include <stddef.h>
#include <stdint.h>

#include "hetps.pb-c.h"

/* The numbers are the store record's and the wire's: never renumber. */
enum hc_optim {
    HC_OPT_SGD,         /* SGD, momentum 0 */
    HC_OPT_MOMENTUM,    /* SGD, momentum > 0, nesterov or not */
    HC_OPT_ADAM,
    HC_OPT_RMSPROP,
    HC_OPT_ADAGRAD,
    HC_OPT_ADAMW,
    HC_OPT_NADAM,
    HC_OPT_ADAMAX,
    HC_OPT_FTRL,
};
#define HC_OPT_COUNT 9

/* exclude_from_weight_decay: at most this many bytes of names, each name
 * followed by '\0' (so a list of names ends in an empty one). */
#define HC_OPTIM_EXCLUDE_BYTES 128

/* learning_rate as a schedule (keras.optimizers.schedules), evaluated at
 * the optimizer's iteration count: the numbers are the record's and the
 * wire's. */
enum hc_lr_kind {
    HC_LR_CONSTANT,         /* learning_rate is a number */
    HC_LR_EXPONENTIAL,      /* ExponentialDecay */
    HC_LR_INVERSE_TIME,     /* InverseTimeDecay */
    HC_LR_POLYNOMIAL,       /* PolynomialDecay */
    HC_LR_COSINE,           /* CosineDecay, with or without warm-up */
    HC_LR_PIECEWISE,        /* PiecewiseConstantDecay */
};
#define HC_LR_KINDS 6
#define HC_LR_MAX_VALUES 16     /* PiecewiseConstantDecay's values */

/* A schedule's settings, Keras's names; initial_learning_rate is the
 * conf's lr (PiecewiseConstantDecay: lr is values[0]). Fields the kind
 * does not use are 0. */
struct hc_lr_schedule {
    enum hc_lr_kind kind;
    float decay_steps;      /* exponential, inverse time, polynomial, cosine */
    float decay_rate;       /* exponential, inverse time */
    int staircase;          /* exponential, inverse time */
    float end_lr;           /* polynomial end_learning_rate */
    float power;            /* polynomial */
    int cycle;              /* polynomial */
    float alpha;            /* cosine */
    int warmup;             /* cosine: 1 when warmup_target is set */
    float warmup_target;    /* cosine */
    float warmup_steps;     /* cosine */
    uint32_t n_values;      /* piecewise: values, boundaries one fewer */
    uint32_t boundaries[HC_LR_MAX_VALUES - 1];
    float values[HC_LR_MAX_VALUES];
};

/* Optimizer settings, as Keras names them; applied by the parameter
 * server. Fields the type does not use are 0. */
struct hc_optim_conf {
    enum hc_optim type;
    float lr;               /* learning_rate, every type */
    float momentum;         /* momentum, rmsprop */
    int nesterov;           /* momentum */
    float beta1, beta2;     /* adam, adamw, nadam, adamax: beta_1, beta_2 */
    float eps;              /* epsilon: adam family, rmsprop, adagrad */
    int amsgrad;            /* adam, adamw */
    float rho;              /* rmsprop */
    int centered;           /* rmsprop */
    float init_accum;       /* initial_accumulator_value: adagrad, ftrl */
    float lr_power;         /* ftrl learning_rate_power */
    float l1, l2;           /* ftrl l1_, l2_regularization_strength */
    float l2_shrinkage;     /* ftrl l2_shrinkage_regularization_strength */
    float beta;             /* ftrl beta */
    float weight_decay;     /* every type; 0: none */
    float clipvalue;        /* every type; 0: none. Each gradient element
                               clipped to [-clipvalue, clipvalue] */
    float clipnorm;         /* every type; 0: none. Each variable's gradient
                               scaled to this L2 norm at most (worker) */
    float global_clipnorm;  /* every type; 0: none. The whole gradient
                               scaled to this L2 norm at most (worker) */
    /* Variables whose last name component (Keras 3's variable.name,
     * "bias" of "dense/bias") contains one of these words get no weight
     * decay: Keras's exclude_from_weight_decay(var_names=…). Each word
     * '\0'-terminated, an empty word ends the list. */
    char wd_exclude[HC_OPTIM_EXCLUDE_BYTES];
    struct hc_lr_schedule sched;    /* kind HC_LR_CONSTANT: lr throughout */
};

/*
 * The limits, the same everywhere (hc_optim_validate):
 *   learning_rate        (0, 10]
 *   momentum             (0, 1) momentum (0 is plain sgd); [0, 1) rmsprop
 *   beta_1, beta_2, rho  [0, 1)
 *   epsilon              (0, 1]
 *   initial_accumulator_value, l1_, l2_, l2_shrinkage_regularization_strength,
 *   beta                 [0, 1e6]
 *   learning_rate_power  [-10, 0]
 *   ftrl                 initial_accumulator_value > 0 unless
 *                        learning_rate_power is 0 or l2_regularization_
 *                        strength or beta is > 0 (else Keras's update
 *                        is 0/0 = NaN where a gradient is exactly 0)
 *   weight_decay         [0, 1]
 *   clipvalue, clipnorm, global_clipnorm  [0, 1e6] (0: none), at most one
 *                        of them set (as Keras)
 *   nesterov, amsgrad, centered  0 or 1
 *   exclude_from_weight_decay  words of letters, digits and '_', at most
 *                        HC_OPTIM_EXCLUDE_BYTES bytes with their ends
 * and a schedule's:
 *   decay_steps, warmup_steps  (0, 1e12] ([0, 1e12] warmup_steps)
 *   decay_rate           [0, 1e6]
 *   initial_learning_rate, end_learning_rate, warmup_target, values
 *                        [0, 10]
 *   power                [0, 1000]
 *   alpha                [0, 1]
 *   boundaries           increasing, one fewer than values (2..16 values)
 */
#define HC_OPTIM_LR_MAX 10.0f

/* Keras's defaults for `type` (its constructor's): learning_rate 0.001
 * (sgd, momentum 0.01); beta_1 0.9, beta_2 0.999, epsilon 1e-7 for the
 * adam family; rmsprop rho 0.9, momentum 0, epsilon 1e-7; adagrad
 * initial_accumulator_value 0.1, epsilon 1e-7; ftrl learning_rate_power
 * -0.5, initial_accumulator_value 0.1; adamw weight_decay 0.004; momentum
 * 0 (a momentum type needs a value). Every other field 0. */
void hc_optim_defaults(enum hc_optim type, struct hc_optim_conf *c);

/* "sgd", "momentum", "adam", "rmsprop", "adagrad", "adamw", "nadam",
 * "adamax" or "ftrl"; "?" for a value out of range. */
const char *hc_optim_name(enum hc_optim type);

/* The type named `name` as hc_optim_name writes it, case and '_' ignored
 * ("RMSprop", "AdamW"); "momentum" is not a name Keras has and is not
 * taken here. Returns HC_OK or HC_ERR_NOTFOUND. */
int hc_optim_by_name(const char *name, enum hc_optim *type);

/* The Keras names the model files take, for messages: "sgd, adam, …". */
const char *hc_optim_names(void);

/* ---- schedules --------------------------------------------------------- */

/* Keras's class of a schedule kind ("ExponentialDecay", …; "constant"). */
const char *hc_lr_kind_name(enum hc_lr_kind kind);

/* The kind whose Keras class is `name`. HC_OK or HC_ERR_NOTFOUND. */
int hc_lr_by_name(const char *name, enum hc_lr_kind *kind);

/* Which kind of setting a schedule config's `key` is for `kind`:
 * HC_OPTIM_KEY_FLOAT ("initial_learning_rate" and the numbers),
 * HC_OPTIM_KEY_BOOL, HC_OPTIM_KEY_WORDS ("boundaries", "values": lists of
 * numbers), HC_OPTIM_KEY_NONE. "name" is not a setting. */
int hc_lr_key(enum hc_lr_kind kind, const char *key);

/* The config keys `kind` takes into keys[] (cap entries, 12 suffice),
 * NULL-terminated. */
void hc_lr_keys(enum hc_lr_kind kind, const char **keys, size_t cap);

/* Set the number or true/false `key` of c's schedule to x; the key
 * "initial_learning_rate" sets c->lr. No check. */
void hc_lr_set(struct hc_optim_conf *c, const char *key, double x);

/* The learning rate of the update after `step` updates: lr, or the
 * schedule at `step` (keras.optimizers.schedules, float32 as Keras). The
 * shards apply it (ps/optimizer.h); the chief reports it. */
float hc_optim_lr(const struct hc_optim_conf *c, uint64_t step);

/* k·x + a as Keras computes a Python-float expression of a setting x (1 −
 * β: k = −1, a = 1): the setting is a Python float, a double holding the
 * decimal the user wrote, and the expression is taken in double and
 * rounded to float32 when it meets a float32 tensor. The conf holds x as a
 * float, so the decimal is recovered as the shortest text that reads back
 * as x: for β = 0.999, 1 − β gives 0.001f, where 1.0f − 0.999f would be
 * 0.000999987f (1.3e-5 off). Cached per thread. */
float hc_optim_keras_const(float x, double k, double a);

/* ---- the model files' keys (common/model.c) ------------------------------ */

enum hc_optim_key { HC_OPTIM_KEY_NONE, HC_OPTIM_KEY_FLOAT, HC_OPTIM_KEY_BOOL,
                    HC_OPTIM_KEY_WORDS };

/* Which kind of setting Keras's `key` is for `type`: a number, true/false,
 * a list of words (exclude_from_weight_decay), or HC_OPTIM_KEY_NONE when
 * the type does not take it. */
enum hc_optim_key hc_optim_key(enum hc_optim type, const char *key);

/* The keys `type` takes, learning_rate first, into keys[] (cap entries,
 * 16 always suffice), NULL-terminated. */
void hc_optim_keys(enum hc_optim type, const char **keys, size_t cap);

/* Set the number or true/false setting `key` of c (hc_optim_key says it
 * is one of c->type's) to x. No check: hc_optim_validate does. */
void hc_optim_set(struct hc_optim_conf *c, const char *key, double x);

/* The number or true/false (1, 0) setting `key` of c; 0 for a key c's
 * type does not take. */
double hc_optim_get(const struct hc_optim_conf *c, const char *key);

/* Keras's class for c's type: "SGD" (sgd and momentum), "RMSprop",
 * "Adagrad", "Adam", "AdamW", "Nadam", "Adamax", "Ftrl". */
const char *hc_optim_keras_class(enum hc_optim type);

/* Append `word` to c->wd_exclude. Returns HC_OK, or HC_ERR_CONFIG naming
 * `source` when the words would take more than HC_OPTIM_EXCLUDE_BYTES. */
int hc_optim_exclude_add(struct hc_optim_conf *c, const char *word,
                         const char *source);

/*
 * Check the settings against the limits above. `source` names the
 * settings in the message ("model m.json: optimizer", "create from
 * worker:0"). Returns HC_OK or HC_ERR_CONFIG with a message naming the
 * source, the setting, its value and its range.
 */
int hc_optim_validate(const struct hc_optim_conf *c, const char *source);

/* 1 when a and b describe the same optimizer (fields that the type does
 * not use are ignored), else 0. */
int hc_optim_equal(const struct hc_optim_conf *a,
                   const struct hc_optim_conf *b);

/* The settings for a message, Keras's names, e.g. "adam (learning_rate
 * 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-07, amsgrad false)", into
 * buf (cap bytes; HC_OPTIM_DESCRIBE_MAX always suffice). Returns buf. */
#define HC_OPTIM_DESCRIBE_MAX 512
const char *hc_optim_describe(const struct hc_optim_conf *c, char *buf,
                              size_t cap);

/* 1 when a variable named `var` (hetps's path, "dense/bias") gets weight
 * decay under c: weight_decay > 0 and no word of wd_exclude in the last
 * component of `var`. */
int hc_optim_decays(const struct hc_optim_conf *c, const char *var);

/* ---- the wire: hetps.proto's OptimizerSettings -------------------------- */

/* The words of c->wd_exclude as the wire's repeated string: at most this
 * many. */
#define HC_OPTIM_EXCLUDE_MAX 32

/* The message hc_optim_to_wire fills, with what it points to besides the
 * conf (the schedule's message, the words' pointers). */
struct hc_optim_wire {
    Hetps__OptimizerSettings m;
    Hetps__LearningRateSchedule sched;
    char *words[HC_OPTIM_EXCLUDE_MAX];
};

/* Fill w->m from c: the type's own settings, the schedule when not
 * constant. w->m points into w and into c, which must outlive it. */
void hc_optim_to_wire(const struct hc_optim_conf *c, struct hc_optim_wire *w);

/* Read *m into *out: a known type, the type's own settings present (others
 * ignored; weight_decay and its exclusions may be absent: 0, none), then
 * hc_optim_validate. Returns HC_OK, or HC_ERR_CONFIG naming `source` and
 * the setting; *out is unchanged on error. */
int hc_optim_from_wire(const struct Hetps__OptimizerSettings *m,
                       const char *source, struct hc_optim_conf *out);

/* ---- the store: a fixed record in meta ---------------------------------- */

/*
 * Version 2, HC_OPTIM_RECORD_SIZE bytes, little-endian (what this hetps
 * writes):
 *   0  "HOPT"         magic
 *   4  u16 version    2
 *   6  u8  type       enum hc_optim
 *   7  u8  flags      bit 0 nesterov, bit 1 amsgrad, bit 2 centered
 *   8  f32 learning_rate, 12 momentum, 16 beta_1, 20 beta_2, 24 epsilon,
 *   28 rho, 32 initial_accumulator_value, 36 learning_rate_power,
 *   40 l1_regularization_strength, 44 l2_regularization_strength,
 *   48 l2_shrinkage_regularization_strength, 52 beta, 56 weight_decay
 *   60 clipvalue
 *   64 exclude_from_weight_decay: HC_OPTIM_EXCLUDE_BYTES bytes, as in
 *      hc_optim_conf, zero-padded
 *   192 the schedule: u8 kind (enum hc_lr_kind), u8 flags (bit 0
 *      staircase, bit 1 cycle, bit 2 warm-up), u8 n_values, u8 0;
 *      196 f32 decay_steps, 200 decay_rate, 204 end_learning_rate,
 *      208 power, 212 alpha, 216 warmup_target, 220 warmup_steps;
 *      224 u32 boundaries[15], 284 f32 values[16]
 *   348 f32 clipnorm, 352 global_clipnorm
 *   356 u32 CRC32C of bytes 0..355
 * Fields the type does not use are 0.
 *
 * Version 1 (32 bytes, hetps before RMSprop and the others; read, never
 * written): "HOPT", u16 1, u8 type (sgd, momentum, adam), u8 flags (bit 0
 * nesterov), f32 learning_rate, momentum, beta_1, beta_2, epsilon at 8..27,
 * u32 CRC32C of bytes 0..27.
 */
#define HC_OPTIM_RECORD_SIZE 360
#define HC_OPTIM_RECORD_VERSION 2
#define HC_OPTIM_RECORD_V1_SIZE 32

/* Encode c (which must pass hc_optim_validate) into rec, version 2. */
void hc_optim_to_record(const struct hc_optim_conf *c,
                        unsigned char rec[HC_OPTIM_RECORD_SIZE]);

/* Decode `len` bytes, a version 2 or version 1 record, into *out: size,
 * magic, version, CRC, then hc_optim_validate. Returns HC_OK,
 * HC_ERR_VERSION (a record version this hetps does not read: the message
 * says so), or HC_ERR_STORE (damaged: wrong size, magic, CRC or a value
 * out of range), each naming `source`. */
int hc_optim_from_record(const void *rec, size_t len, const char *source,
                         struct hc_optim_conf *out);

#endif

/*
 * data.h — training data: IDX files (as Fashion-MNIST and MNIST ship them)
 * loaded into memory, and each worker's shard of them in per-epoch shuffled
 * batches.
 *
 * Files may be gzip-compressed or plain (zlib reads both). Images are IDX
 * magic 0x00000803 with dimensions (N, rows, cols) of unsigned bytes;
 * labels are 0x00000801 with dimension (N). Pixels become floats in [0, 1]
 * (value / 255), laid out (N, H, W, 1) like Keras's NHWC input.
 *
 * Sharding is strided, like tf.data.Dataset.shard: shard k of K holds the
 * samples i with i % K == k, so shards are disjoint, together cover every
 * sample exactly once, and differ in size by at most one. Each epoch the
 * shard's samples are shuffled by Fisher–Yates driven by splitmix64 started
 * from mix64(seed ^ mix64(epoch · 0x9E3779B97F4A7C15 ^ mix64(shard + 1)))
 * (mix64: splitmix64's output function), with unbiased bounded draws; the
 * order of an epoch thus depends only on (seed, epoch, shard), never on
 * which epochs were visited before.
 *
 * Batches follow Keras: ceil(n / B) per epoch, the last one partial when B
 * does not divide the shard's n.
 *
 * A data set may instead be streamed (src.read set, x and y NULL): its
 * samples are read from a file when asked for, so memory is a batch's,
 * whatever the file's size (a click-through file, ctr_inputs.h). A
 * streamed set is split by position instead (wk_shard_init_for): worker
 * k holds a run of positions of each epoch's order, which the source
 * shuffles itself (src.read_epoch: a window of blocks at a time, as
 * data_ctr.h says) or, without read_epoch, file order.
 *
 * Threads: a wk_dataset is read-only once loaded and may be shared — a
 * streamed one holds a file position and is used by one thread at a time;
 * a wk_shard is used by one thread at a time.
 */
#ifndef WK_DATA_H
#define WK_DATA_H

#include <stddef.h>
#include <stdint.h>

#define WK_DATA_DEFAULT_DIR "/usr/share/datasets/fashion-mnist/"
#define WK_DATA_PATH_MAX 512

#define WK_DATA_MAX_INPUTS 8

/* One named array of a data set for a model of several inputs
 * (wk_data_load_inputs). */
struct wk_data_input {
    char name[64];          /* the model's input it feeds */
    char path[WK_DATA_PATH_MAX];
    int h, w, c;            /* a sample's shape, as wk_dataset's */
    size_t off;             /* where it starts in a sample's row of x */
};

/* Where a streamed data set's samples come from. read fills samples
 * [start, start + count) in file order (count ≥ 1, start + count ≤ n):
 * x_out (count, sample's floats) and, unless NULL, y_out (count); it
 * returns HC_OK or an error code with its message (a malformed line: the
 * file and line named). read_epoch, when not NULL, fills positions
 * [start, start + count) of epoch's training order instead (the source's
 * own shuffle, data_ctr.h's for a click-through file); training reads
 * through it, evaluation through read. close frees ctx. */
struct wk_data_source {
    int (*read)(void *ctx, long long start, int count, float *x_out,
                int32_t *y_out);
    int (*read_epoch)(void *ctx, int epoch, long long start, int count,
                      float *x_out, int32_t *y_out);
    void (*close)(void *ctx);
    void *ctx;
};

struct wk_dataset {
    long long n;            /* samples (a streamed set may hold more
                               than 2^31 − 1; loaded ones fewer) */
    int h, w, c;            /* image rows, cols, channels (1); several
                               inputs: 1, 1 and the row's length */
    float *x;               /* (n, h, w, c) pixels scaled to [0, 1];
                               several inputs: (n, row), each row a
                               sample's arrays one after another */
    int32_t *y;             /* (n) labels; NULL when loaded without them
                               (wk_data_load_images) */
    int n_classes;          /* 1 + the largest label present (0: no labels) */
    char images_path[WK_DATA_PATH_MAX];
    char labels_path[WK_DATA_PATH_MAX];    /* "" without labels */
    int n_inputs;           /* 0: one array; else the named arrays packed
                               in x, in the model's input order */
    struct wk_data_input inputs[WK_DATA_MAX_INPUTS];
    void *map;              /* x lies in this mapping (data_npy.c), not in
                               malloc'd memory; NULL: x is malloc'd */
    size_t map_len;
    struct wk_data_source src;  /* read set: streamed, x and y NULL */
};

/*
 * Load an images file and its labels file. On success fills *out (free with
 * wk_data_free) and returns HC_OK. Returns HC_ERR_NOTFOUND when a file is
 * missing, HC_ERR_IO when it cannot be read, HC_ERR_DATA when a file is not
 * what it should be (wrong magic — also images and labels swapped —,
 * dimensions, truncated, trailing bytes, counts disagreeing, empty), with a
 * message naming the file; *out is then zeroed.
 */
int wk_data_load(const char *images_path, const char *labels_path,
                 struct wk_dataset *out);

/*
 * Load an images file alone (prediction: no labels needed): y is NULL,
 * labels_path "", n_classes 0. Same checks and errors as wk_data_load for
 * the images file (a labels file given instead is named as one).
 */
int wk_data_load_images(const char *images_path, struct wk_dataset *out);

/*
 * Load the Fashion-MNIST (or MNIST) set `which` ("train" or "t10k"; "test"
 * means "t10k") from dir (NULL: WK_DATA_DEFAULT_DIR): the files
 * WHICH-images-idx3-ubyte.gz and WHICH-labels-idx1-ubyte.gz, or the same
 * names without ".gz".
 */
int wk_data_load_dir(const char *dir, const char *which,
                     struct wk_dataset *out);

/*
 * The files wk_data_load_dir would load: the images file's path into
 * images and, unless labels is NULL, the labels file's into labels (each
 * WK_DATA_PATH_MAX bytes). HC_ERR_INVAL for a bad `which`, HC_ERR_NOTFOUND
 * (naming the directory and the file) when a file is missing.
 */
int wk_data_dir_paths(const char *dir, const char *which, char *images,
                      char *labels);

/* HC_ERR_DATA (naming the labels file, the sample and the label) when a
 * label is ≥ n_classes, e.g. the model's output width. HC_OK without
 * labels. */
int wk_data_check_classes(const struct wk_dataset *d, int n_classes);

/* Copy samples [start, start + count) in file order (evaluation); count is
 * cut at the end of the set. Returns the number copied, 0 past the end,
 * or minus the error code when a streamed set's read failed (its message
 * set: a malformed line's file and line). y_out may be
 * NULL, and is not written for a set without labels. */
int wk_data_batch(const struct wk_dataset *d, long long start, int count,
                  float *x_out /* (count, h, w, c) */,
                  int32_t *y_out /* (count) */);

void wk_data_free(struct wk_dataset *d);

/*
 * NumPy arrays as Keras users hand them to fit(x, y) (data_npy.c):
 *
 *   wk_data_load_npy(X.npy, Y.npy)  images (N, H, W), (N, H, W, C) or
 *        (N, D), float32 (taken as they are, memory-mapped) or uint8
 *        (scaled by 1/255); labels (N,) of any integer type, >= 0.
 *   wk_data_load_npz(F.npz, "train"|"test")  the arrays x_train, y_train
 *        or x_test, y_test of an .npz (np.savez's stored entries are
 *        memory-mapped; np.savez_compressed's deflated ones inflated).
 *
 * C order only. Errors are HC_ERR_DATA naming the file (or the .npz's
 * entry) and what is wrong: not an .npy, dtype, Fortran order, shape,
 * counts that differ, a negative label, a truncated file;
 * HC_ERR_NOTFOUND / HC_ERR_IO for a file that is missing or unreadable.
 * Y may be NULL (wk_data_load_npy only: images alone, for predict).
 */
int wk_data_load_npy(const char *x_path, const char *y_path,
                     struct wk_dataset *out);
int wk_data_load_npz(const char *path, const char *which,
                     struct wk_dataset *out);

/*
 * The training ("train") or test ("t10k") set named by `data` — "X.npy,Y.npy"
 * (train; test: `test` given as "XT.npy,YT.npy", else HC_ERR_NOTFOUND) or
 * "F.npz" — or, with data NULL, wk_data_load_dir(dir, which).
 */
int wk_data_load_any(const char *data, const char *test, const char *dir,
                     const char *which, struct wk_dataset *out);

/*
 * Several inputs, as Keras's fit({"image": X1, "meta": X2}, y): spec is
 * "NAME=X.npy,NAME=X.npy,…[,Y.npy]", one .npy per input named by the
 * model's input names (any order; each array as wk_data_load_npy takes
 * images: (N, D), (N, H, W) or (N, H, W, C), float32 or uint8) and the
 * labels last, with no name. names (n_names, 1 to WK_DATA_MAX_INPUTS)
 * are the model's inputs in its order: x packs each sample's arrays one
 * after another in that order (the row a wk_net takes, nn.h), so
 * batches, shards and slices move a sample's inputs together. labels:
 * 1 the labels file is required, 0 it may be left out (predict).
 * flag ("--data") names spec in messages. Errors, HC_ERR_DATA or
 * HC_ERR_INVAL naming the input and file: an input of the model with no
 * array, a name that is not one of its inputs or given twice, arrays
 * whose sample counts differ, a missing labels file; and those of
 * wk_data_load_npy. A data reader of several inputs (a CTR set's dense
 * and sparse features) fills the same fields: n_inputs, inputs[] (off
 * ascending in names' order), x packed, h = w = 1 and c the row.
 */
int wk_data_load_inputs(const char *spec, const char *const *names,
                        int n_names, int labels, const char *flag,
                        struct wk_dataset *out);

/*
 * wk_data_load_any for a model of several inputs: `data` (train) or
 * `test` (the test set, which = "t10k") in wk_data_load_inputs's spec;
 * NULL fails naming the inputs and the syntax (there is no default
 * data set of several inputs).
 */
int wk_data_load_any_inputs(const char *data, const char *test,
                            const char *which, const char *const *names,
                            int n_names, struct wk_dataset *out);

/* One worker's share of a data set of n_total samples: strided and
 * shuffled (wk_shard_init), or a run of the file read in order
 * (wk_shard_init_parts). */
struct wk_shard {
    long long n_total;      /* samples in the whole set */
    int n_shards, index;    /* this is shard index of n_shards */
    uint64_t seed;
    long long n;            /* samples in this shard */
    int32_t *order;         /* (n) sample indices in the current epoch order;
                               NULL: the part [first, first + n) in order */
    int epoch;              /* epoch `order` is shuffled for; -1 none yet */
    long long first;        /* parts: the part's first sample */
    int file_order;         /* set by the caller after init: no shuffle,
                               the strided order every epoch (the model's
                               "shuffle": false) */
};

/* HC_ERR_INVAL with a message when n_total < 1, n_shards < 1, index out of
 * [0, n_shards) or the shard would be empty (n_shards > n_total);
 * HC_ERR_LIMIT when n_total > INT32_MAX (the order holds int32 indices:
 * a set loaded whole is smaller). */
int wk_shard_init(struct wk_shard *s, long long n_total, int n_shards,
                  int shard_index, uint64_t seed);

/*
 * Split by position (a streamed set's split): shard k of K holds the
 * positions [floor(k · N / K), floor((k + 1) · N / K)) of each epoch's
 * order (the source's read_epoch; without it file order) — disjoint,
 * covering every sample once, sizes differing by at most one, batch b of
 * epoch e always the same samples. The errors of wk_shard_init.
 */
int wk_shard_init_parts(struct wk_shard *s, long long n_total, int n_shards,
                        int shard_index);

/* d's split: wk_shard_init_parts for a streamed set (d->src.read), else
 * wk_shard_init. */
int wk_shard_init_for(struct wk_shard *s, const struct wk_dataset *d,
                      int n_shards, int shard_index, uint64_t seed);

/* Batches of batch_size in one epoch: ceil(n / batch_size); 0 when
 * batch_size < 1. A streamed shard may hold more than 2^31 − 1. */
long long wk_shard_n_batches(const struct wk_shard *s, int batch_size);

/*
 * The shards record a worker's place in an epoch as a count of batches
 * done in 32 bits (async and ssp: a restarted worker resumes there), so a
 * part of more than WK_SHARD_PLACE_MAX batches is refused: HC_ERR_LIMIT
 * naming `what` (the file), the part's samples, batch_size, the count and
 * the least batch size that fits. Only a streamed file of more than
 * 2^32 − 1 lines a worker at a tiny batch size gets there. HC_OK else.
 */
#define WK_SHARD_PLACE_MAX 4294967295LL     /* UINT32_MAX */

int wk_shard_check_place(const struct wk_shard *s, int batch_size,
                         const char *what);

/*
 * Fill x_out and y_out with batch batch_index of epoch (≥ 0) of a data set
 * with labels, shuffling the shard's order first when the epoch changed
 * (O(n), no allocation); *n_out is the number of samples filled:
 * batch_size, fewer for the last batch, 0 past the end of the epoch.
 * Returns HC_OK, or HC_ERR_INVAL (with a message, *n_out 0) when the
 * arguments do not fit: batch_size < 1, epoch or batch_index < 0, or a data
 * set whose size is not the shard's n_total; a streamed set's read error
 * (*n_out 0).
 */
int wk_shard_batch(struct wk_shard *s, int epoch, long long batch_index,
                   int batch_size, const struct wk_dataset *d,
                   float *x_out /* (batch_size, h, w, c) */,
                   int32_t *y_out /* (batch_size) */, int *n_out);

/* wk_shard_batch for any run of the epoch's order: up to `count` samples
 * from position `start` (synchronous training takes a worker's slice of
 * each global batch this way). Same returns as wk_shard_batch. */
int wk_shard_slice(struct wk_shard *s, int epoch, long long start, int count,
                   const struct wk_dataset *d, float *x_out /* (count, h, w, c) */,
                   int32_t *y_out /* (count) */, int *n_out);

void wk_shard_free(struct wk_shard *s);

#endif

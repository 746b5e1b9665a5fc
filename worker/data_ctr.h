/*
 * data_ctr.h — click-through data streamed from text files: the Criteo TSV
 * format and the libsvm format, read a batch at a time (never loaded
 * whole), split across workers by position, each batch addressable by
 * (epoch, batch index) so a restarted worker resumes at its place.
 *
 * Criteo TSV: one sample a line, 40 tab-separated fields: the label (0 or
 * 1), 13 integer fields, 26 categorical fields of 8 hex digits (either
 * case); any integer or categorical field may be empty. A batch holds
 *   label (B)       0.0 or 1.0;
 *   num   (B, 13)   log(1 + x) of each integer x ≥ 0; a negative x (the
 *                   Criteo set has −1 and −2 in its second field) counts as
 *                   0, as DLRM's preprocessing clips it; empty is 0;
 *   cat   (B, 26)   one row id per categorical field (below).
 *
 * Row ids. A categorical field f (0…25) with hex value v (0…2^32−1) has the
 * key  key = f · 2^33 + v, and an empty field the key f · 2^33 + 2^32 (so
 * "empty" is a value of its own, per field). Then, with D = input_dim:
 *   D ≥ 26 · 2^33 (WK_CTR_EXACT_DIM):  id = key — collision-free, the field
 *                   in the high bits, every id < 26 · 2^33;
 *   otherwise:      id = mix64(key) mod D — mix64 is splitmix64's output
 *                   function (common/rng.h's hc_mix64): the field salts the
 *                   hash as Keras's Hashing(num_bins=D, salt=…) does with its
 *                   SipHash (Keras's own hash is FarmHash64 of the string;
 *                   ours hashes the parsed value so any language computes it
 *                   in a few lines: tests/bench/torch_ctr.py does), and
 *                   collisions are allowed.
 *
 * libsvm: `label id[:value] id[:value] …` separated by spaces or tabs. The
 * label is 0, 1, −1 or +1 (−1 read as 0); an id is a decimal integer with
 * 0 ≤ id < input_dim, taken as the row id as it is; a value defaults to 1.
 * A batch holds label (B), cat (B, W) the ids and num (B, W) their values,
 * W the width (wk_ctr_opts.width, or the most features on any line);
 * shorter lines are padded with id 0 and value 0 — LIBSVM numbers features
 * from 1, so id 0 is free to be masked (Keras's mask_zero).
 *
 * Every malformed line is refused with HC_ERR_DATA naming the file, the
 * line (from 1) and what is wrong: a wrong field count, a bad label, a bad
 * integer, a categorical field that is not 8 hex digits, a bad libsvm
 * token, an id negative or ≥ input_dim, too many libsvm features, a line
 * longer than WK_CTR_LINE_MAX.
 *
 * Position. Opening reads the file once (no parsing: newlines only, at the
 * speed of memchr; for libsvm without a width the tokens are counted too)
 * and keeps the byte offset of every WK_CTR_INDEX_EVERY-th line: 8 bytes a
 * thousand lines (350 KiB for Criteo's 45 M). A read of lines [a, b) seeks
 * to the indexed line at or before a, skips at most WK_CTR_INDEX_EVERY − 1
 * lines, and parses B lines; reading on from where the last read ended
 * skips nothing. Memory is the index, one line buffer and stdio's buffer,
 * and when shuffling one window and the block order (8 bytes a 1,024
 * lines), whatever the file's size.
 *
 * Index cache. With opts.index_path set, the index is also kept in that
 * file (magic "HPCTRIDX", version, the data file's size, mtime and inode,
 * the options, the offsets and their CRC-32C). Opening again loads it
 * instead of reading the data file — a restarted worker goes straight to
 * its batch — when everything matches; a cache that does not match (the
 * data file changed, another version, a torn or corrupt cache) is
 * rebuilt by the pass and rewritten (to a temporary name, then renamed).
 * It is only a cache: when it cannot be written, the reader works
 * without it.
 *
 * Order. With opts.shuffle the lines are read in a per-epoch order that
 * depends only on (opts.seed, epoch) and the file — never on the number
 * of workers, the batch size or what was read before — in two levels, as
 * tf.data's shuffle buffer is, but addressable by position:
 *   blocks   the file's nb = ceil(N / 1024) blocks of WK_CTR_INDEX_EVERY
 *            lines (the index's: a block is one seek; the last may be
 *            partial) are put in a random order by Fisher–Yates driven by
 *            splitmix64 from mix64(seed ^ mix64(epoch · γ ^ ~0));
 *   windows  that order is cut into windows of W consecutive blocks (the
 *            last may hold fewer, the partial block fewer lines), and the
 *            lines of each window w are shuffled among themselves by
 *            Fisher–Yates from mix64(seed ^ mix64(epoch · γ ^ mix64(w + 1)))
 *            (γ HC_GOLDEN_GAMMA, unbiased bounded draws; data.h's shuffle).
 * Position p of the epoch is in the window whose lines it counts into;
 * reading it parses that window's W blocks once (each a seek and 1,024
 * lines read in file order) and keeps them while reads stay in it.
 * W = WK_CTR_WINDOW (16) blocks, fewer when a window's parsed lines would
 * pass WK_CTR_WINDOW_BYTES (wide libsvm files): 16,384 lines, 4.1 MiB of
 * parsed Criteo lines — enough that a batch draws from 16 stretches of
 * 1,024 lines anywhere in the file (a file sorted by day or label is
 * mixed), small beside a worker's memory, and 16 sequential reads of
 * 1,024 lines a window. Without opts.shuffle (a model's "shuffle": false;
 * validation and evaluation always) position p is line p: file order.
 *
 * Split. Worker k of n holds the contiguous positions
 *   [floor(k · N / n), floor((k + 1) · N / n))       (N lines in the file)
 * of the epoch's order, so the workers' parts are disjoint, cover every
 * line once, differ in size by at most one, and put together are the one
 * order a single worker reads (sync N × B equals 1 × N·B). Batches follow
 * Keras: ceil(part / B) per epoch, the last one partial. Batch b of epoch
 * e is always the same lines: a worker that restarts at (epoch, batches
 * done) reads straight to them (at most one window parsed to get there).
 * Lines, positions, blocks, windows and batch indices are 64-bit (up to
 * WK_CTR_LINES_MAX lines), and so are ctr_inputs.h's data set and a
 * worker's shard of it (data.h).
 *
 * Threads: a wk_ctr holds a file position and a window; one thread at a
 * time. Open one
 * per thread to read in parallel.
 */
#ifndef WK_DATA_CTR_H
#define WK_DATA_CTR_H

#include <stdint.h>

#define WK_CTR_NUM 13                   /* Criteo's integer fields */
#define WK_CTR_CAT 26                   /* Criteo's categorical fields */
#define WK_CTR_EXACT_DIM (26ull << 33)  /* input_dim from which ids are keys */
#define WK_CTR_INDEX_EVERY 1024         /* lines between indexed offsets */
#define WK_CTR_LINE_MAX (1 << 20)       /* bytes a line, newline excluded */
#define WK_CTR_LINES_MAX (1ll << 62)    /* lines the order and the split
                                           count (positions are 64-bit) */
#define WK_CTR_LOG1P_SMALL 4096         /* integers whose log(1 + x) a
                                           reader keeps in a table */
#define WK_CTR_WIDTH_MAX 4096           /* libsvm features a line */
#define WK_CTR_WINDOW 16                /* blocks a shuffle window (W) */
#define WK_CTR_WINDOW_BYTES (16 << 20)  /* parsed lines a window, at most
                                           (W shrinks, never below 1) */

enum wk_ctr_format {
    WK_CTR_CRITEO,
    WK_CTR_LIBSVM,
};

struct wk_ctr_opts {
    enum wk_ctr_format format;
    uint64_t input_dim;         /* rows of the table the ids index, ≥ 1 */
    int width;                  /* libsvm: features a line (W); 0: the most
                                   on any line. Criteo: ignored */
    const char *index_path;     /* NULL: the line index lives in memory
                                   only; else its cache file (below) */
    int shuffle;                /* nonzero: wk_ctr_batch and
                                   wk_ctr_read_epoch read each epoch's
                                   order (above); 0: file order */
    uint64_t seed;              /* the order's seed (a model's "seed") */
};

struct wk_ctr;                  /* an open file, its index and its place */

/*
 * Open path and index its lines (one pass, described above). On success
 * *out is the reader (free with wk_ctr_close) and HC_OK is returned.
 * Errors, with a message naming the file: HC_ERR_NOTFOUND (missing),
 * HC_ERR_IO (unreadable), HC_ERR_DATA (no lines; a libsvm line wider than
 * the width given), HC_ERR_INVAL (input_dim 0, a width out of
 * [0, WK_CTR_WIDTH_MAX], an unknown format), HC_ERR_NOMEM.
 */
int wk_ctr_open(const char *path, const struct wk_ctr_opts *o,
                struct wk_ctr **out);

void wk_ctr_close(struct wk_ctr *c);

/* 1 when wk_ctr_open loaded the index from opts.index_path (the data file
 * was not read to open it), 0 when it read the file. */
int wk_ctr_index_cached(const struct wk_ctr *c);

/* Lines in the file (N). */
long long wk_ctr_lines(const struct wk_ctr *c);

/* Floats and ids a sample has: num (13 | W) and cat (26 | W) columns. */
int wk_ctr_n_num(const struct wk_ctr *c);
int wk_ctr_n_cat(const struct wk_ctr *c);

/*
 * Worker k of n's lines: into *first and *count (the formula above).
 * HC_ERR_INVAL with a message when n < 1, k outside [0, n), or the part
 * would be empty (n > N).
 */
int wk_ctr_part(const struct wk_ctr *c, int n, int k, long long *first,
                long long *count);

/* Batches of B in worker k of n's part: ceil(count / B), which passes
 * 2^31 for a part of more than 2^31 − 1 lines at B = 1; 0 for bad
 * arguments (those wk_ctr_part refuses, B < 1). */
long long wk_ctr_n_batches(const struct wk_ctr *c, int n, int k, int B);

/*
 * The split's and the order's arithmetic on their own, for a file of N
 * lines that need not exist (wk_ctr_part and the shuffled reads are made
 * of them; tests check them with N past 2^32). Lines, positions, blocks
 * and windows are counted in 64 bits: 1 ≤ N ≤ WK_CTR_LINES_MAX.
 *
 * wk_ctr_split: worker k of n's part of N lines (wk_ctr_part's rule and
 * errors; `what` names the file in the message). wk_ctr_batches_of:
 * ceil(count / B), 0 for B < 1 or count < 0.
 */
int wk_ctr_split(long long N, int n, int k, const char *what,
                 long long *first, long long *count);
long long wk_ctr_batches_of(long long count, int B);

/* The shuffled order of N lines (above): its blocks' order for one epoch
 * and the windows cut from it. */
struct wk_ctr_order {
    long long n_lines;          /* N */
    uint64_t seed;
    int win_blocks;             /* W (at most the blocks there are) */
    int epoch;                  /* the epoch bperm is for; −1 none */
    int64_t *bperm;             /* (ceil(N / 1024)) the blocks in the
                                   epoch's order: 8 bytes a block */
    long long part_at;          /* where the partial last block is in
                                   bperm; −1: the last block is whole */
};

/* An order of n_lines lines, windows of win_blocks (1 … WK_CTR_WINDOW)
 * blocks, seed: bperm allocated, no epoch yet. HC_ERR_INVAL (N or W out
 * of range), HC_ERR_NOMEM. Free with wk_ctr_order_free (also after a
 * failed init). */
int wk_ctr_order_init(struct wk_ctr_order *o, long long n_lines,
                      uint64_t seed, int win_blocks);
void wk_ctr_order_free(struct wk_ctr_order *o);

/* bperm for epoch (nothing to do when it holds that epoch already). */
void wk_ctr_order_epoch(struct wk_ctr_order *o, int epoch);

/* The first position of window w (w ≥ the windows' count: N), and the
 * window holding position p (0 ≤ p < N), of the order's epoch. */
long long wk_ctr_window_start(const struct wk_ctr_order *o, long long w);
long long wk_ctr_window_of(const struct wk_ctr_order *o, long long p);

/*
 * Window w of the order's epoch (w below the windows' count): its blocks
 * in file order into blocks (WK_CTR_WINDOW), their number returned, and
 * the shuffle of its lines into perm (W · 1024): position
 * wk_ctr_window_start(w) + i is the window's line perm[i] counted through
 * those blocks, i.e. file line blocks[perm[i] / 1024] · 1024 +
 * perm[i] % 1024 (only the file's last block is partial, and it sorts
 * last). *rows: the window's lines.
 */
int wk_ctr_window(const struct wk_ctr_order *o, long long w,
                  int64_t *blocks, int32_t *perm, int *rows);

/*
 * Batch `batch` of epoch `epoch` of worker k of n: the part's positions
 * [batch · B, batch · B + B) of the epoch's order, cut at the part's end
 * (wk_ctr_read_epoch). Fills label (B), num (B, n_num) and cat (B, n_cat)
 * — caller's buffers of B rows — and sets *n_out to the samples filled:
 * B, fewer for the last batch, 0 past the end. Returns HC_OK, HC_ERR_INVAL
 * (bad arguments, *n_out 0), HC_ERR_DATA (a malformed line: file and line
 * named; the rows before it are filled and *n_out counts them) or
 * HC_ERR_IO. Without opts.shuffle the lines are the same every epoch.
 */
int wk_ctr_batch(struct wk_ctr *c, int n, int k, int epoch, long long batch,
                 int B, float *label /* (B) */, float *num /* (B, n_num) */,
                 int64_t *cat /* (B, n_cat) */, int *n_out);

/*
 * Positions [start, start + count) of epoch's order (above), cut at N: a
 * worker's part, a sync worker's slice of a global batch. Without
 * opts.shuffle, wk_ctr_read. The first shuffled read allocates the window
 * (W · 1,024 parsed lines) and the block order (8 bytes a block). Same
 * buffers and returns as wk_ctr_batch; HC_ERR_INVAL also for epoch < 0.
 */
int wk_ctr_read_epoch(struct wk_ctr *c, int epoch, long long start, int count,
                      float *label /* (count) */,
                      float *num /* (count, n_num) */,
                      int64_t *cat /* (count, n_cat) */, int *n_out);

/*
 * Lines [start, start + count) of the whole file, cut at its end, in file
 * order whatever opts.shuffle says (evaluation, validation). Same
 * buffers, returns and *n_out as wk_ctr_batch.
 */
int wk_ctr_read(struct wk_ctr *c, long long start, int count,
                float *label /* (count) */, float *num /* (count, n_num) */,
                int64_t *cat /* (count, n_cat) */, int *n_out);

/*
 * The row id of Criteo categorical field `field` (0…25) holding the hex
 * value `value` (0…2^32−1), or empty when empty is nonzero, for a table of
 * input_dim rows: the rule above. Pure; any thread.
 */
int64_t wk_ctr_cat_id(int field, uint32_t value, int empty,
                      uint64_t input_dim);

/* "criteo" or "libsvm" → *f; HC_ERR_INVAL naming the list otherwise. */
int wk_ctr_format_parse(const char *name, enum wk_ctr_format *f);

#endif

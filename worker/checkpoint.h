/*
 * checkpoint.h — the chief's weights after each epoch as .npy files, as
 * Keras's ModelCheckpoint saves them: DIR/epoch-NNN/NAME.npy for every
 * variable (the layout `hetps export` writes and `hetps eval --weights`
 * reads), or with best_only DIR/best/ holding the epoch of the highest
 * val_accuracy so far. Each directory appears whole or not at all: it is
 * written under a temporary name and renamed (the best one swapped in
 * with renameat2's RENAME_EXCHANGE), with epoch.txt inside saying which
 * epoch and val_accuracy it holds.
 */
#ifndef WK_CHECKPOINT_H
#define WK_CHECKPOINT_H

#include "model.h"

struct wk_checkpoint {
    const char *dir;            /* NULL: none */
    int best_only;
    double best;                /* best val_accuracy written; < 0: none */
    char last[4096];            /* the directory written last */
};

/*
 * After epoch `epoch` (0-based) of val_accuracy val_acc: write params
 * (m->n_params, the variables one after the other) as described above.
 * *wrote = 1 when a directory was written (0: not better than the best).
 * HC_ERR_IO naming the file or directory.
 */
int wk_checkpoint_epoch(struct wk_checkpoint *c, const struct hc_model *m,
                        const float *params, int epoch, double val_acc,
                        int *wrote);

#endif

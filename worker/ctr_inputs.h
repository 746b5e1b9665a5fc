/*
 * ctr_inputs.h — click-through files (data_ctr.h: Criteo TSV, libsvm) as
 * a data set of a model's inputs (data.h, several inputs): `--data
 * criteo:TRAIN.tsv`, `--validation-data criteo:TEST.tsv`, likewise
 * `libsvm:FILE`.
 *
 * The file's categorical columns feed the model input named "categorical"
 * or else its one input of int64 ids ("dtype": "int64") as wide as the
 * file's categorical fields (26; libsvm: its width); its numeric columns
 * the input named "numeric" or else a float input of their width (13;
 * libsvm: the values), which a model may lack (the values are then
 * dropped). The ids are those data_ctr.h makes for the input_dim of the
 * embedding reading that input. A sample's row holds the inputs one after
 * another in the model's order, each id as its 8 bytes (HC_ID_FLOATS
 * floats, model.h), never through a float's value; labels 0 or 1
 * (binary cross-entropy takes them as targets).
 *
 * The file is streamed, never held: the data set has no x or y but a
 * source (data.h) that reads the samples asked for, 1,024 lines at a
 * time, through data_ctr.h's reader (its line index: 8 bytes a 1,024
 * lines). Memory is that index and one chunk of parsed lines (about 300
 * KiB for Criteo), whatever the file's size. Training splits such a set
 * by position (wk_shard_init_for): each worker reads its own run of
 * lines, in file order, and a restarted worker seeks straight to its
 * batch.
 */
#ifndef WK_CTR_INPUTS_H
#define WK_CTR_INPUTS_H

#include "data.h"
#include "model.h"

/* 1 when spec names a click-through file ("criteo:PATH", "libsvm:PATH"). */
int wk_ctr_inputs_spec(const char *spec);

/*
 * spec's file as a streamed data set of m's inputs into *out (free with
 * wk_data_free; one thread at a time reads it); flag ("--data") names spec in messages. Errors:
 * HC_ERR_CONFIG (m has no input of ids, or inputs the file cannot feed:
 * named, with what the file holds), data_ctr.h's errors (the file and
 * line named), HC_ERR_NOMEM. *out is zeroed on error.
 */
int wk_ctr_inputs_load(const char *spec, const char *flag,
                       const struct hc_model *m, struct wk_dataset *out);

#endif

/*
 * name.h — the one rule for names that become file paths, LMDB keys and
 * log text: variable names ("conv2d/kernel": the store keeps them, `hetps
 * export` writes NAME.npy, `hetps eval` reads it back) and layer names.
 *
 * A name is 1..HC_NAME_MAX_BYTES bytes of A-Z a-z 0-9 _ . : - ; a variable
 * name may also have parts separated by single '/' (no '/' first or last,
 * no empty part), and no part may be "." or "..". So a name never climbs
 * out of a directory, never names an absolute path, and prints as itself.
 */
#ifndef HC_NAME_H
#define HC_NAME_H

#define HC_NAME_MAX_BYTES 128u

enum hc_name_kind {
    HC_NAME_LAYER,      /* one part: no '/' */
    HC_NAME_VARIABLE    /* parts separated by '/' */
};

/*
 * HC_OK when `name` follows the rule for `kind`; otherwise HC_ERR_INVAL
 * with a message "WHAT \"NAME\" …" saying what is wrong (the name printed
 * only up to its first bad byte, the byte in hex). `what` names the thing
 * ("variable 3", "layers[1] name"). Thread-safe (the message is the
 * calling thread's).
 */
int hc_name_check(const char *name, enum hc_name_kind kind, const char *what);

#endif

/*
 * fuzz.h — what every libFuzzer target in tests/fuzz/ shares: libFuzzer's
 * entry points (declared here, so -Wmissing-prototypes holds), and a
 * scratch directory of the target's own under $TMPDIR, removed at exit.
 */
#ifndef HETPS_FUZZ_H
#define HETPS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The target's scratch directory (created on the first call; its files
 * are removed at exit). Never NULL: a target that cannot make one aborts,
 * since libFuzzer cannot report a set-up failure otherwise. */
const char *fz_dir(void);

/* Write data to fz_dir()/name (replacing it); its path in a static buffer. */
const char *fz_write(const char *name, const uint8_t *data, size_t size);

#endif

/*
 * roles.c — the commands a role's own program runs, as git runs git-foo:
 * `export`, `inspect` and `reshard` are hetps-ps's, `eval` and `predict`
 * hetps-worker's; `hetps CMD ARG...` becomes `DIR/PROG CMD ARG...`, DIR
 * being this executable's directory.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hetps.h"

/* Directory of this executable, to find hetps-ps and hetps-worker. */
void hetps_bin_dir(char *out, size_t len)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    char *slash;

    if (n <= 0) {
        snprintf(out, len, ".");
        return;
    }
    path[n] = '\0';
    slash = strrchr(path, '/');
    if (slash)
        *slash = '\0';
    snprintf(out, len, "%s", path);
}

/* Commands of one role run by that role's program, as git runs git-foo. */
static int run_role(const char *prog, int argc, char **argv)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    char **args = calloc((size_t)argc + 2, sizeof *args);
    int i;

    if (!args)
        return 1;
    hetps_bin_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%s", dir, prog);
    args[0] = path;
    for (i = 0; i < argc; i++)
        args[i + 1] = argv[i];
    execv(path, args);
    fprintf(stderr, "hetps: cannot run %s: %s\n", path, strerror(errno));
    free(args);
    return 1;
}

int hetps_cmd_export(int argc, char **argv)
{
    return run_role("hetps-ps", argc, argv);
}

int hetps_cmd_inspect(int argc, char **argv)
{
    return run_role("hetps-ps", argc, argv);
}

int hetps_cmd_reshard(int argc, char **argv)
{
    return run_role("hetps-ps", argc, argv);
}

int hetps_cmd_eval(int argc, char **argv)
{
    return run_role("hetps-worker", argc, argv);
}

int hetps_cmd_predict(int argc, char **argv)
{
    return run_role("hetps-worker", argc, argv);
}

/*
 * plot.c — `hetps plot LOGDIR -o run.png`: the curves of a run from
 * the chief's LOGDIR/training.csv, drawn by gnuplot (Debian's gnuplot-nox)
 * into one PNG of three panels: loss per epoch (train and test), accuracy
 * per epoch (train and test), and samples/s per epoch: the chief's epoch
 * lines' (computing and push-and-pull) and each worker's computing alone.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "hetps.h"

/* The columns of training.csv's header line; 0 when unreadable. */
static int csv_columns(const char *path, char *header, size_t len, int *rows)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int n = 1;
    const char *p;

    *rows = 0;
    if (!f)
        return 0;
    if (!fgets(header, (int)len, f)) {
        fclose(f);
        return 0;
    }
    while (fgets(line, sizeof line, f))
        if (line[0] >= '0' && line[0] <= '9')
            (*rows)++;
    fclose(f);
    for (p = header; *p; p++)
        n += *p == ',';
    return strncmp(header, "epoch,loss,accuracy,val_loss,val_accuracy,", 42)
               ? 0 : n;
}

/* A path as a gnuplot string (single quotes; a quote inside is refused). */
static int quotable(const char *s)
{
    return !strchr(s, '\'') && !strchr(s, '\n');
}

int hetps_cmd_plot(int argc, char **argv)
{
    static const struct option opts[] = {
        { "output", required_argument, NULL, 'o' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *out = NULL, *dir;
    char csv[4096], header[4096];
    FILE *g;
    int c, n_cols, rows, k, status;

    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'h':
            printf("Usage: hetps plot LOGDIR [-o FILE.png]\n"
                   "Draw a run's curves from LOGDIR/training.csv (written by the chief\n"
                   "under --logdir; hetps launch: DATA_DIR/logs) with gnuplot: loss and\n"
                   "accuracy per epoch, train and test, and each worker's samples/s.\n"
                   "Default output: LOGDIR/run.png.\n");
            return 0;
        default:
            fprintf(stderr, "Try 'hetps plot --help' for more information.\n");
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "hetps plot: give one LOGDIR\n"
                "Try 'hetps plot --help' for more information.\n");
        return 2;
    }
    dir = argv[optind];
    snprintf(csv, sizeof csv, "%s/training.csv", dir);
    if (!out) {
        static char def[4096];

        snprintf(def, sizeof def, "%s/run.png", dir);
        out = def;
    }
    n_cols = csv_columns(csv, header, sizeof header, &rows);
    if (!n_cols) {
        fprintf(stderr, "hetps plot: %s: %s\n", csv, errno == ENOENT
                ? "no such file: is LOGDIR the chief's --logdir (hetps "
                  "launch: DATA_DIR/logs)?"
                : "not a training.csv written by hetps (its header differs)");
        return 1;
    }
    if (rows == 0) {
        fprintf(stderr, "hetps plot: %s has no epoch yet: nothing to draw\n",
                csv);
        return 1;
    }
    if (!quotable(csv) || !quotable(out)) {
        fprintf(stderr, "hetps plot: a path with a quote or newline cannot "
                "be given to gnuplot: %s\n", out);
        return 2;
    }
    fflush(stdout);
    if (!(g = popen("gnuplot", "w"))) {
        fprintf(stderr, "hetps plot: cannot run gnuplot: %s (Debian package "
                "gnuplot-nox)\n", strerror(errno));
        return 1;
    }
    fprintf(g,
            "set terminal pngcairo size 1500,450 font 'sans,10'\n"
            "set output '%s'\n"
            "set datafile separator ','\n"
            "set key autotitle columnhead bottom right\n"
            "set grid\nset xlabel 'epoch'\nset xtics 1\n"
            "set multiplot layout 1,3 title 'hetps: %s'\n"
            "set title 'loss'\nset key top right\n"
            "plot '%s' using 1:2 with linespoints lw 2 title 'train', "
            "'' using 1:4 with linespoints lw 2 title 'test (val)'\n"
            "set title 'accuracy'\nset key bottom right\n"
            "plot '%s' using 1:3 with linespoints lw 2 title 'train', "
            "'' using 1:5 with linespoints lw 2 title 'test (val)'\n"
            "set title 'samples/s'\nset key bottom right\n"
            "set yrange [0:*]\n"
            "plot '%s' using 1:6 with linespoints lw 2 "
            "title 'worker:0, its epoch lines (computing and push-and-pull)'",
            out, csv, csv, csv, csv);
    /* the last column, learning_rate, is not a worker's */
    if (strstr(header, ",learning_rate"))
        n_cols--;
    for (k = 7; k < n_cols; k++)
        fprintf(g, ", '%s' using 1:%d with linespoints lw 2 "
                "title 'worker:%d computing only'", csv, k + 1, k - 7);
    fprintf(g, "\nunset multiplot\n");
    status = pclose(g);
    if (status != 0) {
        fprintf(stderr, "hetps plot: gnuplot failed (%s %d): is gnuplot-nox "
                "installed?\n", WIFEXITED(status) ? "exit" : "status",
                WIFEXITED(status) ? WEXITSTATUS(status) : status);
        return 1;
    }
    printf("hetps plot: %d epoch(s) of %s drawn in %s\n", rows, csv, out);
    return 0;
}

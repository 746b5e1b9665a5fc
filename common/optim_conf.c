/*
 * optim_conf.c — the optimizer settings as JSON text, the form in which the
 * chief hands them to the parameter servers (CreateVariables.optimizer).
 * The servers parse it with ps_optim_from_json (ps/optimizer.h), which
 * accepts Keras's names and defaults.
 */
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "optim_conf.h"

static const char *const optim_names[] = {
    [HC_OPT_SGD] = "sgd", [HC_OPT_MOMENTUM] = "momentum", [HC_OPT_ADAM] = "adam",
};

int hc_optim_to_json(const struct hc_optim_conf *c, char *buf, size_t len)
{
    int n = snprintf(buf, len,
                     "{\"type\":\"%s\",\"learning_rate\":%.9g,\"momentum\":%.9g,"
                     "\"nesterov\":%s,\"beta_1\":%.9g,\"beta_2\":%.9g,"
                     "\"epsilon\":%.9g}",
                     optim_names[c->type], (double)c->lr, (double)c->momentum,
                     c->nesterov ? "true" : "false", (double)c->beta1,
                     (double)c->beta2, (double)c->eps);

    if (n < 0 || (size_t)n >= len)
        return hc_err_set(HC_ERR_LIMIT, "optimizer settings: the JSON text "
                          "needs %d bytes but the buffer holds %zu", n + 1, len);
    return HC_OK;
}

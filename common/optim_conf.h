/*
 * optim_conf.h — the optimizer's settings, as a model file gives them
 * (common/model.h reads them) and as the parameter servers apply them
 * (ps/optimizer.h): the one thing about a model the servers need, so
 * that ps/ does not depend on the model file's layers.
 */
#ifndef HC_OPTIM_CONF_H
#define HC_OPTIM_CONF_H

#include <stddef.h>

enum hc_optim { HC_OPT_SGD, HC_OPT_MOMENTUM, HC_OPT_ADAM };

/* Optimizer settings, as Keras names them; applied by the parameter server. */
struct hc_optim_conf {
    enum hc_optim type;
    float lr;               /* learning_rate */
    float momentum;         /* SGD momentum (HC_OPT_MOMENTUM) */
    int nesterov;
    float beta1, beta2, eps; /* Adam */
};

/* The optimizer settings as one line of JSON ({"type":"adam",…}) with
 * Keras's names, as sent to the parameter servers, into buf (len bytes with
 * the NUL; 512 always suffice). Returns HC_OK, or HC_ERR_LIMIT (message
 * set) when buf is too small. */
int hc_optim_to_json(const struct hc_optim_conf *c, char *buf, size_t len);

#endif

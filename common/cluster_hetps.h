/*
 * cluster_hetps.h — the inside of the cluster reader (common/cluster*.c),
 * not for other modules: reading the "hetps" block. The public side
 * (hc_cluster_set_mode) is in cluster.h.
 */
#ifndef HC_CLUSTER_HETPS_H
#define HC_CLUSTER_HETPS_H

#include "cluster_read.h"

/* Read the "hetps" object into c, checked against c's workers. */
void cl_read_hetps(struct cl_parse *p, const cJSON *h, struct hc_cluster *c);

#endif

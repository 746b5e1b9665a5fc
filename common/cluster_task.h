/*
 * cluster_task.h — the inside of the cluster reader (common/cluster*.c),
 * not for other modules: reading a "task" object. The public side
 * (hc_cluster_set_task) is in cluster.h.
 */
#ifndef HC_CLUSTER_TASK_H
#define HC_CLUSTER_TASK_H

#include "cluster_read.h"

/* Read a "task" object {"type": "worker", "index": 0} against c (whose
 * jobs are read): sets c's task, or reports each mistake to p. */
void cl_read_task(struct cl_parse *p, const cJSON *task, struct hc_cluster *c);

#endif

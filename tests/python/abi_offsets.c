/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Prints, as JSON, the size and the offset of every field of the structures
 * the Python package mirrors with ctypes (python/sigma/_lib.py), as this
 * compiler lays them out; test_abi.py compares them with ctypes'.
 */
#include <stddef.h>
#include <stdio.h>

#include "sg_ctl_client.h"
#include "sg_etcd.h"
#include "sigma.h"
#include "sigma_elastic.h"
#include "sigma_local.h"

static int first;

static void begin(const char *name, size_t size)
{
	printf("%s\"%s\": {\"sizeof\": %zu", first++ ? ",\n" : "{\n", name, size);
}

#define F(type, field) printf(", \"%s\": %zu", #field, offsetof(type, field))
#define END() printf("}")

int main(void)
{
	begin("SigmaNode", sizeof(struct sigma_node));
	F(struct sigma_node, name); F(struct sigma_node, addr); F(struct sigma_node, port);
	F(struct sigma_node, kind); F(struct sigma_node, gbps);
	END();
	begin("SigmaConf", sizeof(struct sigma_conf));
	F(struct sigma_conf, job); F(struct sigma_conf, rank); F(struct sigma_conf, nworkers);
	F(struct sigma_conf, token); F(struct sigma_conf, nodes); F(struct sigma_conf, nnodes);
	F(struct sigma_conf, weights); F(struct sigma_conf, partition_bytes);
	F(struct sigma_conf, chunk_bytes); F(struct sigma_conf, window);
	F(struct sigma_conf, rto_us); F(struct sigma_conf, rto_max_us);
	F(struct sigma_conf, max_retries); F(struct sigma_conf, first_round);
	F(struct sigma_conf, transport); F(struct sigma_conf, local_addr);
	F(struct sigma_conf, local_port); F(struct sigma_conf, dpdk_port);
	F(struct sigma_conf, dpdk_rx_queues); F(struct sigma_conf, steer_reducers);
	F(struct sigma_conf, udp_gso); F(struct sigma_conf, failover);
	F(struct sigma_conf, membership); F(struct sigma_conf, membership_arg);
	F(struct sigma_conf, failover_wait_us); F(struct sigma_conf, spin_us);
	F(struct sigma_conf, ranks_wait_us); F(struct sigma_conf, shm_paths);
	F(struct sigma_conf, n_shm_paths); F(struct sigma_conf, auth_keys);
	F(struct sigma_conf, auth_key_id);
	END();
	begin("SigmaStats", sizeof(struct sigma_stats));
	F(struct sigma_stats, tx_packets); F(struct sigma_stats, rx_packets);
	F(struct sigma_stats, rx_results); F(struct sigma_stats, rx_stale);
	F(struct sigma_stats, rx_bad); F(struct sigma_stats, retransmits);
	F(struct sigma_stats, nacks); F(struct sigma_stats, errors);
	F(struct sigma_stats, ops_done); F(struct sigma_stats, ops_failed);
	F(struct sigma_stats, nodes_lost); F(struct sigma_stats, keys_moved);
	F(struct sigma_stats, recovery_pushes); F(struct sigma_stats, membership_changes);
	F(struct sigma_stats, timeouts_held); F(struct sigma_stats, spins);
	F(struct sigma_stats, waits); F(struct sigma_stats, tx_dropped);
	F(struct sigma_stats, rx_dropped);
	END();
	begin("SigmaFailure", sizeof(struct sigma_failure));
	F(struct sigma_failure, status); F(struct sigma_failure, kind);
	F(struct sigma_failure, node); F(struct sigma_failure, key);
	F(struct sigma_failure, chunk); F(struct sigma_failure, round);
	F(struct sigma_failure, missing); F(struct sigma_failure, waited_us);
	END();
	begin("SigmaLocalConf", sizeof(struct sigma_local_conf));
	F(struct sigma_local_conf, job); F(struct sigma_local_conf, key);
	F(struct sigma_local_conf, machine); F(struct sigma_local_conf, local_rank);
	F(struct sigma_local_conf, local_size); F(struct sigma_local_conf, open_timeout_ms);
	F(struct sigma_local_conf, wait_us); F(struct sigma_local_conf, share_wait_us);
	END();
	begin("SigmaJob", sizeof(struct sigma_job));
	F(struct sigma_job, conf); F(struct sigma_job, dtype); F(struct sigma_job, mode);
	F(struct sigma_job, nodes); F(struct sigma_job, weights); F(struct sigma_job, names);
	F(struct sigma_job, addrs); F(struct sigma_job, auth); F(struct sigma_job, has_keys);
	F(struct sigma_job, rank); F(struct sigma_job, auth_keys);
	END();
	begin("CtlTensor", sizeof(struct sg_ctl_tensor));
	F(struct sg_ctl_tensor, name); F(struct sg_ctl_tensor, elems);
	END();
	begin("CtlJobsvcNode", sizeof(struct sg_ctl_jobsvc_node));
	F(struct sg_ctl_jobsvc_node, target); F(struct sg_ctl_jobsvc_node, addr);
	F(struct sg_ctl_jobsvc_node, udp_port); F(struct sg_ctl_jobsvc_node, kind);
	F(struct sg_ctl_jobsvc_node, gbps); F(struct sg_ctl_jobsvc_node, has_weight);
	F(struct sg_ctl_jobsvc_node, weight);
	END();
	begin("CtlJobsvc", sizeof(struct sg_ctl_jobsvc));
	F(struct sg_ctl_jobsvc, nodes); F(struct sg_ctl_jobsvc, n_nodes);
	F(struct sg_ctl_jobsvc, secret); F(struct sg_ctl_jobsvc, secret_len);
	F(struct sg_ctl_jobsvc, timeout_ms);
	END();
	begin("CtlJobSpec", sizeof(struct sg_ctl_job_spec));
	F(struct sg_ctl_job_spec, id); F(struct sg_ctl_job_spec, workers);
	F(struct sg_ctl_job_spec, dtype); F(struct sg_ctl_job_spec, mode);
	F(struct sg_ctl_job_spec, partition_bytes); F(struct sg_ctl_job_spec, chunk_bytes);
	F(struct sg_ctl_job_spec, tensors); F(struct sg_ctl_job_spec, n_tensors);
	F(struct sg_ctl_job_spec, slots); F(struct sg_ctl_job_spec, auth);
	F(struct sg_ctl_job_spec, rank_descs); F(struct sg_ctl_job_spec, token_out);
	END();
	begin("ElasticConf", sizeof(struct sigma_elastic_conf));
	F(struct sigma_elastic_conf, etcd); F(struct sigma_elastic_conf, cluster);
	F(struct sigma_elastic_conf, descriptor); F(struct sigma_elastic_conf, rank);
	F(struct sigma_elastic_conf, base); F(struct sigma_elastic_conf, poll_ms);
	F(struct sigma_elastic_conf, margin); F(struct sigma_elastic_conf, confirm_ms);
	F(struct sigma_elastic_conf, wait_ms); F(struct sigma_elastic_conf, propose);
	F(struct sigma_elastic_conf, secret); F(struct sigma_elastic_conf, secret_len);
	F(struct sigma_elastic_conf, idle_ms); F(struct sigma_elastic_conf, job_token);
	END();
	begin("ElasticStatus", sizeof(struct sigma_elastic_status));
	F(struct sigma_elastic_status, epoch); F(struct sigma_elastic_status, nodes);
	F(struct sigma_elastic_status, sessions); F(struct sigma_elastic_status, proposals);
	F(struct sigma_elastic_status, races_lost); F(struct sigma_elastic_status, confirms);
	F(struct sigma_elastic_status, aborts); F(struct sigma_elastic_status, switches);
	F(struct sigma_elastic_status, waits); F(struct sigma_elastic_status, etcd_failures); F(struct sigma_elastic_status, last_abort);
	END();
	begin("EtcdConf", sizeof(struct sg_etcd_conf));
	F(struct sg_etcd_conf, endpoints); F(struct sg_etcd_conf, timeout_ms);
	F(struct sg_etcd_conf, user); F(struct sg_etcd_conf, password);
	F(struct sg_etcd_conf, ca_file); F(struct sg_etcd_conf, cert_file);
	F(struct sg_etcd_conf, key_file);
	END();
	begin("EtcdNode", sizeof(struct sg_etcd_node));
	F(struct sg_etcd_node, name); F(struct sg_etcd_node, kind); F(struct sg_etcd_node, gbps);
	F(struct sg_etcd_node, addr); F(struct sg_etcd_node, port);
	F(struct sg_etcd_node, control); F(struct sg_etcd_node, lease);
	END();
	begin("EtcdGarbage", sizeof(struct sg_etcd_garbage));
	F(struct sg_etcd_garbage, not_json); F(struct sg_etcd_garbage, bad_field);
	F(struct sg_etcd_garbage, bad_kind); F(struct sg_etcd_garbage, name_mismatch);
	END();
	begin("EtcdWatchStats", sizeof(struct sg_etcd_watch_stats));
	F(struct sg_etcd_watch_stats, polls); F(struct sg_etcd_watch_stats, failures);
	F(struct sg_etcd_watch_stats, changes); F(struct sg_etcd_watch_stats, generation);
	F(struct sg_etcd_watch_stats, nodes); F(struct sg_etcd_watch_stats, reachable);
	F(struct sg_etcd_watch_stats, garbage); F(struct sg_etcd_watch_stats, last_error);
	F(struct sg_etcd_watch_stats, streams); F(struct sg_etcd_watch_stats, reconnects);
	F(struct sg_etcd_watch_stats, events); F(struct sg_etcd_watch_stats, streaming);
	F(struct sg_etcd_watch_stats, polling); F(struct sg_etcd_watch_stats, jobs);
	F(struct sg_etcd_watch_stats, job_changes); F(struct sg_etcd_watch_stats, job_garbage);
	F(struct sg_etcd_watch_stats, keepalives); F(struct sg_etcd_watch_stats, keep_failures);
	END();
	printf("\n}\n");
	return 0;
}

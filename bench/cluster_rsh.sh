#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# mpirun's remote shell for `sigma-bench cluster` (--mca plm_rsh_agent): instead
# of ssh to HOST, run the command in the network namespace of the cluster
# machine whose address HOST is (bench/cluster_net.sh: 10.77.0.(1+I) is GPU
# machine I, 10.77.0.(101+J) CPU machine J, of the cluster $SIGMA_CLUSTER_PREFIX).
# mpirun starts its daemon (orted) on each "host" this way; the daemon then
# reaches mpirun over TCP on the cluster's links, and its ranks run in that
# namespace. Each machine's daemon gets a session folder of its own under
# $SIGMA_CLUSTER_DIR: all namespaces share one host name and one /tmp, and
# daemons that start at once would otherwise race for the same folder.
# Usage (by mpirun): cluster_rsh.sh HOST COMMAND...
set -u
host=$1
shift
last=${host##*.}
case $host in
10.77.0.*) ;;
*) echo "cluster_rsh: $host is not a cluster machine (10.77.0.X)" >&2; exit 1 ;;
esac
if [ "$last" -gt 100 ]; then m=c$((last - 101)); else m=g$((last - 1)); fi
mkdir -p "${SIGMA_CLUSTER_DIR:?}/mpi-$m" || exit 1
OMPI_MCA_orte_tmpdir_base=$SIGMA_CLUSTER_DIR/mpi-$m
export OMPI_MCA_orte_tmpdir_base
exec ip netns exec "${SIGMA_CLUSTER_PREFIX:?}-$m" sh -c "$*"

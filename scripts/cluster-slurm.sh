#!/usr/bin/env bash
# A search across two Slurm nodes, made on this machine: the two hosts of
# two-hosts.sh (network namespaces joined by a virtual Ethernet pair), a
# Slurm controller and a node daemon on the first (node cmca, 10.77.0.1),
# a node daemon on the second (cmcb, 10.77.0.2), and `cargo cmc check`
# run in an allocation of both (`salloc -N 2`): Open MPI's mpirun takes
# the nodes from the allocation and starts its processes on them with
# Slurm's own launcher (srun), as on a Slurm cluster; states travel
# between the nodes over TCP (`--mca btl tcp,self`).
#
#   bash scripts/cluster-slurm.sh DIR [cargo cmc check arguments...]
#
# runs `cargo cmc check ARGS` in DIR in the allocation and exits with its
# status (`CARGO_CMC` names the cargo-cmc binary; default: the one on the
# path; SLOTS: the allocation's tasks, default 4). Needs root, iproute2,
# and Slurm and MUNGE (installed here from Debian's packages if missing).
# Everything it starts (daemons, namespaces, files) is removed when it
# ends, but MUNGE's daemon, which it starts only if none runs.
set -euo pipefail
dir=${1:?usage: bash scripts/cluster-slurm.sh DIR [cargo cmc check arguments...]}
shift

if [ "$(id -u)" -ne 0 ]; then
  echo "cluster-slurm.sh: needs root (network namespaces, Slurm's daemons)" >&2
  exit 1
fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm >/dev/null
fi
. "$(dirname "$0")/two-hosts.sh"

# MUNGE, which Slurm authenticates with: a key and a daemon, unless there.
if ! munge -n >/dev/null 2>&1; then
  mkdir -p /etc/munge /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge
  [ -f /etc/munge/munge.key ] || /usr/sbin/mungekey -c
  chown munge:munge /etc/munge/munge.key
  su -s /bin/sh munge -c /usr/sbin/munged
fi

tag=cmc$$
h1=${tag}h1 h2=${tag}h2
tmp=$(mktemp -d)
cleanup() {
  for pid in "$tmp"/*.pid; do
    [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true
  done
  sleep 0.5
  two_hosts_down "$tag"
  rm -rf "$tmp"
}
trap cleanup EXIT
two_hosts_up "$tag"

mkdir -p "$tmp/state" "$tmp/spool-cmca" "$tmp/spool-cmcb"
cat >"$tmp/slurm.conf" <<EOF
ClusterName=cmc$$
SlurmctldHost=cmca(10.77.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MailProg=/bin/true
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool-%n
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd-%n.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd-%n.log
ReturnToService=2
NodeName=cmca NodeAddr=10.77.0.1 CPUs=$(nproc) State=UNKNOWN
NodeName=cmcb NodeAddr=10.77.0.2 CPUs=$(nproc) State=UNKNOWN
PartitionName=cmc Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF=$tmp/slurm.conf
on_host "$h1" cmca slurmctld
on_host "$h1" cmca slurmd -N cmca
on_host "$h2" cmcb slurmd -N cmcb
up=
for _ in $(seq 100); do
  if [ "$(ip netns exec "$h1" sinfo -h -o '%t' -p cmc 2>/dev/null)" = idle ]; then
    up=1
    break
  fi
  sleep 0.2
done
[ -n "$up" ] || {
  echo "cluster-slurm.sh: the Slurm nodes did not come up:" >&2
  tail -n 5 "$tmp"/*.log >&2
  exit 1
}

# The check, in an allocation of both nodes. The hosts reach nothing
# else: cargo builds the harness offline (from what it fetched before;
# build it once outside, with the same arguments, if it has not).
cmc=${CARGO_CMC:-cargo-cmc}
set +e
(cd "$dir" && ip netns exec "$h1" env CARGO_NET_OFFLINE=true \
  CMC_MPIRUN_ARGS="--mca btl tcp,self ${CMC_MPIRUN_ARGS:-}" \
  salloc --quiet -N 2 -n "${SLOTS:-4}" --overcommit "$cmc" cmc check "$@")
status=$?
set -e
exit $status

#!/usr/bin/env bash
# A search across two hosts, made on this machine: two network namespaces
# joined by a virtual Ethernet pair (10.77.0.1 and 10.77.0.2), an ssh
# server in the second (with a host name of its own), and `cargo cmc
# check` started in the first with a hostfile that names both (two slots
# each). mpirun starts the second host's processes over ssh, as it does
# on a cluster, and the processes exchange states over TCP
# (`--mca btl tcp,self`: not through shared memory), as on two machines
# that share a file system.
#
#   bash scripts/cluster-hosts.sh DIR [cargo cmc check arguments...]
#
# runs `cargo cmc check ARGS` in DIR across the two hosts and exits with
# its status (`CARGO_CMC` names the cargo-cmc binary; default: the one on
# the path). Needs root, iproute2 and an ssh server (installed here from
# Debian's packages if missing). Everything it makes (namespaces, keys,
# the server) is removed when it ends.
set -euo pipefail
dir=${1:?usage: bash scripts/cluster-hosts.sh DIR [cargo cmc check arguments...]}
shift

if [ "$(id -u)" -ne 0 ]; then
  echo "cluster-hosts.sh: needs root (network namespaces, an ssh server)" >&2
  exit 1
fi
if ! command -v sshd >/dev/null && [ ! -x /usr/sbin/sshd ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null
fi
. "$(dirname "$0")/two-hosts.sh"

tag=cmc$$
h1=${tag}h1 h2=${tag}h2
tmp=$(mktemp -d)
cleanup() {
  [ -f "$tmp/sshd.pid" ] && kill "$(cat "$tmp/sshd.pid")" 2>/dev/null || true
  two_hosts_down "$tag"
  rm -rf "$tmp"
}
trap cleanup EXIT

# Two hosts and a cable.
two_hosts_up "$tag"

# The second host's ssh server, which lets in a key made for this run.
ssh-keygen -q -t ed25519 -N "" -f "$tmp/id"
ssh-keygen -q -t ed25519 -N "" -f "$tmp/host_key"
cp "$tmp/id.pub" "$tmp/authorized_keys"
chmod 600 "$tmp/authorized_keys"
mkdir -p /run/sshd
on_host "$h2" "$h2" /usr/sbin/sshd -f /dev/null \
  -o ListenAddress=10.77.0.2 -o HostKey="$tmp/host_key" -o AuthorizedKeysFile="$tmp/authorized_keys" \
  -o PermitRootLogin=prohibit-password -o StrictModes=no -o UsePAM=no -o PidFile="$tmp/sshd.pid"
cat >"$tmp/ssh" <<EOF
#!/bin/sh
exec ssh -i $tmp/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "\$@"
EOF
chmod +x "$tmp/ssh"
for _ in $(seq 50); do
  ip netns exec "$h1" "$tmp/ssh" 10.77.0.2 true 2>/dev/null && break
  sleep 0.1
done
[ "$(ip netns exec "$h1" "$tmp/ssh" 10.77.0.2 hostname)" = "$h2" ] \
  || { echo "cluster-hosts.sh: the second host does not answer" >&2; exit 1; }
printf '10.77.0.1 slots=2\n10.77.0.2 slots=2\n' >"$tmp/hosts"

# The check, from the first host: mpirun reaches the second through the
# ssh above (an MCA parameter in the environment). The hosts reach
# nothing else: cargo builds the harness offline (from what it fetched
# before; build it once outside, with the same arguments, if it has not).
cmc=${CARGO_CMC:-cargo-cmc}
set +e
(cd "$dir" && ip netns exec "$h1" env CARGO_NET_OFFLINE=true \
  OMPI_MCA_plm_rsh_agent="$tmp/ssh" \
  CMC_MPIRUN_ARGS="--hostfile $tmp/hosts --mca btl tcp,self ${CMC_MPIRUN_ARGS:-}" \
  "$cmc" cmc check "$@")
status=$?
set -e
exit $status

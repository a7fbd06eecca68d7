# Two hosts made on this machine, for the scripts that run a search across
# machines here (cluster-hosts.sh, cluster-slurm.sh); sourced, not run.
# `two_hosts_up TAG` makes two network namespaces, ${TAG}h1 (10.77.0.1) and
# ${TAG}h2 (10.77.0.2), joined by a virtual Ethernet pair; `on_host NS
# NAME CMD...` runs CMD in namespace NS with host name NAME (a UTS
# namespace of its own) and the control groups mounted as on this machine
# (a namespace's /sys is its own, and Slurm's daemons look there);
# `two_hosts_down TAG` removes both namespaces. Needs root and iproute2.

two_hosts_up() {
  local tag=$1
  command -v ip >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
  ip netns add "${tag}h1"
  ip netns add "${tag}h2"
  ip link add "${tag}a" type veth peer name "${tag}b"
  ip link set "${tag}a" netns "${tag}h1"
  ip link set "${tag}b" netns "${tag}h2"
  ip -n "${tag}h1" addr add 10.77.0.1/24 dev "${tag}a"
  ip -n "${tag}h2" addr add 10.77.0.2/24 dev "${tag}b"
  ip -n "${tag}h1" link set lo up
  ip -n "${tag}h2" link set lo up
  ip -n "${tag}h1" link set "${tag}a" up
  ip -n "${tag}h2" link set "${tag}b" up
}

two_hosts_down() {
  ip netns del "$1h1" 2>/dev/null || true
  ip netns del "$1h2" 2>/dev/null || true
}

# The mounts of the control groups, as a shell script for the namespace
# (cgroup v2, or v1's hierarchies one by one).
cgroup_mounts() {
  if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
    echo "mount -t cgroup2 none /sys/fs/cgroup"
    return
  fi
  echo "mount -t tmpfs none /sys/fs/cgroup"
  awk '$3 == "cgroup" && $2 ~ "^/sys/fs/cgroup/" {
    printf "mkdir -p %s; mount -t cgroup -o %s none %s\n", $2, $4, $2 }' /proc/mounts
  awk '$3 == "cgroup2" && $2 ~ "^/sys/fs/cgroup/" {
    printf "mkdir -p %s; mount -t cgroup2 none %s\n", $2, $2 }' /proc/mounts
}

on_host() {
  local ns=$1 name=$2
  shift 2
  ip netns exec "$ns" unshare --uts sh -c "$(cgroup_mounts)
hostname $name
exec \"\$@\"" sh "$@"
}

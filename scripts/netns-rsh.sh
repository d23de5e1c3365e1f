#!/bin/sh
# OpenMPI's remote launcher for hosts that are network namespaces on this machine, in place of
# ssh (`mpirun --mca plm_rsh_agent scripts/netns-rsh.sh`): mpirun calls it as `AGENT HOST
# COMMAND...`, and it runs COMMAND (OpenMPI's daemon, orted) in the namespace that stands for
# HOST, through a shell as sshd would. tests/multi_host.rs uses it; needs root (`ip netns
# exec`).
#
#   NETNS_RSH_HOSTS  "ADDRESS=NAMESPACE ..." : which namespace each host address is
#   NETNS_RSH_LOG    optional file: one line per launch, "HOST NAMESPACE net:[INODE]", the
#                    network namespace the command runs in as the kernel names it
set -eu

if [ "$#" -lt 2 ]; then
  echo "usage: $0 HOST COMMAND..." >&2
  exit 2
fi
host=$1
shift
namespace=
for pair in ${NETNS_RSH_HOSTS:-}; do
  if [ "${pair%%=*}" = "$host" ]; then
    namespace=${pair#*=}
  fi
done
if [ -z "$namespace" ]; then
  echo "netns-rsh: no namespace for host $host in NETNS_RSH_HOSTS=\"${NETNS_RSH_HOSTS:-}\"" >&2
  exit 255
fi
if [ -n "${NETNS_RSH_LOG:-}" ]; then
  echo "$host $namespace $(ip netns exec "$namespace" readlink /proc/self/ns/net)" \
    >> "$NETNS_RSH_LOG"
fi
# As ssh does: the words of COMMAND joined by spaces, read by a shell on the other side.
exec ip netns exec "$namespace" sh -c "$*"

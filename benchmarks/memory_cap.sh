#!/usr/bin/env bash
# Train under a hard memory cap to show that training streams the feature matrix from
# the store (its pages are evictable) instead of holding it.
#
#   sudo benchmarks/memory_cap.sh STORE [FEATURES=S6] [CAP_MIB=320] [FAMILY=svm]
#
# Needs root and a cgroup memory controller (v1 or v2). The page cache is dropped first
# so that the matrix pages are read, and charged, inside the cap. Prints the train
# command's own summary (time, peak memory) or the OOM kill; exits with its status.
set -euo pipefail
store=${1:?usage: $0 STORE [FEATURES] [CAP_MIB] [FAMILY]}
features=${2:-S6}
cap_mib=${3:-320}
family=${4:-svm}
out=$(mktemp -d)
group=moses-reorder-cap-$$
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then           # cgroup v2
    cg=/sys/fs/cgroup/$group
    mkdir "$cg"
    echo $((cap_mib * 1024 * 1024)) > "$cg/memory.max"
    echo 0 > "$cg/memory.swap.max" 2>/dev/null || true
else                                                        # cgroup v1
    cg=/sys/fs/cgroup/memory/$group
    mkdir "$cg"
    echo $((cap_mib * 1024 * 1024)) > "$cg/memory.limit_in_bytes"
fi
cleanup() { rmdir "$cg" 2>/dev/null || true; rm -rf "$out"; }
trap cleanup EXIT
sync
echo 3 > /proc/sys/vm/drop_caches
echo "cap ${cap_mib} MiB, $family $features, store $store"
status=0
root=$(cd "$(dirname "$0")/.." && pwd)   # this checkout's training package, not an installed one
bash -c "echo \$\$ > '$cg/cgroup.procs'; cd '$root'; exec env OMP_NUM_THREADS=1 PYTHONPATH='$root' python3 -m training.cli train \
    --family '$family' --features '$features' --type wbe-msd-backward-fe --store '$store' \
    --out '$out/model.mrw'" 2>&1 | tr '\r' '\n' | grep -E '^(wrote|backward:)|Killed|rror' || status=$?
[ -f "$out/model.mrw" ] || { echo "no model written (killed by the cap?)"; exit 1; }
exit $status

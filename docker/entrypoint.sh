#!/bin/sh
# Container entrypoint: `gateway serve` with one worker per CPU the container may use, unless GATEWAY_WORKERS says.
#
# CPUs = the CPUs this process may run on (nproc: affinity / cpuset), capped by the cgroup CPU quota rounded up
# (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us / cpu.cfs_period_us), at least 1. GATEWAY_CGROUP_ROOT (default
# /sys/fs/cgroup) exists for tests. Arguments: none or flags -> `gateway serve <flags>`; a subcommand (serve,
# mock-upstream, ...) -> `gateway <subcommand> ...`.
set -eu

cpu_quota_cpus() {  # prints the quota in whole CPUs (rounded up), or nothing when unlimited / unknown
  root=${GATEWAY_CGROUP_ROOT:-/sys/fs/cgroup}
  quota=""
  period=""
  if [ -r "$root/cpu.max" ]; then
    read -r quota period < "$root/cpu.max" || true
  elif [ -r "$root/cpu/cpu.cfs_quota_us" ] && [ -r "$root/cpu/cpu.cfs_period_us" ]; then
    read -r quota < "$root/cpu/cpu.cfs_quota_us" || true
    read -r period < "$root/cpu/cpu.cfs_period_us" || true
  fi
  case "$quota" in ""|max|-*) return 0 ;; esac
  case "$period" in ""|0|*[!0-9]*) return 0 ;; esac
  case "$quota" in *[!0-9]*) return 0 ;; esac
  echo $(( (quota + period - 1) / period ))
}

if [ -z "${GATEWAY_WORKERS:-}" ]; then
  cpus=$(nproc 2>/dev/null || echo 1)
  quota=$(cpu_quota_cpus)
  if [ -n "$quota" ] && [ "$quota" -lt "$cpus" ]; then
    cpus=$quota
  fi
  [ "$cpus" -ge 1 ] 2>/dev/null || cpus=1
  GATEWAY_WORKERS=$cpus
  export GATEWAY_WORKERS
fi

if [ -n "${PROMETHEUS_MULTIPROC_DIR:-}" ]; then
  # the multi-process metrics directory must exist and start empty (stale files would be counted)
  mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
  find "$PROMETHEUS_MULTIPROC_DIR" -maxdepth 1 -name '*.db' -type f -delete
fi

case "${1:-}" in
  ""|-*) set -- serve "$@" ;;
esac
exec gateway "$@"

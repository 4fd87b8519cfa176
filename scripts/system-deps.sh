#!/usr/bin/env bash
# Install the system packages the tests use (prometheus, tmux, openssh-client, openssh-server, curl)
# when missing (openssh-server: the sshd simcluster's MPI workers run, as mpi-operator's do).
#   scripts/system-deps.sh                      every package the tests need; fails if it cannot
#   scripts/system-deps.sh --optional prometheus sshd   try to install these; never fails (make demo)
set -euo pipefail
optional=0
if [ "${1:-}" = "--optional" ]; then
    optional=1
    shift
fi
declare -A provides=([prometheus]=prometheus [tmux]=tmux [ssh]=openssh-client [sshd]=openssh-server [curl]=curl)
wanted=("$@")
[ ${#wanted[@]} -eq 0 ] && wanted=(prometheus tmux ssh sshd curl)
need=()
for cmd in "${wanted[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/bin/$cmd" ] || [ -x "/usr/sbin/$cmd" ] || need+=("${provides[$cmd]:-$cmd}")
done
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ "$optional" -eq 1 ]; then
    echo "installing system packages with ${SUDO:+sudo }apt-get: ${need[*]} (optional: ranks does without)"
else
    echo "installing system packages with ${SUDO:+sudo }apt-get: ${need[*]}"
fi
export DEBIAN_FRONTEND=noninteractive
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }; then
    if [ "$optional" -eq 1 ]; then
        echo "could not install ${need[*]}; continuing without" >&2
        exit 0
    fi
    exit 1
fi

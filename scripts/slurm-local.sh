#!/usr/bin/env bash
# Starts and stops a real single-node Slurm on this machine (munged, slurmctld, slurmd), for trainbench's Slurm
# test (`tests/it/slurm.rs`) and for users who want to try `trainbench run --on slurm` without a cluster.
#
#   scripts/slurm-local.sh start    install the packages when missing (root only), start the daemons, wait until
#                                   the node is idle; prints `export SLURM_CONF=...` for the client commands
#   scripts/slurm-local.sh stop     `scontrol shutdown`, then end what `start` started (by its pids), nothing else
#   scripts/slurm-local.sh status   whether it is up
#
# Everything lives in $TRAINBENCH_SLURM_DIR (default /tmp/trainbench-slurm): slurm.conf, state, spool, logs, pid
# files. The configuration is the minimal one of ../shared/design/distributed.md: one node with this machine's
# cores and memory, partition `debug`, munge authentication, no accounting, no cgroups. Exit status: 0 started /
# stopped / up; 1 it could not be started (the reason on stderr); 3 `status` found it down.
set -euo pipefail

DIR="${TRAINBENCH_SLURM_DIR:-/tmp/trainbench-slurm}"
CONF="$DIR/slurm.conf"
HOST="$(hostname -s 2>/dev/null || hostname)"

die() { echo "slurm-local: $*" >&2; exit 1; }

install_when_missing() {
	local need=()
	command -v slurmctld >/dev/null 2>&1 || need+=(slurmctld)
	command -v slurmd >/dev/null 2>&1 || need+=(slurmd)
	command -v sbatch >/dev/null 2>&1 || need+=(slurm-client)
	command -v munged >/dev/null 2>&1 || need+=(munge)
	[ ${#need[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || die "missing ${need[*]}; install them (Debian: apt-get install slurmctld slurmd slurm-client munge) or run this as root"
	command -v apt-get >/dev/null 2>&1 || die "missing ${need[*]} and no apt-get to install them with"
	echo "slurm-local: installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; } ||
		die "installing ${need[*]} failed"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

up() { [ -f "$CONF" ] && SLURM_CONF="$CONF" scontrol ping 2>/dev/null | grep -q "is UP"; }

write_conf() {
	local cpus mem
	cpus="$(nproc)"
	mem="$(awk '/MemTotal/ { printf "%d", $2 / 1024 * 0.8 }' /proc/meminfo)"
	mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log"
	cat >"$CONF" <<EOF
# Written by trainbench's scripts/slurm-local.sh: a single-node Slurm for tests.
ClusterName=trainbench-local
SlurmctldHost=$HOST
SlurmUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
MinJobAge=600
NodeName=$HOST CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munge() {
	if pgrep -x munged >/dev/null 2>&1 && munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
		return 0 # a munged that works is already running (not ours: `stop` leaves it alone)
	fi
	[ -s /etc/munge/munge.key ] || {
		mkdir -p /etc/munge
		dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
		chown munge:munge /etc/munge/munge.key 2>/dev/null || true
		chmod 400 /etc/munge/munge.key
	}
	mkdir -p /run/munge /var/log/munge /var/lib/munge
	chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
	runuser -u munge -- munged --force || die "munged did not start"
	cp /run/munge/munged.pid "$DIR/munged.pid"
	for _ in $(seq 50); do munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0; sleep 0.1; done
	die "munged started but does not answer"
}

start() {
	[ "$(id -u)" -eq 0 ] || die "needs root (the daemons run as root here; SlurmUser=root)"
	install_when_missing
	if up; then
		echo "slurm-local: already up"
		echo "export SLURM_CONF=$CONF"
		return 0
	fi
	write_conf
	start_munge
	alive "$DIR/slurmctld.pid" || slurmctld -f "$CONF" || die "slurmctld did not start (see $DIR/log/slurmctld.log)"
	alive "$DIR/slurmd.pid" || slurmd -f "$CONF" || die "slurmd did not start (see $DIR/log/slurmd.log)"
	for _ in $(seq 150); do
		if SLURM_CONF="$CONF" sinfo -h -N -o "%T" 2>/dev/null | grep -qE "^idle"; then
			echo "slurm-local: up (node $HOST, partition debug)"
			echo "export SLURM_CONF=$CONF"
			return 0
		fi
		sleep 0.2
	done
	die "the node did not become idle in 30 s (see $DIR/log/)"
}

stop_pid() {
	local file="$1" pid
	[ -f "$file" ] || return 0
	pid="$(cat "$file")"
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || { rm -f "$file"; return 0; }; sleep 0.1; done
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || { rm -f "$file"; return 0; }; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$file"
}

stop() {
	[ -f "$CONF" ] || { echo "slurm-local: not started here ($CONF missing)"; return 0; }
	SLURM_CONF="$CONF" scancel --quiet --user="$(id -un)" 2>/dev/null || true
	SLURM_CONF="$CONF" scontrol shutdown 2>/dev/null || true
	stop_pid "$DIR/slurmd.pid"
	stop_pid "$DIR/slurmctld.pid"
	# Only a munged this script started (its pid copied at start); another one is left alone.
	if [ -f "$DIR/munged.pid" ]; then
		kill "$(cat "$DIR/munged.pid")" 2>/dev/null || true
		stop_pid "$DIR/munged.pid"
	fi
	echo "slurm-local: stopped"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) if up; then echo "slurm-local: up; export SLURM_CONF=$CONF"; else echo "slurm-local: down"; exit 3; fi ;;
*) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac

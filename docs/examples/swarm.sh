#!/bin/sh
# swarm.sh [N]: N agents on one store, each in a work tree of its own, every
# command going through one `swarmops serve`, each agent landing its work on
# main; a watcher streams main's moves. The tests run this script
# (cmd/swarmops/examples_test.go); it exits non-zero if any check fails.
#
# SWARM_DIR (default ./swarm) holds the store, the work trees and the logs.
set -eu
n_agents=${1:-8}
root=${SWARM_DIR:-$PWD/swarm}
mkdir -p "$root"
root=$(cd "$root" && pwd)
export SWARMOPS_STORE="$root/store"
# Every command must go through the server: fail rather than fall back.
export SWARMOPS_SERVER=required

# retry runs a command again while it fails with a retryable code:
# E_BUSY (5) or E_UNAVAILABLE (13), at most five more times.
retry() {
  for pause in 0.1 0.2 0.4 0.8 1.6; do
    rc=0
    "$@" || rc=$?
    case $rc in
      0) return 0 ;;
      5|13) sleep "$pause" ;;
      *) return "$rc" ;;
    esac
  done
  "$@"
}

SWARMOPS_SERVER=off swarmops init > /dev/null

# One server for the store. It prints one line when it is ready.
swarmops serve > "$root/serve.out" 2> "$root/serve.err" &
server=$!
i=0
until [ -s "$root/serve.out" ]; do
  i=$((i + 1))
  [ "$i" -lt 200 ] || { echo "swarm.sh: the server did not start" >&2; exit 1; }
  sleep 0.05
done

# main starts with a README.
printf 'put README.md = "project\\n"\n' \
  | swarmops commit -F - --advance main --create --agent orchestrator -m "start" > /dev/null

# The watcher prints every move of main from the start of the journal, one
# JSON envelope a line, until it is stopped.
swarmops watch --json --from 0 main > "$root/moves.jsonl" &
watcher=$!

agent() {
  n=$1
  wt="$root/wt/$n"
  export SWARMOPS_AGENT="agent-$n"
  swarmops checkout main "$wt" > /dev/null
  mkdir -p "$wt/src"
  echo "work of agent $n" > "$wt/src/agent$n.txt"
  swarmops status "$wt" > "$root/status.$n"
  retry swarmops commit --dir "$wt" --advance "agent/$n" --create -m "agent $n's work" > /dev/null
  retry swarmops land "agent/$n" --onto main > /dev/null
}

pids=
for n in $(seq 1 "$n_agents"); do
  agent "$n" &
  pids="$pids $!"
done
failed=0
for p in $pids; do
  wait "$p" || failed=$((failed + 1))
done
[ "$failed" -eq 0 ] || { echo "swarm.sh: $failed agents failed" >&2; exit 1; }

# Checks: every agent's file is on main, each status saw its one new file,
# and the watcher saw main's every move: the start and one land an agent.
files=$(swarmops ls main:src | wc -l)
[ "$files" -eq "$n_agents" ] || { echo "swarm.sh: main:src holds $files files, want $n_agents" >&2; exit 1; }
for n in $(seq 1 "$n_agents"); do
  grep -q "^A  *src/agent$n.txt" "$root/status.$n" || { echo "swarm.sh: status of agent $n:" >&2; cat "$root/status.$n" >&2; exit 1; }
done
want=$((n_agents + 1))
i=0
until [ "$(wc -l < "$root/moves.jsonl")" -ge "$want" ]; do
  i=$((i + 1))
  [ "$i" -lt 200 ] || { echo "swarm.sh: the watcher saw $(wc -l < "$root/moves.jsonl") moves of main, want $want" >&2; exit 1; }
  sleep 0.05
done
kill -TERM "$watcher"
wait "$watcher" || true

# A clean stop removes the socket.
kill -TERM "$server"
wait "$server"
[ ! -e "$SWARMOPS_STORE/serve.sock" ] || { echo "swarm.sh: serve.sock left behind" >&2; exit 1; }

echo "swarm.sh: $n_agents agents landed; main moved $(wc -l < "$root/moves.jsonl") times"

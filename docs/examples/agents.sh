#!/bin/sh
# agents.sh: N agents, each on a branch of its own, landing onto main.
set -u
export SWARMOPS_STORE="$PWD/.swarmops"

retry() {
  for pause in 0.1 0.2 0.4 0.8 1.6; do
    "$@" && return 0
    rc=$?
    case $rc in 5|13) ;; *) return "$rc" ;; esac   # E_BUSY, E_UNAVAILABLE
    sleep "$pause"
  done
  "$@"
}

agent() {
  n=$1
  retry swarmops ref create "agent/$n" main > /dev/null || return
  printf 'put src/agent%s.txt = "work of agent %s\\n"\n' "$n" "$n" > "changes.$n"
  retry swarmops commit -F "changes.$n" --advance "agent/$n" --agent "agent-$n" -m "agent $n's work" > /dev/null || return
  retry swarmops land "agent/$n" --onto main --agent "agent-$n" -m "land agent $n"
}

swarmops init
printf 'put README.md = "project\\n"\n' |
  swarmops commit -F - --advance main --agent orchestrator -m "start" > /dev/null
for n in $(seq 1 "${1:-8}"); do
  agent "$n" &
done
wait
swarmops ls main:src

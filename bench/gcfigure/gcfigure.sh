#!/bin/sh
# gcfigure.sh SWARMOPS GIT WORKDIR: builds a 1,000-changeset history in a
# store (200 files of 2 KB, each changeset rewriting one), plus 100
# changesets on a ref that is then deleted; exports main to git with
# `swarmops export --git` (the same history in git, plus the garbage as a
# deleted branch there too), then times `swarmops gc --retention 0s` and
# `git gc --prune=now` on it. Prints the figures, the load and the sizes.
set -eu
SW=$1 GIT=$2 W=$3
rm -rf "$W" && mkdir -p "$W"
S=$W/store G=$W/git
"$SW" --store "$S" init >/dev/null
list=$W/list
: >"$list"
for f in $(seq 1 200); do
	printf 'put d%d/f%d = "%s"\n' $((f % 10)) "$f" "$(head -c 1500 /dev/urandom | base64 -w0)" >>"$list"
done
"$SW" --store "$S" commit -F "$list" --advance main --create --root -m base >/dev/null
for i in $(seq 2 1000); do
	f=$((i % 200 + 1))
	printf 'put d%d/f%d = "%s"\n' $((f % 10)) "$f" "$(head -c 1500 /dev/urandom | base64 -w0)" |
		"$SW" --store "$S" commit -F - --parent main --advance main -m "change $i" >/dev/null
done
"$SW" --store "$S" ref create dead main >/dev/null
for i in $(seq 1 100); do
	printf 'put dead/f%d = "%s"\n' "$i" "$(head -c 1500 /dev/urandom | base64 -w0)" |
		"$SW" --store "$S" commit -F - --parent dead --advance dead -m "dead $i" >/dev/null
done
"$GIT" init -q "$G"
"$SW" --store "$S" export --git "$G" main dead >/dev/null
"$GIT" -C "$G" branch -D -q swarm/dead 2>/dev/null || "$GIT" -C "$G" update-ref -d refs/heads/swarm/dead
"$GIT" -C "$G" reflog expire --expire=now --all
"$SW" --store "$S" ref delete dead >/dev/null
echo "date $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "before: store $(du -sb "$S" | cut -f1) bytes, git $(du -sb "$G/.git" | cut -f1) bytes"
t0=$(date +%s.%N); "$SW" --store "$S" gc --retention 0s >/dev/null; t1=$(date +%s.%N)
"$GIT" -C "$G" gc -q --prune=now; t2=$(date +%s.%N)
echo "swarmops gc $(echo "$t1 - $t0" | bc) s, git gc $(echo "$t2 - $t1" | bc) s"
echo "after: store $(du -sb "$S" | cut -f1) bytes, git $(du -sb "$G/.git" | cut -f1) bytes"
"$SW" --store "$S" verify --deep

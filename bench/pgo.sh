#!/bin/sh
# pgo.sh remakes bench/default.pgo, the CPU profile that go build, go run
# and go test of the bench use (docs/bench.md): from a build without a
# profile (-pgo=off), 24 whole runs and 240 of -max 64 (the small
# messages' loops take a millisecond a run: the whole runs alone give
# them too few samples), both ranks' profiles merged. It then checks the
# inlining the message loops rest on (TestProfileInlining).
#
#	bench/pgo.sh            # from anywhere in the repository
#	bench/pgo.sh OUT        # the profile to OUT instead (to compare)
#
# PGO_RUNS and PGO_SMALL_RUNS set the two counts. Run it on an idle host;
# it takes about a minute on a 2-vCPU VM.
set -eu
cd "$(dirname "$0")/.."
out=${1:-bench/default.pgo}
runs=${PGO_RUNS:-24}
small=${PGO_SMALL_RUNS:-240}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/whole" "$tmp/small"
go build -pgo=off -o "$tmp/bench" ./bench
i=0
while [ "$i" -lt "$runs" ]; do
	i=$((i + 1))
	"$tmp/bench" -quiet -format anchor -cpuprofile "$tmp/whole/cpu$i.pprof" >/dev/null
done
i=0
while [ "$i" -lt "$small" ]; do
	i=$((i + 1))
	"$tmp/bench" -quiet -format anchor -max 64 -cpuprofile "$tmp/small/cpu$i.pprof" >/dev/null
done
go tool pprof -proto "$tmp"/whole/cpu*.pprof.rank* "$tmp"/small/cpu*.pprof.rank* >"$tmp/default.pgo"
mv "$tmp/default.pgo" "$out"
BENCH_PGO=$(cd "$(dirname "$out")" && pwd)/$(basename "$out") \
	go test -count=1 -run TestProfileInlining ./bench

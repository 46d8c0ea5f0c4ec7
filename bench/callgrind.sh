#!/bin/sh
# Instructions per operation of one Go benchmark, counted by callgrind: the
# benchmark runs at two iteration counts and the difference is divided by
# the difference in iterations, so set-up and tear-down cancel. The count
# does not depend on what else the machine is doing, unlike ns/op.
#
#   go test -c -o memstore.test ./memstore
#   bench/callgrind.sh ./memstore.test 'AllowN/hotkey/token_bucket$'
#
# Usage: callgrind.sh TESTBINARY BENCHREGEXP [N1 [N2]]   (defaults 100000 300000)
set -eu
bin=$1 re=$2 n1=${3:-100000} n2=${4:-300000}
count() {
	# asyncpreemptoff: callgrind cannot follow Go's preemption signals.
	GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 GOGC=off valgrind --tool=callgrind \
		--callgrind-out-file=/dev/null "$bin" -test.run='^$' -test.bench="$re" -test.benchtime="${1}x" 2>&1 |
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
a=$(count "$n1")
b=$(count "$n2")
echo "$re $(((b - a) / (n2 - n1)))"

# tests/bench/lib.sh - helpers shared by the benchmark scripts (sourced, not run).

die() {
	echo "bench: $*" >&2
	exit 2
}

# timeit 'COMMAND' : runs COMMAND once in this shell, sets T to the elapsed seconds and RC
# to its exit status (redirect its output inside COMMAND). With TIMEIT_SYNC=1 it syncs
# first, so that earlier writes are not flushed inside the timing. The clock is bash's own
# (EPOCHREALTIME): a `date` process at the end of the interval cost 2-5 ms on this VM,
# which was most of a short query's time.
timeit() {
	local t0 t1
	[ "${TIMEIT_SYNC:-0}" = 1 ] && sync
	t0=${EPOCHREALTIME/[^0-9]/.} # the locale's radix may be a comma
	set +e
	eval "$1"
	RC=$?
	set -e
	t1=${EPOCHREALTIME/[^0-9]/.}
	T=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
}

# div A B [FORMAT] : A / B, or n/a when either is empty or B is 0
div() {
	awk -v a="$1" -v b="$2" -v f="${3:-%.2f}" 'BEGIN { if (a == "" || b == "" || b == 0) print "n/a"; else printf f, a / b }'
}

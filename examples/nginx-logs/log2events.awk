#!/usr/bin/awk -f
# log2events.awk - turns nginx access-log lines in the log_format
#   '$remote_addr [$time_local] "$request" $status $request_time $request_length'
# into one event document per line (Extended JSON, for <coll>/.insert):
#   {"ip", "time": {"$date"}, "method", "url", "resource" (the url without its query
#    string), "status", "request_time" (seconds, a double), "request_length" (bytes)}
# Lines that do not have that shape go to stderr with their line number and are skipped.
BEGIN {
	split("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec", names, " ")
	for (i = 1; i <= 12; i++)
		month[names[i]] = sprintf("%02d", i)
}
function esc(s) {
	gsub(/\\/, "\\\\", s)
	gsub(/"/, "\\\"", s)
	return s
}
{
	# $1 ip, $2 "[dd/Mon/yyyy:hh:mm:ss", $3 "+zzzz]", $4 "\"METHOD", $5 url, $6 "PROTO\"",
	# $7 status, $8 request_time, $9 request_length
	if (NF != 9 || substr($2, 1, 1) != "[" || split(substr($2, 2), t, /[\/:]/) != 6 ||
	    !(t[2] in month) || $3 != "+0000]") {
		printf "line %d: not an access-log line: %s\n", NR, $0 > "/dev/stderr"
		next
	}
	url = $5
	resource = url
	sub(/\?.*/, "", resource)
	gsub(/\/[0-9]+/, "/{id}", resource) # one resource for /api/items/1, /api/items/2, ...
	printf "{\"ip\": \"%s\", \"time\": {\"$date\": \"%s-%s-%sT%s:%s:%sZ\"}, \"method\": \"%s\", " \
	       "\"url\": \"%s\", \"resource\": \"%s\", \"status\": %d, \"request_time\": %s, " \
	       "\"request_length\": %d}\n",
	       esc($1), t[3], month[t[2]], t[1], t[4], t[5], t[6], esc(substr($4, 2)), esc(url),
	       esc(resource), $7, ($8 ~ /\./ ? $8 : $8 ".0"), $9
}

#!/usr/bin/awk -f
# log2upserts.awk - the pre-aggregated design: turns nginx access-log lines (the format of
# log2events.awk) into bulk operations for <coll>/.bulk, one upsert per request that counts
# it in the document of its resource and day:
#   {"resource": "/api/items", "day": {"$date": "2026-12-01T00:00:00Z"},
#    "daily": <requests that day>, "minute": {"<minute of the day>": <requests>, ...}}
# so a day's traffic of one resource is one small document, updated in place ($inc).
BEGIN {
	split("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec", names, " ")
	for (i = 1; i <= 12; i++)
		month[names[i]] = sprintf("%02d", i)
}
NF == 9 && split(substr($2, 2), t, /[\/:]/) == 6 && (t[2] in month) {
	resource = $5
	sub(/\?.*/, "", resource)
	gsub(/\/[0-9]+/, "/{id}", resource) # one resource for /api/items/1, /api/items/2, ...
	gsub(/\\/, "\\\\", resource)
	gsub(/"/, "\\\"", resource)
	printf "{\"updateOne\": {\"filter\": {\"resource\": \"%s\", \"day\": {\"$date\": \"%s-%s-%sT00:00:00Z\"}}, " \
	       "\"update\": {\"$inc\": {\"daily\": 1, \"minute.%d\": 1}}, \"upsert\": true}}\n",
	       resource, t[3], month[t[2]], t[1], t[4] * 60 + t[5]
}

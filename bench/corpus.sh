#!/usr/bin/env bash
# Prepares the benchmark corpus: the Linux 6.1 source tree from Debian's
# linux-source-6.1 package (about 78,000 files, 1.3 GB), unpacked outside the
# repository. Prints the directory.
set -euo pipefail
dest="${1:-/var/tmp/agent-vfs-corpus}"
if [ ! -d "$dest/linux-source-6.1" ]; then
  if [ ! -f /usr/src/linux-source-6.1.tar.xz ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-source-6.1 >/dev/null
  fi
  mkdir -p "$dest"
  tar -xJf /usr/src/linux-source-6.1.tar.xz -C "$dest"
fi
echo "$dest/linux-source-6.1"

#!/usr/bin/env bash
# Install Debian/Ubuntu packages where this machine allows it: apt-get, run as root or through
# sudo that asks no password. Installs only what is missing; when it cannot, says so in one
# line (what to install) and exits 1. Used by `make setup` (the grading sandbox: bubblewrap and
# libseccomp, for the tests that seal workers) and by .ci/run.
#   scripts/apt_install.sh PACKAGE...
set -u
missing=()
for package in "$@"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    echo "not installed: ${missing[*]} (needs root): sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "not installed: ${missing[*]} (no apt-get here: use the system's package manager)" >&2
  exit 1
fi
$SUDO apt-get update -qq &&
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# Re-fetch a docs benchmark corpus (experiments/data/docs_corpus/NAME) from PyPI and check it.
#
#   experiments/data/fetch_docs_corpus.sh [NAME]           # download, verify the sdist's sha256, compare every file
#   experiments/data/fetch_docs_corpus.sh [NAME] --write   # the same, then (re)write the copies from the sdist
#   experiments/data/fetch_docs_corpus.sh --all            # check every corpus in experiments/data/corpora/
#
# NAME (default hatch) names a manifest, experiments/data/corpora/NAME.sh: the package, its pinned version and
# sdist sha256, its licence file (and NOTICE_FILE, optional: a notice the licence requires to travel with copies,
# as Apache-2.0's NOTICE), the documentation folder inside the sdist and the documents taken from it.
# A corpus is a subset of the documentation shipped in a permissively licensed sdist, copied byte for byte
# with the licence (and notice) beside it. PyPI never replaces a released file, so the pinned version and
# sha256 make this reproducible. PYTHON picks the interpreter whose pip downloads (default: the project's .venv,
# else python3).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ "${1:-}" = --all ]; then
  for manifest in "$here"/corpora/*.sh; do "$0" "$(basename "$manifest" .sh)"; done
  exit 0
fi

name=hatch
mode=check
for arg in "$@"; do
  case "$arg" in
    --write) mode=write ;;
    -*) echo "usage: $0 [NAME] [--write] | --all" >&2; exit 2 ;;
    *) name="$arg" ;;
  esac
done
manifest="$here/corpora/$name.sh"
[ -f "$manifest" ] || { echo "no manifest $manifest" >&2; exit 2; }
DOCS_ROOT=docs
NOTICE_FILE=
# shellcheck source=/dev/null
source "$manifest"

dest="$here/docs_corpus/$name"
python="${PYTHON:-$here/../../.venv/bin/python}"
[ -x "$python" ] || python=python3

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# --no-binary :all: makes pip take the sdist (the wheel has no docs); --no-deps: only this one file.
"$python" -m pip download --quiet --no-deps --no-binary :all: "$PACKAGE==$VERSION" -d "$work"
sdist="$(find "$work" -maxdepth 1 -name '*.tar.gz' | head -n 1)"
echo "$SDIST_SHA256  $sdist" | sha256sum --check --quiet -
tar -xzf "$sdist" -C "$work"
root="$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)"

copy() {  # source path inside the sdist, destination path inside the corpus
  if [ "$mode" = write ]; then
    install -D -m 644 "$root/$1" "$dest/$2"
  elif ! cmp --quiet "$root/$1" "$dest/$2"; then
    echo "differs from $PACKAGE $VERSION: $dest/$2" >&2
    differ=1
  fi
}

differ=0
copy "$LICENSE_FILE" "$(basename "$LICENSE_FILE")"
[ -z "$NOTICE_FILE" ] || copy "$NOTICE_FILE" "$(basename "$NOTICE_FILE")"
for doc in "${DOCS[@]}"; do copy "$DOCS_ROOT/$doc" "docs/$doc"; done

# The corpus folder is ingested as a whole, so a stray file there would change the benchmark silently.
expected="$(printf '%s\n' "${DOCS[@]}" | sort)"
present="$(cd "$dest/docs" && find . -type f | sed 's|^\./||' | sort)"
if [ "$expected" != "$present" ]; then
  echo "$dest/docs holds other files than the ${#DOCS[@]} listed in $manifest:" >&2
  diff <(echo "$expected") <(echo "$present") >&2 || true
  differ=1
fi

if [ "$differ" -ne 0 ]; then
  echo "corpus check failed (run with --write to restore the copies from the sdist)" >&2
  exit 1
fi
echo "ok: ${#DOCS[@]} documents and $LICENSE_FILE${NOTICE_FILE:+ and $NOTICE_FILE} match $PACKAGE $VERSION (sdist sha256 $SDIST_SHA256)"

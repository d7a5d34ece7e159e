#!/usr/bin/env bash
# Re-fetch the docs benchmark corpus (experiments/data/docs_corpus/hatch) from PyPI and check it.
#
#   experiments/data/fetch_docs_corpus.sh           # download, verify the sdist's sha256, compare every file
#   experiments/data/fetch_docs_corpus.sh --write   # the same, then (re)write the copies from the sdist
#
# The corpus is a subset of the Markdown documentation shipped in the sdist of Hatch (MIT licence), copied
# byte for byte. PyPI never replaces a released file, so the pinned version and sha256 make this reproducible.
# PYTHON picks the interpreter whose pip downloads (default: the project's .venv, else python3).
set -euo pipefail

PACKAGE=hatch
VERSION=1.18.2
SDIST_SHA256=7f365f1a5b8f1a8162813daed9bf9fce83f15dc933fc99c6d04cbb942e64f4d0
LICENSE_FILE=LICENSE.txt
# Paths inside the sdist's docs/ folder; they keep the same relative paths under docs_corpus/hatch/docs/.
DOCS=(
  intro.md
  install.md
  why.md
  environment.md
  version.md
  build.md
  publish.md
  config/metadata.md
  config/dependency.md
  config/build.md
  config/hatch.md
  config/context.md
  config/environment/overview.md
  config/environment/advanced.md
  config/internal/testing.md
  meta/faq.md
  plugins/builder/wheel.md
  plugins/builder/sdist.md
  plugins/environment/virtual.md
  plugins/publisher/package-index.md
  plugins/version-source/regex.md
  plugins/version-source/code.md
  tutorials/testing/overview.md
  how-to/environment/select-installer.md
)

mode=check
case "${1:-}" in
  "") ;;
  --write) mode=write ;;
  *) echo "usage: $0 [--write]" >&2; exit 2 ;;
esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="$here/docs_corpus/$PACKAGE"
python="${PYTHON:-$here/../../.venv/bin/python}"
[ -x "$python" ] || python=python3

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# --no-binary :all: makes pip take the sdist (the wheel has no docs); --no-deps: only this one file.
"$python" -m pip download --quiet --no-deps --no-binary :all: "$PACKAGE==$VERSION" -d "$work"
sdist="$work/$PACKAGE-$VERSION.tar.gz"
echo "$SDIST_SHA256  $sdist" | sha256sum --check --quiet -
tar -xzf "$sdist" -C "$work"
root="$work/$PACKAGE-$VERSION"

files=("$LICENSE_FILE")
for doc in "${DOCS[@]}"; do files+=("docs/$doc"); done

differ=0
for file in "${files[@]}"; do
  if [ "$mode" = write ]; then
    install -D -m 644 "$root/$file" "$dest/$file"
  elif ! cmp --quiet "$root/$file" "$dest/$file"; then
    echo "differs from $PACKAGE $VERSION: $dest/$file" >&2
    differ=1
  fi
done

# The corpus folder is ingested as a whole, so a stray file there would change the benchmark silently.
expected="$(printf '%s\n' "${DOCS[@]}" | sort)"
present="$(cd "$dest/docs" && find . -type f | sed 's|^\./||' | sort)"
if [ "$expected" != "$present" ]; then
  echo "$dest/docs holds other files than the ${#DOCS[@]} listed here:" >&2
  diff <(echo "$expected") <(echo "$present") >&2 || true
  differ=1
fi

if [ "$differ" -ne 0 ]; then
  echo "corpus check failed (run with --write to restore the copies from the sdist)" >&2
  exit 1
fi
echo "ok: ${#DOCS[@]} documents and $LICENSE_FILE match $PACKAGE $VERSION (sdist sha256 $SDIST_SHA256)"

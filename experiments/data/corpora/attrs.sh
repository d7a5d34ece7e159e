# attrs's documentation (MIT licence), the held-out docs benchmark corpus (MyST Markdown); questions:
# experiments/data/docs_attrs_questions.jsonl
PACKAGE=attrs
VERSION=26.1.0
SDIST_SHA256=d03ceb89cb322a8fd706d4fb91940737b6642aa36998fe130a9bc96c985eff32
LICENSE_FILE=LICENSE
DOCS_ROOT=docs   # the documentation folder inside the sdist; its files keep their paths under docs_corpus/$NAME/docs/
DOCS=(
  overview.md
  why.md
  examples.md
  types.md
  init.md
  comparison.md
  hashing.md
  glossary.md
  extending.md
  how-does-it-work.md
  names.md
)

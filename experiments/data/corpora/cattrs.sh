# cattrs's documentation (MIT licence), a docs benchmark corpus (MyST Markdown); questions:
# experiments/data/docs_cattrs_questions.jsonl
PACKAGE=cattrs
VERSION=26.2.1
SDIST_SHA256=679132bfdc225c5ee40c024fc42519954767c387f950dc6751946c586bccdc6d
LICENSE_FILE=LICENSE
DOCS_ROOT=docs   # the documentation folder inside the sdist; its files keep their paths under docs_corpus/$NAME/docs/
DOCS=(
  why.md
  basics.md
  defaulthooks.md
  customizing.md
  strategies.md
  recipes.md
  validation.md
  preconf.md
  unions.md
  usage.md
  migrations.md
  indepth.md
)

# structlog's documentation (MIT OR Apache-2.0 licence; kept under MIT), the held-out docs benchmark corpus (MyST
# Markdown); questions: experiments/data/docs_structlog_questions.jsonl
PACKAGE=structlog
VERSION=26.1.0
SDIST_SHA256=f63a716cbd1b1291cf7661de7794b455acfa4c43c5bcf1630e6ad5ddc1adb3b7
LICENSE_FILE=LICENSE-MIT
DOCS_ROOT=docs   # the documentation folder inside the sdist; its files keep their paths under docs_corpus/$NAME/docs/
DOCS=(
  why.md
  getting-started.md
  bound-loggers.md
  configuration.md
  processors.md
  contextvars.md
  exceptions.md
  console-output.md
  testing.md
  typing.md
  frameworks.md
  standard-library.md
  twisted.md
  recipes.md
  logging-best-practices.md
  performance.md
  glossary.md
  thread-local.md
)

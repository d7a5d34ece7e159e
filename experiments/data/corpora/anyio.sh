# AnyIO's documentation (MIT licence), a held-out docs benchmark corpus (reStructuredText);
# questions: experiments/data/docs_anyio_questions.jsonl
PACKAGE=anyio
VERSION=4.16.0
SDIST_SHA256=59bb03251907983d1603d27c3087ddb1e93299ea2163adcdba37899a4fb12ffb
LICENSE_FILE=LICENSE
DOCS_ROOT=docs   # the documentation folder inside the sdist; its files keep their paths under docs_corpus/$NAME/docs/
DOCS=(
  basics.rst
  tasks.rst
  cancellation.rst
  synchronization.rst
  streams.rst
  typedattrs.rst
  networking.rst
  threads.rst
  subprocesses.rst
  subinterpreters.rst
  fileio.rst
  tempfile.rst
  signals.rst
  contextmanagers.rst
  testing.rst
  migration.rst
  why.rst
  faq.rst
  support.rst
  contributing.rst
)

# Jinja's documentation (BSD-3-Clause licence), a held-out docs benchmark corpus (reStructuredText);
# questions: experiments/data/docs_jinja2_questions.jsonl
PACKAGE=jinja2
VERSION=3.1.6
SDIST_SHA256=0137fb05990d35f1275a587e9aee6d56da821fc83491a0fb838183be43f66d6d
LICENSE_FILE=LICENSE.txt
DOCS_ROOT=docs   # the documentation folder inside the sdist; its files keep their paths under docs_corpus/$NAME/docs/
DOCS=(
  intro.rst
  api.rst
  sandbox.rst
  nativetypes.rst
  templates.rst
  extensions.rst
  integration.rst
  switching.rst
  tricks.rst
  faq.rst
)

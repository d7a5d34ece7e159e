# coverage.py's documentation (Apache-2.0 licence, with its NOTICE), a held-out docs benchmark corpus
# (reStructuredText with sphinx-tabs); questions: experiments/data/docs_coverage_questions.jsonl
PACKAGE=coverage
VERSION=7.17.5
SDIST_SHA256=4f41d35b798714a2e79ec2097d6b03c92cd3b7de58e422fce7a1ca2c0c25b276
LICENSE_FILE=LICENSE.txt
NOTICE_FILE=NOTICE.txt   # Apache-2.0 (section 4d): the NOTICE travels with the redistributed pages
DOCS_ROOT=doc   # the documentation folder inside the sdist; its files keep their paths under docs_corpus/$NAME/docs/
DOCS=(
  index.rst
  install.rst
  commands/index.rst
  commands/cmd_run.rst
  commands/cmd_combine.rst
  commands/cmd_erase.rst
  commands/cmd_reporting.rst
  commands/cmd_report.rst
  commands/cmd_html.rst
  commands/cmd_xml.rst
  commands/cmd_json.rst
  commands/cmd_lcov.rst
  commands/cmd_annotate.rst
  commands/cmd_debug.rst
  config.rst
  messages.rst
  source.rst
  excluding.rst
  branch.rst
  subprocess.rst
  contexts.rst
  api.rst
  howitworks.rst
  plugins.rst
  other.rst
  trouble.rst
  faq.rst
  migrating.rst
)

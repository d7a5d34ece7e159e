# Werkzeug's documentation (BSD-3-Clause licence), a held-out docs benchmark corpus (reStructuredText);
# questions: experiments/data/docs_werkzeug_questions.jsonl
PACKAGE=werkzeug
VERSION=3.1.9
SDIST_SHA256=55ca7c70a75689be937aa27f8ff4b018f06ff4838fc73045560bf0f5a1291060
LICENSE_FILE=LICENSE.txt
DOCS_ROOT=docs   # the documentation folder inside the sdist; its files keep their paths under docs_corpus/$NAME/docs/
DOCS=(
  installation.rst
  tutorial.rst
  levels.rst
  quickstart.rst
  serving.rst
  test.rst
  debug.rst
  wrappers.rst
  routing.rst
  wsgi.rst
  http.rst
  datastructures.rst
  utils.rst
  local.rst
  exceptions.rst
  deployment/index.rst
  deployment/gunicorn.rst
  deployment/waitress.rst
  deployment/mod_wsgi.rst
  deployment/uwsgi.rst
  deployment/gevent.rst
  deployment/eventlet.rst
  deployment/proxy_fix.rst
  deployment/nginx.rst
  deployment/apache-httpd.rst
  terms.rst
  request_data.rst
)

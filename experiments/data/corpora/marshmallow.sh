# marshmallow's documentation (MIT licence), the held-out docs benchmark corpus (reStructuredText); questions:
# experiments/data/docs_marshmallow_questions.jsonl
PACKAGE=marshmallow
VERSION=4.4.0
SDIST_SHA256=9e6ffa8511012ca89732324c1c253efd7b4d35632dcbdf80aa793fe01804af3e
LICENSE_FILE=LICENSE
DOCS_ROOT=docs   # the documentation folder inside the sdist; its files keep their paths under docs_corpus/$NAME/docs/
DOCS=(
  install.rst
  quickstart.rst
  nesting.rst
  custom_fields.rst
  extending/pre_and_post_processing.rst
  extending/schema_validation.rst
  extending/using_original_input_data.rst
  extending/overriding_attribute_access.rst
  extending/custom_error_handling.rst
  extending/custom_options.rst
  extending/custom_error_messages.rst
  examples/validating_package_json.rst
  examples/quotes_api.rst
  examples/inflection.rst
  why.rst
  upgrading.rst
)

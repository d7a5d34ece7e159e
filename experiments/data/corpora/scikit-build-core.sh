# scikit-build-core's documentation (Apache-2.0 licence), a held-out docs benchmark corpus;
# questions: experiments/data/docs_scikit-build-core_questions.jsonl
PACKAGE=scikit-build-core
VERSION=1.1.2
SDIST_SHA256=7893709119c5ab1be75cd10442383132c9433b9f104dacef5185949efbea7974
LICENSE_FILE=LICENSE
DOCS_ROOT=docs   # the documentation folder inside the sdist; its files keep their paths under docs_corpus/$NAME/docs/
DOCS=(
  guide/getting_started.md
  guide/cmakelists.md
  guide/faqs.md
  guide/build.md
  guide/dynamic_link.md
  guide/ctypes.md
  guide/crosscompile.md
  guide/migration_guide.md
  guide/workspaces.md
  guide/debugging.md
  configuration/index.md
  configuration/editable.md
  configuration/overrides.md
  configuration/config_settings.md
  configuration/dynamic.md
  configuration/search_paths.md
  configuration/entrypoint_config.md
  configuration/wrapping.md
  configuration/variants.md
  plugins/setuptools.md
  plugins/hatchling.md
  reference/configs.md
)

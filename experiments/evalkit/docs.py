"""The docs benchmark's corpus: a folder of documents, ingested by dagrag's own reader, and the check that
the questions' evidence really is in it.

A docs question (see evalkit.data: `evidence` quotes, one `documents` path each, no `paragraphs`) is answered
from the whole folder, chunked by `dagrag.ingest.read_nodes` exactly as `dagrag ingest FOLDER` would chunk
it, so the benchmark measures the ingestion users get, whatever it is today. The evidence is scored by text
(evalkit.metrics.evidence_recall), never by chunk id, so it survives any change to the chunker.

    python experiments/eval.py --data experiments/data/docs_questions.jsonl \\
        --corpus experiments/data/docs_corpus/hatch/docs --systems single,dag --budget 4
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dagrag.ingest import DOCUMENT_SUFFIXES, read_nodes

from .data import DataFormatError, Example

PROBLEMS_SHOWN = 5  # an error message names this many mismatches, then counts the rest


def docs_corpus(folder: Path, embed_spec: str) -> tuple[list[Any], str]:
    """The folder's chunks as dagrag ingests them, and a key for the eval collection built from them.

    The key covers every chunk's id, text and metadata (title, section, position...) and the embedding spec:
    when the chunker changes, the chunks change and so does the collection, so an index built by an older
    chunker is never scored as if it were the new one's."""
    if not folder.is_dir():
        raise DataFormatError(f"--corpus {folder}: no such folder")
    nodes = read_nodes(folder)
    digest = hashlib.sha256()
    for line in sorted(json.dumps([n.node_id, n.text, n.metadata], sort_keys=True, default=str) for n in nodes):
        digest.update(line.encode())
        digest.update(b"\n")
    digest.update(embed_spec.encode())
    return nodes, digest.hexdigest()[:16]


def folder_sha256(folder: Path) -> str:
    """A digest of every file under `folder`, by relative path and bytes: a docs corpus as written (a page or an
    example file it includes edited, added or removed gives another digest)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def evidence_problems(examples: Sequence[Example], folder: Path, *, unique: bool = False) -> list[str]:
    """What is wrong with the examples' evidence against the documents in `folder`: a document that does not
    exist, a quote that is not in its document verbatim. `unique`: a quote must also occur exactly once in
    its document and in no other document of the folder (the data set's rule, so that finding the quote means
    finding that passage; the eval itself only needs the quote to be there). A file ingest does not read as a
    document (a `literalinclude`'s example, shown inside the pages that name it) is not another document."""
    texts: dict[str, str | None] = {}   # None: no such document
    corpus: list[str] | None = None
    problems: list[str] = []
    for example in examples:
        for number, (quote, document) in enumerate(zip(example.evidence, example.documents), start=1):
            where = f"{example.id} evidence {number}"
            if document not in texts:
                path = folder / document
                texts[document] = path.read_text(encoding="utf-8") if path.is_file() else None
            text = texts[document]
            if text is None:
                problems.append(f"{where}: {document} is not a file in {folder}")
                continue
            count = text.count(quote)
            if count == 0:
                problems.append(f"{where}: not found verbatim in {document}: {quote[:60]!r}")
            elif unique:
                if corpus is None:
                    corpus = [p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*"))
                              if p.is_file() and p.suffix.lower() in DOCUMENT_SUFFIXES]
                elsewhere = sum(text.count(quote) for text in corpus) - count
                if count > 1 or elsewhere:
                    problems.append(f"{where}: {count} times in {document} and {elsewhere} times elsewhere "
                                    f"(must be once): {quote[:60]!r}")
    return problems


def check_evidence(examples: Sequence[Example], folder: Path) -> None:
    """Refuses a run whose corpus does not hold the questions' evidence (the wrong --corpus, or an edited
    document): every question would score zero recall without saying why."""
    problems = evidence_problems(examples, folder)
    if problems:
        more = f" (and {len(problems) - PROBLEMS_SHOWN} more)" if len(problems) > PROBLEMS_SHOWN else ""
        raise DataFormatError(f"--corpus {folder} does not hold the questions' evidence: "
                              + "; ".join(problems[:PROBLEMS_SHOWN]) + more)


def docs_corpus_folder(examples: Sequence[Example], corpus: str | None) -> Path | None:
    """The folder docs questions are answered from (checked to hold their evidence), or None when the questions
    bring their own paragraphs (HotpotQA, MuSiQue, 2Wiki: the pooled paragraphs are the corpus)."""
    docs = sum(example.is_docs for example in examples)
    if corpus is None:
        if docs:
            raise DataFormatError(f"{docs} questions quote documents (records with 'evidence' and no 'paragraphs'): "
                                  "name the folder of those documents with --corpus")
        return None
    if docs < len(examples):
        raise DataFormatError(f"--corpus is for docs questions (records with 'evidence' and no 'paragraphs'), but "
                              f"{len(examples) - docs} of these {len(examples)} questions bring their own paragraphs")
    folder = Path(corpus)
    if not folder.is_dir():
        raise DataFormatError(f"--corpus {folder}: no such folder")
    check_evidence(examples, folder)
    return folder

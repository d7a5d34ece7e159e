"""Load multi-hop QA data in the shared JSONL format or the official HotpotQA, 2Wiki and MuSiQue files, and
documentation QA (records with `evidence` quoted from a folder of documents, no `paragraphs`)."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class DataFormatError(ValueError):
    """A record does not fit its format; the message names file and line (or record)."""


@dataclass(frozen=True)
class Paragraph:
    title: str
    text: str
    is_supporting: bool


@dataclass
class Example:
    id: str
    question: str
    answers: list[str]
    type: str
    paragraphs: list[Paragraph]
    decomposition: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Docs questions: verbatim quotes from the corpus folder, and the document (relative path) of each.
    evidence: list[str] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)

    @property
    def supporting(self) -> list[Paragraph]:
        return [p for p in self.paragraphs if p.is_supporting]

    @property
    def is_docs(self) -> bool:
        """Scored by the evidence text found in the sources, not by supporting paragraph ids."""
        return bool(self.evidence)

    @property
    def supporting_titles(self) -> list[str]:
        """What a result row names as the gold support: documents for a docs question, else paragraph titles."""
        return list(dict.fromkeys(self.documents)) if self.is_docs else [p.title for p in self.supporting]


def _need(record: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = record.get(key)
    if not isinstance(value, kind):
        raise DataFormatError(f"{where}: field {key!r} is missing or not {getattr(kind, '__name__', kind)}")
    return value


def _from_shared(record: dict[str, Any], where: str) -> Example:
    paragraphs = []
    for i, p in enumerate(_need(record, "paragraphs", list, where)):
        if not (isinstance(p, dict) and isinstance(p.get("title"), str) and isinstance(p.get("text"), str)):
            raise DataFormatError(f"{where}: paragraph {i} needs string 'title' and 'text'")
        paragraphs.append(Paragraph(p["title"], p["text"].strip(), bool(p.get("is_supporting"))))
    decomposition = record.get("question_decomposition")
    return Example(
        id=str(record.get("id", where)), question=_need(record, "question", str, where),
        answers=[_need(record, "answer", str, where), *[a for a in record.get("answer_aliases") or [] if a]],
        type=str(record.get("type") or "unknown"), paragraphs=paragraphs,
        decomposition=[d["question"] for d in decomposition] if isinstance(decomposition, list) else None)


# "own-code": a question that names the asker's own identifiers (`my sync_repos command`), which no page contains;
# reported on its own, apart from a set's headline numbers (eval.py --own-code).
OWN_CODE = "own-code"
DOCS_TYPES = ("fact", "table", "code", "two-section", "two-document", "comparison", OWN_CODE)


def _from_docs(record: dict[str, Any], where: str) -> Example:
    """A docs question: {id, question, answer, evidence: [quote], documents: [path per quote], type}."""
    evidence = _need(record, "evidence", list, where)
    documents = _need(record, "documents", list, where)
    if not evidence or not all(isinstance(e, str) and e.strip() for e in evidence):
        raise DataFormatError(f"{where}: 'evidence' must be a non-empty list of non-empty strings")
    if len(documents) != len(evidence) or not all(isinstance(d, str) and d for d in documents):
        raise DataFormatError(f"{where}: 'documents' must name one document (a path) per evidence string")
    kind = _need(record, "type", str, where)
    if kind not in DOCS_TYPES:
        raise DataFormatError(f"{where}: type {kind!r} is not one of {', '.join(DOCS_TYPES)}")
    return Example(
        id=str(record.get("id", where)), question=_need(record, "question", str, where),
        answers=[_need(record, "answer", str, where), *[a for a in record.get("answer_aliases") or [] if a]],
        type=kind, paragraphs=[], evidence=list(evidence), documents=list(documents))


def _from_musique(record: dict[str, Any], where: str) -> Example:
    paragraphs = []
    for i, p in enumerate(_need(record, "paragraphs", list, where)):
        if not (isinstance(p, dict) and isinstance(p.get("paragraph_text"), str)):
            raise DataFormatError(f"{where}: paragraph {i} needs 'paragraph_text'")
        paragraphs.append(Paragraph(str(p.get("title", "")), p["paragraph_text"].strip(), bool(p.get("is_supporting"))))
    decomposition = record.get("question_decomposition") or []
    hops = len(decomposition)
    return Example(
        id=str(record.get("id", where)), question=_need(record, "question", str, where),
        answers=[_need(record, "answer", str, where), *[a for a in record.get("answer_aliases") or [] if a]],
        type=f"{hops}hop" if hops else "unknown", paragraphs=paragraphs,
        decomposition=[d["question"] for d in decomposition] or None)


def _from_hotpot_style(record: dict[str, Any], where: str) -> Example:
    """HotpotQA distractor / 2WikiMultihopQA: context [[title, [sentences]]], supporting_facts [[title, i]]."""
    context = _need(record, "context", list, where)
    supporting = {fact[0] for fact in _need(record, "supporting_facts", list, where) if isinstance(fact, list) and fact}
    paragraphs = []
    for i, item in enumerate(context):
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], list)):
            raise DataFormatError(f"{where}: context item {i} is not [title, [sentences]]")
        title, sentences = item
        paragraphs.append(Paragraph(str(title), "".join(sentences).strip(), title in supporting))
    return Example(
        id=str(record.get("_id", record.get("id", where))), question=_need(record, "question", str, where),
        answers=[_need(record, "answer", str, where)], type=str(record.get("type") or "unknown"),
        paragraphs=paragraphs)


def _pick_parser(record: dict[str, Any]):
    if "evidence" in record and "paragraphs" not in record:
        return _from_docs
    if "context" in record and "supporting_facts" in record:
        return _from_hotpot_style
    paragraphs = record.get("paragraphs")
    if isinstance(paragraphs, list) and paragraphs and isinstance(paragraphs[0], dict) \
            and "paragraph_text" in paragraphs[0]:
        return _from_musique
    return _from_shared


OUT_OF_COLLECTION = "out-of-collection"
# Questions asked against a set's collection beside its own, each type counted apart from the set's headline numbers.
ASIDE_TYPES = (OUT_OF_COLLECTION, OWN_CODE)


def _read(path: Path) -> str:
    if not path.exists():
        raise DataFormatError(f"{path}: no such file")
    return path.read_text(encoding="utf-8")


def _json_lines(path: Path, text: str) -> list[tuple[int, Any]]:
    """Each non-blank line of `text` (the JSONL file at `path`) parsed, with its 1-based line number."""
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line)))
        except json.JSONDecodeError as error:
            raise DataFormatError(f"{path}:{number}: not valid JSON ({error.msg})") from None
    return records


def load_out_of_collection(path: Path) -> list[Example]:
    """Questions no benchmark collection answers ({question, kind?, split?} per line), as examples of type
    "out-of-collection": no gold answer, no paragraphs (they add nothing to a pooled corpus); scored by whether the
    answer abstains."""
    examples = []
    for number, record in _json_lines(path, _read(path)):
        question = record.get("question") if isinstance(record, dict) else None
        if not isinstance(question, str) or not question.strip():
            raise DataFormatError(f"{path}:{number}: 'question' must be a non-empty string")
        examples.append(Example(id=f"ooc-{number}", question=question, answers=[], type=OUT_OF_COLLECTION,
                                paragraphs=[], extra={k: v for k, v in record.items() if k != "question"}))
    return examples


def load_own_code(path: Path, *, set_name: str | None = None) -> list[Example]:
    """Docs questions (`_from_docs`, each of type "own-code") that name the asker's own code, optionally only those
    whose `set` is `set_name`: answerable from a docs set's pages, asked beside that set's questions."""
    examples = []
    for number, record in _json_lines(path, _read(path)):
        if not isinstance(record, dict):
            raise DataFormatError(f"{path}:{number}: expected a JSON object")
        if record.get("type") != OWN_CODE:
            raise DataFormatError(f"{path}:{number}: type must be {OWN_CODE!r}")
        if set_name is None or record.get("set") == set_name:
            examples.append(_from_docs(record, f"{path}:{number}"))
    return examples


def load_examples(path: Path, *, limit: int | None = None, seed: int | None = None,
                  per_type: int | None = None) -> list[Example]:
    """Every example in the file (format detected), optionally shuffled by `seed`, then at most `per_type` of
    each question type (in that order), then the first `limit`."""
    text = _read(path)
    records: list[tuple[Any, str]]
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise DataFormatError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None
        records = [(r, f"{path}: record {i}") for i, r in enumerate(data)]
    else:
        records = [(record, f"{path}:{number}") for number, record in _json_lines(path, text)]
    examples = []
    for record, where in records:
        if not isinstance(record, dict):
            raise DataFormatError(f"{where}: expected a JSON object")
        examples.append(_pick_parser(record)(record, where))
    if seed is not None:
        random.Random(seed).shuffle(examples)
    if per_type:
        taken: Counter[str] = Counter()
        kept = []
        for example in examples:
            if taken[example.type] < per_type:
                taken[example.type] += 1
                kept.append(example)
        examples = kept
    return examples[:limit] if limit else examples


_RELATION_STEP = re.compile(r"^(?P<subject>.+?)\s*>>\s*(?P<relation>.+?)\s*\??$")


# Wikidata relations whose "What is the <relation> of X?" would not read as a question.
_RELATION_QUESTIONS = {
    "located in the administrative territorial entity": "In which administrative territory is {subject} located?",
    "country": "In which country is {subject}?",
    "part of": "What is {subject} part of?",
    "part of the series": "Which series is {subject} part of?",
    "educated at": "Where was {subject} educated?",
    "instance of": "What is {subject} an instance of?",
    "shares border with": "What shares a border with {subject}?",
    "location": "Where is {subject} located?",
    "member of political party": "Which political party is {subject} a member of?",
    "member of sports team": "Which sports team is {subject} a member of?",
    "applies to jurisdiction": "Which jurisdiction does {subject} apply to?",
    "located in or next to body of water": "Which body of water is {subject} located in or next to?",
    "licensed to broadcast to": "Where is {subject} licensed to broadcast to?",
    "follows": "What does {subject} follow?",
    "capital of": "What is {subject} the capital of?",
    "location of formation": "Where was {subject} formed?",
    "conflict": "Which conflict was {subject} in?",
}


_PERSON_RELATIONS = frozenset(
    """performer author composer producer director creator father mother spouse sibling child""".split())


def natural_step(text: str) -> str:
    """A gold step as a question: MuSiQue writes Wikidata steps as "X >> relation" ("#1 >> place of birth",
    "Tikhaya Sosna >> mouth of the watercourse"); the cross-encoder (MS MARCO) and an LLM resolver are trained
    on questions, "What is the place of birth of #1?". Offline it changed no oracle row measured (a hop's
    bridge searches use the same content words either way). Other steps stay as written."""
    step = _RELATION_STEP.match(text.strip())
    if step is None:
        return text
    subject, relation = step["subject"].strip(" ,"), step["relation"].strip()
    asks = "Who" if relation.lower() in _PERSON_RELATIONS else "What"
    template = _RELATION_QUESTIONS.get(relation.lower(), asks + " is the {relation} of {subject}?")
    return template.format(subject=subject, relation=relation)


def decomposition_plan(example: Example) -> dict[str, Any] | None:
    """A MuSiQue gold decomposition as a dagrag Plan: "X >> relation" steps as questions (`natural_step`), '#1'
    becomes a reference to s1, and a parent link."""
    if not example.decomposition:
        return None
    subqueries = []
    for i, text in enumerate(example.decomposition, start=1):
        parents = sorted({f"s{n}" for n in re.findall(r"#(\d+)", text) if int(n) < i})
        subqueries.append({"id": f"s{i}", "text": re.sub(r"#(\d+)", r"{s\1}", natural_step(text)),
                           "parents": parents})
    return {"query": example.question, "subqueries": subqueries}

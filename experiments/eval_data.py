"""Load multi-hop QA data in the shared JSONL format or the official HotpotQA, 2Wiki and MuSiQue files."""

from __future__ import annotations

import json
import random
import re
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

    @property
    def supporting(self) -> list[Paragraph]:
        return [p for p in self.paragraphs if p.is_supporting]


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
    if "context" in record and "supporting_facts" in record:
        return _from_hotpot_style
    paragraphs = record.get("paragraphs")
    if isinstance(paragraphs, list) and paragraphs and isinstance(paragraphs[0], dict) \
            and "paragraph_text" in paragraphs[0]:
        return _from_musique
    return _from_shared


def load_examples(path: Path, *, limit: int | None = None, seed: int | None = None) -> list[Example]:
    """Every example in the file (format detected), optionally a seeded sample of `limit` of them."""
    if not path.exists():
        raise DataFormatError(f"{path}: no such file")
    text = path.read_text(encoding="utf-8")
    records: list[tuple[Any, str]]
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise DataFormatError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None
        records = [(r, f"{path}: record {i}") for i, r in enumerate(data)]
    else:
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append((json.loads(line), f"{path}:{number}"))
            except json.JSONDecodeError as error:
                raise DataFormatError(f"{path}:{number}: not valid JSON ({error.msg})") from None
    examples = []
    for record, where in records:
        if not isinstance(record, dict):
            raise DataFormatError(f"{where}: expected a JSON object")
        examples.append(_pick_parser(record)(record, where))
    if seed is not None:
        random.Random(seed).shuffle(examples)
    return examples[:limit] if limit else examples


def decomposition_plan(example: Example) -> dict[str, Any] | None:
    """A MuSiQue gold decomposition as a dagrag Plan: '#1' becomes a reference to s1, and a parent link."""
    if not example.decomposition:
        return None
    subqueries = []
    for i, text in enumerate(example.decomposition, start=1):
        parents = sorted({f"s{n}" for n in re.findall(r"#(\d+)", text) if int(n) < i})
        subqueries.append({"id": f"s{i}", "text": re.sub(r"#(\d+)", r"{s\1}", text), "parents": parents})
    return {"query": example.question, "subqueries": subqueries}

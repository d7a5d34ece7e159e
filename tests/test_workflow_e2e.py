"""End to end over an embedded Qdrant on disk, real MiniLM embeddings and the real cross-encoder."""

from __future__ import annotations

import pytest

from dagrag import CollectionNotFoundError, InvalidQuestionError, QdrantUnavailableError, QueryResult, Settings
from dagrag.work_flows.events import LayerStarted, SubqueryDone, VerificationDone
from dagrag.work_flows.progress import AnswerWritten, LayerDone, PlanChosen
from dagrag.work_flows.query_workflow import QueryWorkflow

from .conftest import record_for, sample_records

DERRICKSON = "Were Scott Derrickson and Ed Wood of the same nationality?"


async def test_comparison_question_gets_one_subquery_per_person_and_both_gold_paragraphs(make_workflow):
    result = await make_workflow().run(query=DERRICKSON)
    assert isinstance(result, QueryResult)
    assert result.plan.origin.value == "offline" and result.path == "dag"
    # one side each, then the question itself (every plan searches it)
    assert [sq.hints.must_include for sq in result.plan.subqueries] == [["Scott Derrickson"], ["Ed Wood"], []]
    assert [sq.role for sq in result.plan.subqueries] == ["side", "side", "question"]
    assert result.plan.layers == [["s1", "s2", "s0"]]
    titles = {s.metadata["title"] for s in result.sources}
    assert set(record_for(DERRICKSON)["supporting_titles"]) <= titles
    best = {s.subquery_id: s.metadata["title"] for s in result.sources if s.rank_in_subquery == 1}
    assert best == {"s1": "Scott Derrickson", "s2": "Ed Wood"}


async def test_names_typed_in_lower_case_are_known_from_the_collections_titles(make_workflow):
    result = await make_workflow().run(query=DERRICKSON.lower())
    assert result.plan.layers == [["s1", "s2", "s0"]]
    best = {s.subquery_id: s.metadata["title"] for s in result.sources if s.rank_in_subquery == 1}
    assert best == {"s1": "Scott Derrickson", "s2": "Ed Wood"}


async def test_a_than_comparison_searches_each_side_and_finds_both_people(make_workflow):
    result = await make_workflow().run(query="Was Ed Wood born earlier than Scott Derrickson?")
    assert [sq.text for sq in result.plan.subqueries][:2] == ["Ed Wood born date", "Scott Derrickson born date"]
    best = {s.subquery_id: s.metadata["title"] for s in result.sources if s.rank_in_subquery == 1}
    assert best == {"s1": "Ed Wood", "s2": "Scott Derrickson"}


async def test_a_list_of_three_people_is_one_layer_of_three_searches(make_workflow):
    result = await make_workflow().run(query="Who is older, Scott Derrickson, Ed Wood or Shirley Temple?")
    assert result.plan.layers == [["s1", "s2", "s3", "s0"]]
    best = {s.subquery_id: s.metadata["title"] for s in result.sources if s.rank_in_subquery == 1}
    assert best == {"s1": "Scott Derrickson", "s2": "Ed Wood", "s3": "Shirley Temple"}


async def test_result_fields_are_complete_and_consistent(make_workflow):
    result = await make_workflow().run(query=DERRICKSON)
    features = result.retrieval_confidence_features
    assert {"subquery_count", "covered_count", "coverage_ratio"} <= set(features)
    assert features["subquery_count"] == 3 and features["coverage_ratio"] == features["covered_count"] / 3
    assert result.retrieval_confidence in {"high", "mid", "low"}
    assert 0 < len(result.sources) <= Settings().context_budget
    assert all(s.subquery_id in {"s1", "s2", "s0"} and s.rank_in_subquery >= 1 and 0 <= s.score <= 1
               for s in result.sources)
    assert {"plan_s", "search_s", "rerank_s", "judge_s", "write_s", "verify_s", "total_s"} <= set(result.timings)
    assert not result.abstained and result.abstain_reason is None
    assert result.llm_calls.count == 0
    # The extractive answer cites the sources it was built from, and the verifier checks each sentence.
    assert result.verification.sentences and result.verification.method == "lexical+cross-encoder"
    for check in result.verification.sentences:
        assert check.citations and all(1 <= n <= len(result.sources) for n in check.citations)
        source = result.sources[check.supporting_source - 1]
        quoted = check.sentence.split(" [")[0].removeprefix(f"{source.metadata['title']}: ")  # "Title: It ..."
        assert check.supported and quoted in source.text
    assert result.model_dump(mode="json")["plan"]["origin"] == "offline"


@pytest.mark.parametrize("record", [r for r in sample_records() if r["type"] == "comparison"][:5],
                         ids=lambda r: r["question"][:40])
async def test_offline_plans_find_the_gold_paragraphs_of_comparison_questions(make_workflow, record):
    result = await make_workflow().run(query=record["question"])
    assert [sq.role for sq in result.plan.subqueries] == ["side", "side", "question"]
    titles = {s.metadata["title"] for s in result.sources}
    assert set(record["supporting_titles"]) <= titles


async def test_single_query_path_when_dag_is_off(make_workflow):
    result = await make_workflow(planner_enable_dag=False).run(query=DERRICKSON)
    assert result.path == "single" and len(result.plan.subqueries) == 1
    assert result.plan.subqueries[0].text == DERRICKSON
    assert len(result.sources) == Settings().context_budget
    assert [s.rank_in_subquery for s in result.sources] == [1, 2, 3, 4]


async def test_progress_is_streamed_in_pipeline_order(make_workflow):
    handler = make_workflow().run(query=DERRICKSON)
    seen = [type(event).__name__ async for event in handler.stream_events()
            if isinstance(event, (PlanChosen, LayerStarted, SubqueryDone, LayerDone, AnswerWritten,
                                  VerificationDone))]
    result = await handler
    assert seen == ["PlanChosen", "LayerStarted", "SubqueryDone", "SubqueryDone", "SubqueryDone", "LayerDone",
                    "AnswerWritten", "VerificationDone"]
    assert result.answer


async def test_history_turns_a_follow_up_into_a_standalone_question(make_workflow):
    history = ["Who starred as Corliss Archer in Kiss and Tell?", "Shirley Temple starred as Corliss Archer."]
    result = await make_workflow().run(query="What government position did she hold?", history=history)
    assert "Shirley Temple" in result.plan.query
    assert any(s.metadata["title"] == "Shirley Temple" for s in result.sources)


@pytest.mark.parametrize(("query", "message"), [
    ("", "empty"), ("   \n\t ", "empty"), (None, "no question"), (42, "must be a string"),
    ("x" * 2001, "limit is 2000"), ("who\x00 is", "control characters"),
])
async def test_bad_questions_are_refused_with_a_clear_error(make_workflow, query, message):
    with pytest.raises(InvalidQuestionError, match=message):
        await make_workflow().run(query=query)


def test_missing_collection_suggests_ingest(tmp_path, embed_model, reranker):
    settings = Settings(qdrant_path=tmp_path, collection="nothing_here")
    with pytest.raises(CollectionNotFoundError, match=r"nothing_here.*dagrag ingest"):
        QueryWorkflow.from_settings(settings, embed_model=embed_model, reranker=reranker)


def test_unreachable_qdrant_url_names_the_url(embed_model, reranker):
    settings = Settings(qdrant_url="http://127.0.0.1:9", qdrant_timeout_s=1)
    with pytest.raises(QdrantUnavailableError, match=r"127\.0\.0\.1:9"):
        QueryWorkflow.from_settings(settings, embed_model=embed_model, reranker=reranker)

"""Several `dagrag serve` replicas sharing one Postgres runs store (DAGRAG_SERVE_RUNS_DB=postgresql://…).

A throwaway Postgres cluster (initdb in a temporary folder, a free port on 127.0.0.1, password authentication) is
started once for the session when the Postgres server binaries are installed; the tests that need it are skipped
otherwise. Replicas are real servers (tests/test_serve.py's `make_server`) in threads of this process.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from dagrag import Settings
from dagrag.config import settings_problems
from dagrag.server.keys import Caller
from dagrag.server.runs_db import PostgresRunOwners, RunOwners, SqliteRunOwners

from .conftest import ROOT
from .test_serve import (  # noqa: F401 (make_server: the fixture)
    ALICE,
    BOB,
    DERRICKSON,
    HANG_GUARD_S,
    KISS_AND_TELL,
    GatedScorer,
    make_server,
)

PASSWORD = "pg-Secret-7f3a9c"  # must never reach a log line, a response or an error message
USER, DATABASE = "dagrag", "dagrag_runs"
PG_BINARIES = ("initdb", "pg_ctl", "createdb")


def postgres_bin() -> Path | None:
    """The folder of the newest installed Postgres server's binaries (Debian keeps them off PATH), or None."""
    folders = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name)
                     if p.parent.name.isdigit() else 0, reverse=True)
    on_path = shutil.which("pg_ctl")
    if on_path:
        folders.append(Path(on_path).parent)
    return next((folder for folder in folders if all((folder / name).is_file() for name in PG_BINARIES)), None)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def closed_port() -> int:
    return free_port()  # nothing listens there once the probe socket is closed


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """`postgresql://dagrag:…@127.0.0.1:PORT/dagrag_runs` of a cluster of its own, stopped and removed at the end."""
    pytest.importorskip("asyncpg", reason="the postgres extra (asyncpg) is not installed")
    binaries = postgres_bin()
    if binaries is None:
        pytest.skip("no Postgres server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin or on PATH")
    user: str | None = None
    if os.geteuid() == 0:  # Postgres refuses to run as root: the cluster is the `postgres` user's
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no `postgres` user to run the Postgres server as")
        user = "postgres"
    base = Path(tempfile.mkdtemp(prefix="dagrag-pg-"))  # under /tmp, where that user can reach it
    if user:
        shutil.chown(base, user)
    (base / "password").write_text(PASSWORD + "\n")
    if user:
        shutil.chown(base / "password", user)
    port = free_port()

    def run(*command: str) -> None:
        done = subprocess.run(command, user=user, capture_output=True, text=True, timeout=120, cwd=base)
        assert done.returncode == 0, f"{command[0]} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}"

    try:
        run(str(binaries / "initdb"), "-D", str(base / "data"), "-U", USER, f"--pwfile={base / 'password'}",
            "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync")
        run(str(binaries / "pg_ctl"), "-D", str(base / "data"), "-l", str(base / "log"), "-w", "-t", "60",
            "-o", f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        run(str(binaries / "createdb"), "-h", str(base), "-p", str(port), "-U", USER, DATABASE)
        yield f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{port}/{DATABASE}"
    finally:
        if (base / "data" / "postmaster.pid").exists():  # started, even if `pg_ctl start` gave up waiting
            subprocess.run([str(binaries / "pg_ctl"), "-D", str(base / "data"), "-m", "fast", "-w", "stop"],
                           user=user, capture_output=True, timeout=120, cwd=base)
        shutil.rmtree(base, ignore_errors=True)


def as_client(url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=HANG_GUARD_S)


def test_replicas_share_runs_and_owners_and_a_restarted_replica_still_sees_them(
        make_server, postgres_url: str, caplog: pytest.LogCaptureFixture):  # noqa: F811 (the imported fixture)
    settings = {"serve_runs_db": postgres_url, "api_keys": f"alice={ALICE},bob={BOB}"}
    seen: list[str] = []  # every response body, to check none carries the password
    with caplog.at_level("DEBUG"), make_server(**settings) as two, as_client(two.url, ALICE) as alice_two, \
            as_client(two.url, BOB) as bob_two:
        with make_server(**settings) as one, as_client(one.url, ALICE) as alice_one, \
                as_client(one.url, BOB) as bob_one:
            started = alice_one.post("/workflows/dagrag/run", json={"start_event": {"query": DERRICKSON}})
            assert started.status_code == 200, started.text
            mine = started.json()["handler_id"]
            # The other replica finds the finished run, and that it is alice's
            handler = alice_two.get(f"/handlers/{mine}")
            assert handler.status_code == 200 and handler.json()["status"] == "completed", handler.text
            assert handler.json()["result"]["value"]["result"]["question"] == DERRICKSON
            assert alice_two.get(f"/results/{mine}").status_code == 200
            assert [h["handler_id"] for h in alice_two.get("/handlers").json()["handlers"]] == [mine]
            for path in (f"/handlers/{mine}", f"/results/{mine}", f"/events/{mine}"):
                refused = bob_two.get(path)
                assert refused.status_code == 404 and refused.json() == {"detail": "Handler not found"}, path
                seen.append(refused.text)
            # A handler id is one client's on every replica: bob cannot take alice's through the other one
            stolen = bob_two.post("/workflows/dagrag/run-nowait",
                                  json={"start_event": {"query": DERRICKSON}, "handler_id": mine})
            assert stolen.status_code == 409 and stolen.json()["field"] == "handler_id"
            # ... and bob's own run, started on the second replica, is his alone on the first
            theirs = bob_two.post("/workflows/dagrag/run", json={"start_event": {"query": KISS_AND_TELL}})
            assert theirs.status_code == 200, theirs.text
            bobs = theirs.json()["handler_id"]
            assert bob_one.get(f"/handlers/{bobs}").json()["status"] == "completed"
            assert alice_one.get(f"/handlers/{bobs}").status_code == 404
            assert [h["handler_id"] for h in alice_one.get("/handlers").json()["handlers"]] == [mine]
            seen += [started.text, handler.text, stolen.text, theirs.text]

        # The first replica restarts (a new process's worth of state) while the second serves on
        with make_server(**settings) as again, as_client(again.url, ALICE) as alice, \
                as_client(again.url, BOB) as bob:
            handler = alice.get(f"/handlers/{mine}")
            assert handler.status_code == 200 and handler.json()["status"] == "completed"
            assert handler.json()["result"]["value"]["result"]["question"] == DERRICKSON
            assert [h["handler_id"] for h in alice.get("/handlers").json()["handlers"]] == [mine]
            assert bob.get(f"/handlers/{mine}").status_code == 404  # still alice's after the restart
            assert bob.get(f"/handlers/{bobs}").status_code == 200
            seen.append(handler.text)
        assert alice_two.get(f"/handlers/{mine}").status_code == 200
    assert not any(PASSWORD in text for text in seen)
    assert PASSWORD not in caplog.text


def cli_serve(runs_db: str) -> subprocess.CompletedProcess[str]:
    """`dagrag serve` in a process of its own with DAGRAG_SERVE_RUNS_DB set, as a user starts it."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DAGRAG_")}
    env.update({"DAGRAG_SERVE_RUNS_DB": runs_db, "DAGRAG_SERVE_PORT": str(closed_port()), "COLUMNS": "400"})
    return subprocess.run([sys.executable, "-m", "dagrag.cli", "serve"], env=env, capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def assert_one_clear_error(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output and PASSWORD not in output, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: DAGRAG_SERVE_RUNS_DB"), output
    for part in expected:
        assert part in lines[0], output


@pytest.mark.parametrize(("url", "expected"), [
    (f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{closed_port()}/{DATABASE}", f"postgresql://{USER}:***@127.0.0.1:"),
    (f"postgres://{USER}:{PASSWORD}@127.0.0.1:{closed_port()}/{DATABASE}", "cannot use the Postgres database"),
    (f"mysql://{USER}:{PASSWORD}@127.0.0.1/{DATABASE}", "expected a SQLite file path"),
])
def test_an_unreachable_or_malformed_database_is_one_startup_error_naming_the_setting_never_the_password(
        url: str, expected: str):
    assert_one_clear_error(cli_serve(url), expected)


@pytest.mark.parametrize(("url", "expected"), [
    (f"mysql://{USER}:{PASSWORD}@127.0.0.1/{DATABASE}", "expected a SQLite file path, `memory` or a postgresql://"),
    (f"postgresql://{USER}:{PASSWORD}@127.0.0.1:port/{DATABASE}", "the port is not a number"),
    (f"postgresql://{USER}:pg/Secret@127.0.0.1/{DATABASE}", "percent-encoded"),  # a raw `/` in the password
])
def test_a_malformed_url_is_refused_by_the_settings_naming_the_setting_never_the_password(url: str, expected: str):
    with pytest.raises(ValueError) as refused:
        Settings(serve_runs_db=url)
    line = settings_problems(refused.value)
    assert line.startswith("DAGRAG_SERVE_RUNS_DB=") and expected in line
    assert PASSWORD not in line and "Secret" not in line


def test_the_password_is_hidden_wherever_settings_are_written_out():
    settings = Settings(serve_runs_db=f"postgresql://{USER}:{PASSWORD}@db.internal:5432/{DATABASE}")
    assert settings.serve_runs_db.endswith(f":{PASSWORD}@db.internal:5432/{DATABASE}")  # the server connects with it
    assert settings.model_dump(mode="json")["serve_runs_db"] == f"postgresql://{USER}:***@db.internal:5432/{DATABASE}"


@pytest.mark.parametrize(("change", "expected"), [
    (lambda url: url.replace(f":{PASSWORD}@", ":wrong-password@"), "password authentication failed"),
    (lambda url: url.rsplit("/", 1)[0] + "/no_such_db", 'database "no_such_db" does not exist'),
])
def test_a_database_that_refuses_is_one_startup_error_saying_why(postgres_url: str, change, expected: str):
    assert_one_clear_error(cli_serve(change(postgres_url)), expected)


def test_a_run_under_way_on_one_replica_streams_its_events_from_another(
        make_server, reranker, postgres_url: str):  # noqa: F811 (the imported fixture)
    settings = {"serve_runs_db": postgres_url, "api_keys": f"alice={ALICE},bob={BOB}"}
    gate = GatedScorer(reranker.scorer)
    with make_server(gate=gate, **settings) as one, make_server(**settings) as two, \
            as_client(one.url, ALICE) as alice_one, as_client(two.url, ALICE) as alice_two, \
            as_client(two.url, BOB) as bob_two:
        started = alice_one.post("/workflows/dagrag/run-nowait", json={"start_event": {"query": KISS_AND_TELL}})
        assert started.status_code == 200, started.text
        handler_id = started.json()["handler_id"]
        assert gate.reached.wait(HANG_GUARD_S)  # under way on the first replica, held at the reranker
        assert alice_two.get(f"/handlers/{handler_id}").json()["status"] == "running"
        assert bob_two.get(f"/events/{handler_id}").status_code == 404
        names = []
        with alice_two.stream("GET", f"/events/{handler_id}", params={"sse": "true", "after_sequence": -1}) as stream:
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    names.append(json.loads(line.removeprefix("data:"))["type"])
                    gate.gate.set()  # opened only once the other replica streams: the rest arrives live
        assert names[0] != "StopEvent" and names[-1] == "StopEvent"
        assert {"PlanChosen", "SubqueryDone", "AnswerWritten", "VerificationDone"} <= set(names)
        assert alice_two.get(f"/handlers/{handler_id}").json()["status"] == "completed"



@pytest.fixture(params=["sqlite", "postgres"])
def owners_tables(request: pytest.FixtureRequest) -> Callable[[int], RunOwners]:
    """Owners tables of one kind with a given limit; two made by the same test share their rows (two replicas)."""
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        return lambda limit: PostgresRunOwners(url, limit=limit)
    path = request.getfixturevalue("tmp_path") / "runs.sqlite3"
    return lambda limit: SqliteRunOwners(path, limit=limit)


async def test_both_owners_tables_keep_the_same_rules(owners_tables: Callable[[int], RunOwners]):
    suffix = uuid.uuid4().hex  # the Postgres table outlives a test
    alice, carol, ops = Caller("alice", admin=False), Caller("carol", admin=False), Caller("ops", admin=True)
    one, two = owners_tables(2), owners_tables(2)
    await one.start()
    await two.start()
    try:
        for handler_id in ("h1", "h2", "h3"):
            assert await one.claim(f"{handler_id}-{suffix}", alice)
        assert await two.owner(f"h3-{suffix}") == "alice"  # the other replica's view
        assert not await two.may_see(f"h1-{suffix}", alice)  # the oldest forgotten: admin-only now
        assert await two.may_see(f"h3-{suffix}", alice) and await two.may_see(f"h3-{suffix}", ops)
        assert not await two.may_see(f"h3-{suffix}", carol)
        assert not await two.claim(f"h3-{suffix}", carol) and await two.claim(f"h3-{suffix}", ops)
        assert await one.owner(f"h3-{suffix}") == "alice"  # an admin's claim takes nothing away
        # Two replicas naming the same new run at once: exactly one client gets it
        won = await asyncio.gather(one.claim(f"race-{suffix}", alice), two.claim(f"race-{suffix}", carol))
        assert sorted(won) == [False, True]
    finally:
        await one.close()
        await two.close()
